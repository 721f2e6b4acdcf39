// The one report service: derive, then write through the group-commit writer. Both the direct API and
// the proxy record through here.
import { RELAY_ERR_REPORTS_UNAVAILABLE, StoreUnavailableError } from '../errors.js';
import { createQuietTimer } from '../quiet-timer.js';
import type {
  ReportFilter,
  ReportPage,
  ReportQuery,
  ReportStore,
  StatsGroupBy,
  StatsResult,
  StoredReport,
} from '../storage/report-store.js';
import type { OutboxFile } from '../storage/outbox-file.js';
import { uuidv7 } from './ids.js';
import type { PriceTable } from './pricing.js';
import { type KnownBody, type ReportInput, deriveReport } from './report-derive.js';
import { type ReportWriter, createReportWriter } from './report-writer.js';

export interface ReportServiceOptions {
  store: ReportStore;
  prices: PriceTable;
  flushMs: number;
  batchMax: number;
  /** bodies above this are cut and marked truncated */
  maxBodyBytes: number;
  outbox?: OutboxFile;
  outboxRetryMs?: number;
  onStoreError?: (err: unknown) => void;
  onQuarantined?: (count: number) => void;
  now?: () => number;
}

/** What the proxy hands recordLater, built only when the report is written. */
export interface LaterReport {
  input: ReportInput;
  id: string;
  known: { request?: KnownBody; response?: KnownBody };
}

export interface ReportService {
  /** Resolves with the stored report once it is durable. */
  record(input: ReportInput): Promise<StoredReport>;
  /** Derives the stored report now (the proxy needs its cost before the entry is cached), id optional. */
  prepare(input: ReportInput, id?: string, known?: { request?: KnownBody; response?: KnownBody }): StoredReport;
  /** Writes a prepared report; resolves once it is durable. */
  commit(report: StoredReport): Promise<void>;
  /**
   * Builds, derives and writes a report a moment later, off the path of the answer and of the next request
   * (the proxy's reports are never awaited by a client). flush() waits for these too. Failures go to `onError`.
   */
  recordLater(build: () => LaterReport, onError: (err: unknown) => void): void;
  get(id: string): Promise<StoredReport | undefined>;
  list(query: ReportQuery): Promise<ReportPage>;
  stats(filter: ReportFilter, groupBy?: StatsGroupBy): Promise<StatsResult>;
  flush(): Promise<void>;
  /** flush, then stop the outbox delivery loop */
  close(): Promise<void>;
  readonly writer: ReportWriter;
  readonly prices: PriceTable;
}

export function createReportService(opts: ReportServiceOptions): ReportService {
  const now = opts.now ?? Date.now;
  const writer = createReportWriter({
    store: opts.store,
    flushMs: opts.flushMs,
    batchMax: opts.batchMax,
    retryMs: opts.outboxRetryMs ?? 1000,
    ...(opts.outbox ? { outbox: opts.outbox } : {}),
    ...(opts.onStoreError ? { onStoreError: opts.onStoreError } : {}),
    ...(opts.onQuarantined ? { onQuarantined: opts.onQuarantined } : {}),
  });

  const prepare: ReportService['prepare'] = (input, id, known) => {
    const t = now();
    const ids = { id: id ?? uuidv7(t), receivedAt: new Date(t).toISOString() };
    return deriveReport(input, ids, opts.prices, opts.maxBodyBytes, known);
  };
  const commit = (report: StoredReport): Promise<void> => unavailableAs503(writer.write(report));

  // Reports scheduled by recordLater and not yet handed to the writer: built together, in a quiet moment.
  let later: Array<{ build: () => LaterReport; onError: (err: unknown) => void }> = [];
  const runLater = (): void => {
    quiet.cancel();
    const batch = later;
    later = [];
    for (const { build, onError } of batch) {
      try {
        const { input, id, known } = build();
        commit(prepare(input, id, known)).catch(onError);
      } catch (err) {
        onError(err);
      }
    }
  };
  const quiet = createQuietTimer(runLater);

  return {
    writer,
    prices: opts.prices,
    prepare,
    commit,
    async record(input) {
      const report = prepare(input);
      await commit(report);
      return report;
    },
    recordLater(build, onError) {
      later.push({ build, onError });
      quiet.poke();
    },
    get: (id) => unavailableAs503(opts.store.get(id)),
    list: (query) => unavailableAs503(opts.store.list(query)),
    stats: (filter, groupBy) => unavailableAs503(opts.store.stats(filter, groupBy)),
    async flush() {
      if (later.length > 0) runLater();
      await writer.flush();
    },
    async close() {
      await this.flush();
      await writer.close();
    },
  };
}

async function unavailableAs503<T>(op: Promise<T>): Promise<T> {
  try {
    return await op;
  } catch (err) {
    if (err instanceof StoreUnavailableError) throw new RELAY_ERR_REPORTS_UNAVAILABLE(err.message, { cause: err });
    throw err;
  }
}
