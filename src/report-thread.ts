// The report worker as the event loop sees it (core's ReportPort): batches go to the worker thread
// (report-worker.ts) with their body buffer transferred, and come back as outcomes once written. The
// thread starts with the first batch (a relay that records nothing, and an idle one, pays nothing for it),
// or at once when an earlier run left reports in the outbox. A thread that dies fails what it held (the
// API answers those 503) and is started again for the next batch. A thread with nothing to do stops after
// RELAY_REPORT_WORKER_IDLE_MS (its heap, the tokenizer's tables and SQLite's page cache are tens of MB of
// memory a quiet relay need not hold) and starts again with the next batch, after the stopped one closed.
import { existsSync, statSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import type { RecordBatch } from './core/exchange-record.js';
import type { ReportPort, WriterCounters } from './core/report-service.js';
import type { ApiOutcome } from './core/report-sink.js';
import { preparePrivateFile } from './storage/private-files.js';
import { releaseSemiSpaceCap } from './memory-trim.js';
import { type TracingSettings, lastExportBoundMs } from './tracing/tracing-config.js';
import type { UpstreamProxy } from './upstream/upstream-proxy.js';

/** What the worker needs to build its side: plain data (it crosses to the thread). */
export interface ReportThreadSettings {
  reportsUrl: string;
  /** the SQLite report file, for reportsUrl `sqlite` */
  sqliteFile: string;
  outboxFile: string;
  /** the journal of acknowledged reports (SQLite report store only) */
  journalFile: string;
  /** the data dir, whose size RELAY_DATA_MAX_BYTES bounds */
  dataDir: string;
  reportRetentionMs: number;
  bodyRetentionMs: number;
  dataMaxBytes: number;
  pricesFile: string;
  maxBodyBytes: number;
  maxJsonDepth: number;
  flushMs: number;
  writeDelayMs: number;
  batchMax: number;
  outboxRetryMs: number;
  /** a worker with nothing to do stops after this long (0: it runs until the relay stops) */
  idleStopMs: number;
  /** set by report-thread.ts for a worker started after an idle stop (its retention had no backlog) */
  resumed?: boolean;
  defaults: { client: string; clientVersion: string; environment: string };
  /** OTEL_* settings: with tracing on, the worker builds and exports the spans (src/tracing/span-export.ts) */
  tracing: TracingSettings;
  /** HTTPS_PROXY / HTTP_PROXY / NO_PROXY: the span exporter reaches its endpoint as the calls upstream do */
  upstreamProxy?: UpstreamProxy;
}

export interface ReportThreadLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Messages from the worker. */
export type FromWorker =
  | { t: 'done'; n: number; outcomes?: ApiOutcome[]; counters: WriterCounters }
  | { t: 'counters'; counters: WriterCounters }
  /** whether retention has a backlog to work off (then the worker is not stopped for being idle) */
  | { t: 'pruning'; more: boolean; counters: WriterCounters }
  | { t: 'log'; level: 'warn' | 'error'; obj: Record<string, unknown>; msg: string }
  /** a worker stopped for being idle has handed its last spans to the endpoint (tracing on), and ends */
  | { t: 'spans-done'; counters: WriterCounters };

/** Messages to the worker. */
export type ToWorker =
  | { t: 'batch'; n: number; batch: RecordBatch }
  | { t: 'flush'; n: number }
  /** the relay stops: write everything, export the last spans, close, answer */
  | { t: 'close'; n: number }
  /** stopped for being idle: write everything, close, answer, then export the last spans ('spans-done') */
  | { t: 'idle-close'; n: number };

// Under vitest the relay runs from src/ (TypeScript), which a worker thread cannot load: it runs the
// build's copy (npm test builds first).
const WORKER_URL = import.meta.url.endsWith('.ts')
  ? new URL('../dist/report-worker.js', import.meta.url)
  : new URL('./report-worker.js', import.meta.url);

/**
 * The worker's young generation (both semi-spaces), in MB. A `--max-semi-space-size` on Node's command line would
 * outweigh it (V8's flags hold for every isolate, and the relay's restart puts one there for the event loop):
 * the flag is taken back before the worker starts (memory-trim.ts, releaseSemiSpaceCap).
 */
const YOUNG_GENERATION_MB = 8;

/**
 * A worker started again this soon after it stopped for being idle waits twice as long before its next idle
 * stop (up to IDLE_STOP_MAX_MS): traffic every few seconds must not cost a thread start per exchange.
 */
const RESTART_SOON_MS = 30_000;
const IDLE_STOP_MAX_MS = 60_000;
/** A stopped worker is started this often for a retention step, so reports expire on an idle relay too. */
const RETENTION_WAKE_MS = 10 * 60_000;
/** How long a stopped worker may take over its last export beyond the export's own bound (see stop()). */
const SPANS_DONE_SLACK_MS = 1000;

type SpanCounters = NonNullable<WriterCounters['spans']>;

function addSpans(into: SpanCounters, from: SpanCounters): void {
  into.exported += from.exported;
  into.failed += from.failed;
  into.dropped += from.dropped;
}

interface Pending {
  resolve(outcomes: ApiOutcome[] | undefined): void;
  reject(err: Error): void;
}

/** The port, and how its thread stands (for tests). */
export interface ReportThread extends ReportPort {
  readonly state: 'stopped' | 'running' | 'stopping';
  /** threads started so far */
  readonly starts: number;
}

export function createReportThread(settings: ReportThreadSettings, log: ReportThreadLog): ReportThread {
  let worker: Worker | undefined;
  let next = 0;
  const pending = new Map<number, Pending>();
  let counters: WriterCounters = { pending: 0, written: 0, dropped: 0, outboxDepth: 0 };
  // With tracing on, each worker counts its own spans from 0: those of workers that ended are carried here,
  // and a stopped worker still exporting its last spans counts on beside the next one, so the totals in
  // /metrics only grow.
  const spansEnded: SpanCounters = { exported: 0, failed: 0, dropped: 0 };
  const spansOf = new Map<Worker, SpanCounters>();
  /** stopped workers still handing their last spans to the endpoint */
  const draining = new Set<Promise<void>>();
  /** how each of them says its last spans are out (its 'spans-done' message) */
  const spansDone = new Map<Worker, () => void>();
  let closed = false;
  /** an idle worker on its way out: the next one starts once it has closed its files */
  let stopping: Promise<void> | undefined;
  let pruning = false;
  let idleMs = settings.idleStopMs;
  let idleTimer: NodeJS.Timeout | undefined;
  let lastBusy = 0;
  let stoppedAt = -Infinity;
  /** the last worker stopped for being idle and closed cleanly (not one that died) */
  let resumable = false;
  let wakeTimer: NodeJS.Timeout | undefined;
  const retains = settings.reportRetentionMs > 0 || settings.bodyRetentionMs > 0 || settings.dataMaxBytes > 0;

  function failAll(err: Error): void {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  }

  // One timer while a worker runs, armed for the rest of the wait: nothing per batch but a timestamp. When
  // the wait is over, a flush asks the worker how it stands (its writer may hold reports a moment, or an
  // outbox it retries): only a worker with nothing held, nothing in its outbox and no retention backlog
  // is stopped.
  function armIdle(ms: number): void {
    if (settings.idleStopMs <= 0 || closed || idleTimer) return;
    idleTimer = setTimeout(idleCheck, ms);
    idleTimer.unref();
  }
  function idleCheck(): void {
    idleTimer = undefined;
    const w = worker;
    if (!w || closed) return;
    const quietFor = performance.now() - lastBusy;
    if (pending.size > 0 || quietFor < idleMs) return armIdle(Math.max(1, idleMs - quietFor));
    const n = next++;
    pending.set(n, {
      resolve: () => {
        if (worker !== w || closed) return;
        if (pending.size === 0 && counters.pending === 0 && counters.outboxDepth === 0 && !pruning && performance.now() - lastBusy >= idleMs) stop(w);
        else armIdle(idleMs);
      },
      reject: () => undefined,
    });
    w.postMessage({ t: 'flush', n } satisfies ToWorker);
  }

  /** Closes an idle worker (its writer writes what waits and empties the journal) and lets the thread go. */
  function stop(w: Worker): void {
    worker = undefined;
    stoppedAt = performance.now();
    const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
    const n = next++;
    const closedReply = new Promise<void>((resolve) => {
      pending.set(n, {
        resolve: () => {
          resumable = true;
          resolve();
        },
        reject: () => resolve(),
      });
    });
    // (with tracing on it says when its last spans are out: listened for before it can say it)
    const spansOut = settings.tracing.enabled ? new Promise<void>((resolve) => spansDone.set(w, resolve)) : undefined;
    w.ref();
    w.postMessage({ t: 'idle-close', n } satisfies ToWorker);
    stopping = Promise.race([closedReply, exited])
      .then(async () => {
        if (spansOut) drain(w, Promise.race([spansOut, exited]));
        else await w.terminate();
      })
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        pending.delete(n);
        stopping = undefined;
        if (retains && !closed) {
          wakeTimer ??= setTimeout(() => {
            wakeTimer = undefined;
            if (!worker && !stopping && !closed) worker = start();
          }, RETENTION_WAKE_MS);
          wakeTimer.unref();
        }
      });
  }

  /**
   * With tracing on, a stopped worker has closed its files (the next one may start at once) but may still
   * be exporting its last spans, for at most the export's own bound: it is let go once it says so.
   */
  function drain(w: Worker, out: Promise<void>): void {
    w.unref();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, lastExportBoundMs(settings.tracing) + SPANS_DONE_SLACK_MS);
      timer.unref();
    });
    const gone: Promise<void> = Promise.race([out, late])
      .then(() => w.terminate())
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        clearTimeout(timer);
        spansDone.delete(w);
        endSpans(w);
        draining.delete(gone);
      });
    draining.add(gone);
  }
  /** a worker's span counts join those of the workers that ended */
  function endSpans(w: Worker): void {
    const last = spansOf.get(w);
    if (!last) return;
    spansOf.delete(w);
    addSpans(spansEnded, last);
  }

  let starts = 0;
  function start(): Worker {
    starts++;
    if (settings.idleStopMs > 0) {
      // started again soon after an idle stop: wait longer before the next one; else the usual wait
      idleMs = performance.now() - stoppedAt < RESTART_SOON_MS ? Math.min(IDLE_STOP_MAX_MS, idleMs * 2) : settings.idleStopMs;
    }
    pruning = true; // until its first retention step says otherwise (a pass a crash cut short may be ahead)
    lastBusy = performance.now();
    armIdle(idleMs);
    // A small young generation: the worker's garbage is short-lived per batch, and its default (as large as
    // the main thread's) would hold tens of MB of RSS for nothing after a burst.
    const workerData: ReportThreadSettings = resumable ? { ...settings, resumed: true } : settings;
    resumable = false;
    releaseSemiSpaceCap();
    const w = new Worker(WORKER_URL, { workerData, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } });
    w.on('message', (msg: FromWorker) => {
      if (msg.t === 'log') {
        log[msg.level](msg.obj, msg.msg);
        return;
      }
      if (msg.counters.spans) spansOf.set(w, msg.counters.spans);
      if (msg.t === 'spans-done') return spansDone.get(w)?.();
      // (a stopped worker's last words must not stand for its successor's writer)
      if (worker === w || worker === undefined) counters = msg.counters;
      if (msg.t === 'pruning') pruning = msg.more;
      if (msg.t !== 'done') return;
      const p = pending.get(msg.n);
      if (!p) return;
      pending.delete(msg.n);
      // An idle thread must not keep the process alive; one with work in flight must (at shutdown it may
      // be all that is left, and its reports would be lost if the process ended).
      if (pending.size === 0) w.unref();
      p.resolve(msg.outcomes);
    });
    w.on('error', (err) => {
      log.error({ err }, 'the report worker failed');
      // (a stopped worker still exporting its last spans holds none of its successor's calls)
      if (worker === w || worker === undefined) failAll(err);
    });
    w.on('exit', (code) => {
      // (a worker stopped for being idle had nothing left to fail; its successor's calls are not its own)
      if (worker !== w) return;
      worker = undefined;
      failAll(new Error(`the report worker exited (${code})`));
    });
    w.unref();
    return w;
  }

  function post(msg: ToWorker, transfer: ArrayBuffer[] = []): Promise<ApiOutcome[] | undefined> {
    // After an idle stop, the next worker opens the files only once the last one closed them (in order:
    // every call waits on the same promise).
    if (stopping) return stopping.then(() => post(msg, transfer));
    if (wakeTimer) {
      clearTimeout(wakeTimer);
      wakeTimer = undefined;
    }
    worker ??= start();
    const w = worker;
    lastBusy = performance.now();
    return new Promise((resolve, reject) => {
      pending.set(msg.n, { resolve, reject });
      w.ref();
      w.postMessage(msg, transfer);
    });
  }

  // Reports an earlier run left in the outbox are delivered from the start, not with the first new one;
  // and the file (it holds prompts) is its owner's only, even before the thread opens it.
  // So are reports it acknowledged through the journal that the store may not hold yet.
  for (const file of [settings.outboxFile, settings.journalFile]) {
    if (!existsSync(file)) continue;
    preparePrivateFile(file);
    if (statSync(file).size > 0) worker ??= start();
  }

  return {
    async send(batch) {
      if (closed) throw new Error('the report worker is closed');
      return (await post({ t: 'batch', n: next++, batch }, [batch.bytes])) ?? [];
    },
    async flush() {
      if (stopping) await stopping;
      if (!worker) return;
      await post({ t: 'flush', n: next++ });
    },
    async close() {
      closed = true;
      clearTimeout(idleTimer);
      clearTimeout(wakeTimer);
      if (stopping) await stopping;
      const w = worker;
      if (w) {
        await post({ t: 'close', n: next++ }).catch(() => undefined);
        // (its close exported its last spans before it answered: see report-worker.ts)
        await w.terminate();
        worker = undefined;
        endSpans(w);
      }
      await Promise.all([...draining]);
    },
    get counters() {
      if (!settings.tracing.enabled) return counters;
      const spans = { ...spansEnded };
      for (const c of spansOf.values()) addSpans(spans, c);
      return { ...counters, spans };
    },
    get state() {
      return worker ? 'running' : stopping ? 'stopping' : 'stopped';
    },
    get asleep() {
      return worker === undefined;
    },
    get starts() {
      return starts;
    },
  };
}
