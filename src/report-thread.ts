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
import type { TracingSettings } from './tracing/tracing-config.js';

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
  | { t: 'log'; level: 'warn' | 'error'; obj: Record<string, unknown>; msg: string };

/** Messages to the worker. */
export type ToWorker = { t: 'batch'; n: number; batch: RecordBatch } | { t: 'flush'; n: number } | { t: 'close'; n: number };

// Under vitest the relay runs from src/ (TypeScript), which a worker thread cannot load: it runs the
// build's copy (npm test builds first).
const WORKER_URL = import.meta.url.endsWith('.ts')
  ? new URL('../dist/report-worker.js', import.meta.url)
  : new URL('./report-worker.js', import.meta.url);

/** The worker's young generation (both semi-spaces), in MB. */
const YOUNG_GENERATION_MB = 8;

/**
 * A worker started again this soon after it stopped for being idle waits twice as long before its next idle
 * stop (up to IDLE_STOP_MAX_MS): traffic every few seconds must not cost a thread start per exchange.
 */
const RESTART_SOON_MS = 30_000;
const IDLE_STOP_MAX_MS = 60_000;
/** A stopped worker is started this often for a retention step, so reports expire on an idle relay too. */
const RETENTION_WAKE_MS = 10 * 60_000;

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
    w.ref();
    w.postMessage({ t: 'close', n } satisfies ToWorker);
    stopping = Promise.race([closedReply, exited])
      .then(() => w.terminate())
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
    const w = new Worker(WORKER_URL, { workerData, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } });
    w.on('message', (msg: FromWorker) => {
      if (msg.t === 'log') {
        log[msg.level](msg.obj, msg.msg);
        return;
      }
      counters = msg.counters;
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
      failAll(err);
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
      if (!worker) return;
      const w = worker;
      await post({ t: 'close', n: next++ }).catch(() => undefined);
      await w.terminate();
      worker = undefined;
    },
    get counters() {
      return counters;
    },
    get state() {
      return worker ? 'running' : stopping ? 'stopping' : 'stopped';
    },
    get starts() {
      return starts;
    },
  };
}
