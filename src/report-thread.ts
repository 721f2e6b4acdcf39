// The report worker as the event loop sees it (core's ReportPort): batches go to the worker thread
// (report-worker.ts) with their body buffer transferred, and come back as outcomes once written. The
// thread starts with the first batch (a relay that records nothing, and an idle one, pays nothing for it),
// or at once when an earlier run left reports in the outbox. A thread that dies fails what it held (the
// API answers those 503) and is started again for the next batch.
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

interface Pending {
  resolve(outcomes: ApiOutcome[] | undefined): void;
  reject(err: Error): void;
}

export function createReportThread(settings: ReportThreadSettings, log: ReportThreadLog): ReportPort {
  let worker: Worker | undefined;
  let next = 0;
  const pending = new Map<number, Pending>();
  let counters: WriterCounters = { pending: 0, written: 0, dropped: 0, outboxDepth: 0 };
  let closed = false;

  function failAll(err: Error): void {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  }

  function start(): Worker {
    // A small young generation: the worker's garbage is short-lived per batch, and its default (as large as
    // the main thread's) would hold tens of MB of RSS for nothing after a burst.
    const w = new Worker(WORKER_URL, { workerData: settings, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } });
    w.on('message', (msg: FromWorker) => {
      if (msg.t === 'log') {
        log[msg.level](msg.obj, msg.msg);
        return;
      }
      counters = msg.counters;
      if (msg.t === 'counters') return;
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
      if (worker === w) worker = undefined;
      failAll(new Error(`the report worker exited (${code})`));
    });
    w.unref();
    return w;
  }

  function post(msg: ToWorker, transfer: ArrayBuffer[] = []): Promise<ApiOutcome[] | undefined> {
    worker ??= start();
    const w = worker;
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
      if (!worker) return;
      await post({ t: 'flush', n: next++ });
    },
    async close() {
      closed = true;
      if (!worker) return;
      const w = worker;
      await post({ t: 'close', n: next++ }).catch(() => undefined);
      await w.terminate();
      worker = undefined;
    },
    get counters() {
      return counters;
    },
  };
}
