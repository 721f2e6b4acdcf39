// Retention, run by the report worker beside its writes: every few seconds one bounded step (the store's
// prune: reports past RELAY_REPORT_RETENTION deleted, reports past RELAY_BODY_RETENTION stripped of their
// bodies, blobs no report with bodies uses swept, space given back), and, while the data dir is over
// RELAY_DATA_MAX_BYTES, the oldest reports besides. A step that found a full batch of work is followed by
// the next one soon, so a backlog (a first start with a lower retention) is worked off in small bites.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { PruneResult, ReportStore } from './report-store.js';

export interface ReportPrunerOptions {
  store: ReportStore;
  /** 0: reports are kept forever */
  reportRetentionMs: number;
  /** 0: bodies are kept as long as their reports */
  bodyRetentionMs: number;
  /** 0: no size budget */
  maxBytes: number;
  /** bytes used against the budget (the data dir, plus the store's own where it is elsewhere) */
  measure(): Promise<number>;
  /** default Date.now; tests move it */
  now?: () => number;
  /** wait between steps; default 5000 */
  intervalMs?: number;
  /** wait after a step that found a full batch; default 50 */
  busyIntervalMs?: number;
  /** rows per kind of change per step; default 500 */
  rows?: number;
  /**
   * While under budget, measure at most this often; default 60000. Over it, every step measures (it must
   * stop deleting as soon as the budget is met). A PostgreSQL measurement reads every row's size.
   */
  measureEveryMs?: number;
  onError?(err: unknown): void;
  onStep?(result: PruneResult): void;
}

export interface ReportPruner {
  /** One step now (also what the timer runs). */
  step(): Promise<PruneResult>;
  start(): void;
  /** Stops the timer and waits for a step in progress. */
  stop(): Promise<void>;
}

/** A cut-off no receivedAt is before (a BIGINT parameter, unlike -Infinity). */
const NEVER = Number.MIN_SAFE_INTEGER;

const NOTHING: PruneResult = { reports: 0, expired: 0, bodies: 0, more: false };

export function createReportPruner(opts: ReportPrunerOptions): ReportPruner {
  const now = opts.now ?? Date.now;
  const rows = opts.rows ?? 500;
  const intervalMs = opts.intervalMs ?? 5000;
  const busyIntervalMs = opts.busyIntervalMs ?? 50;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<PruneResult> | undefined;
  let stopped = true;
  const measureEveryMs = opts.measureEveryMs ?? 60_000;
  let nextMeasure = Number.NEGATIVE_INFINITY;

  async function runStep(): Promise<PruneResult> {
    if (!opts.store.prune) return NOTHING;
    const at = now();
    let trimOldest = 0;
    if (opts.maxBytes > 0 && at >= nextMeasure) {
      if ((await opts.measure()) > opts.maxBytes) trimOldest = rows;
      else nextMeasure = at + measureEveryMs;
    }
    const result = await opts.store.prune({
      now: at,
      reportsBefore: opts.reportRetentionMs > 0 ? at - opts.reportRetentionMs : NEVER,
      bodiesBefore: opts.bodyRetentionMs > 0 ? at - opts.bodyRetentionMs : NEVER,
      trimOldest,
      rows,
    });
    // Over budget with nothing left to delete would spin: the budget is then the cache's or the outbox's.
    // (A step that only swept part of the blobs has more to do: the store says so.)
    if (trimOldest > 0 && result.reports === 0 && result.bodies === 0 && !result.more) return { ...result, more: false };
    return trimOldest > 0 ? { ...result, more: true } : result;
  }

  function step(): Promise<PruneResult> {
    running ??= runStep().finally(() => {
      running = undefined;
    });
    return running;
  }

  function schedule(ms: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      timer = undefined;
      step().then(
        (result) => {
          opts.onStep?.(result);
          schedule(result.more ? busyIntervalMs : intervalMs);
        },
        (err: unknown) => {
          opts.onError?.(err);
          schedule(intervalMs);
        },
      );
    }, ms);
    // Retention never keeps the process (or the worker) alive by itself.
    timer.unref();
  }

  return {
    step,
    start() {
      if (!stopped) return;
      stopped = false;
      schedule(busyIntervalMs);
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      await running?.catch(() => undefined);
    },
  };
}

/** Bytes of the files in a directory tree, leaving out those named in `except` (full paths). */
export function directoryBytes(dir: string, except: ReadonlySet<string> = new Set()): number {
  let total = 0;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  for (const name of names) {
    const path = join(dir, name);
    if (except.has(path)) continue;
    try {
      const st = statSync(path);
      if (st.isDirectory()) total += directoryBytes(path, except);
      else if (st.isFile()) total += st.size;
    } catch {
      // removed meanwhile (a WAL at checkpoint): it no longer counts
    }
  }
  return total;
}
