// The report store port. A StoredReport is the whole report as the relay answers it (client fields, kept
// as sent, plus derived fields); adapters index the columns below and keep the rest as JSON.
/** A report's own fields, as a client sends them (the seed interface's Report); unknown fields are kept. */
export interface ReportFields {
  metadata?: Record<string, unknown>;
  request: { timestamp: string; body?: unknown; [k: string]: unknown };
  response: { timestamp: string; body?: unknown; [k: string]: unknown };
  properties?: Record<string, unknown>;
  cacheEnabled?: boolean | null;
  cacheHit?: boolean | null;
  [k: string]: unknown;
}

export interface StoredReport extends ReportFields {
  id: string;
  /** ISO date-time at which the relay accepted the report */
  receivedAt: string;
  durationMs: number | null;
  status: number | null;
  model: string | null;
  provider: string | null;
  usage: TokenUsage | null;
  costUsd: number | null;
  requestBytes: number;
  responseBytes: number;
  [k: string]: unknown;
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  cachedInputTokens?: number;
  cacheCreationInputTokens?: number;
  /** the answer carried no usage (a stream without include_usage): the relay counted the tokens itself */
  estimated?: true;
}

export interface ReportQuery {
  /** 1..1000 */
  limit: number;
  /** opaque, from a previous page's nextCursor */
  cursor?: string;
  /** inclusive lower bound on request.timestamp (ISO) */
  from?: string;
  /** exclusive upper bound on request.timestamp (ISO) */
  to?: string;
  environment?: string;
  promptId?: string;
  client?: string;
  model?: string;
  status?: number;
  cacheHit?: boolean;
  /** property name → exact string value */
  properties?: Record<string, string>;
}

/** The list's filters without paging. */
export type ReportFilter = Omit<ReportQuery, 'limit' | 'cursor'>;

export type StatsGroupBy = 'model' | 'environment' | 'client' | 'day';

/** Aggregates over the reports a filter selects, computed in the store (SQL), never in memory. */
export interface ReportStats {
  requests: number;
  /** reports with cacheHit true */
  cacheHits: number;
  /** cacheHits / requests; null when there are no requests */
  hitRatio: number | null;
  /** sums of usage.inputTokens / usage.outputTokens (reports without usage count 0) */
  inputTokens: number;
  outputTokens: number;
  /** sum of costUsd over reports that have one (USD) */
  costUsd: number;
  /** sum of costSavedUsd (what cache hits avoided) */
  costSavedUsd: number;
  /** reports whose status is 400 or more */
  errors: number;
  /** percentiles of durationMs (linear interpolation between closest ranks, like percentile_cont); null without durations */
  latencyMs: { p50: number | null; p95: number | null; p99: number | null };
}

export interface StatsGroup extends ReportStats {
  /** the group's model / environment / client, or the UTC day YYYY-MM-DD of request.timestamp; null when absent */
  key: string | null;
}

export interface StatsResult {
  totals: ReportStats;
  /** only with groupBy; ordered by key ascending, null last */
  groups?: StatsGroup[];
}

export interface ReportPage {
  items: StoredReport[];
  nextCursor: string | null;
}

/** One bounded step of retention; times are epoch ms of receivedAt. */
export interface PruneStep {
  /** the clock's now (injectable in tests) */
  now: number;
  /** reports received before this are deleted */
  reportsBefore: number;
  /** reports received before this lose their bodies (they read with `bodiesExpired: true`) */
  bodiesBefore: number;
  /** delete this many of the oldest reports besides (the data dir is over its size budget) */
  trimOldest: number;
  /** at most this many rows per kind of change */
  rows: number;
}

export interface PruneResult {
  /** reports deleted */
  reports: number;
  /** reports whose bodies expired */
  expired: number;
  /** body blobs deleted (no report with bodies uses them) */
  bodies: number;
  /** a step found a full batch of work: call again soon */
  more: boolean;
}

export interface ReportStore {
  /** `sqlite` or `postgres` */
  readonly kind: string;
  /**
   * Writes a batch in one transaction and resolves only when it is durable. Idempotent by id: a report
   * whose id is already stored is left as it is (so an outbox can deliver at least once, stored exactly once).
   */
  insertMany(reports: StoredReport[], opts?: { durable?: boolean }): Promise<void>;
  get(id: string): Promise<StoredReport | undefined>;
  /** Newest first by request.timestamp, then id. Rejects with RELAY_ERR_INVALID_CURSOR on a bad cursor. */
  list(query: ReportQuery): Promise<ReportPage>;
  count(): Promise<number>;
  stats(filter: ReportFilter, groupBy?: StatsGroupBy): Promise<StatsResult>;
  ping(): Promise<void>;
  /** One step of retention (the report worker's pruner), in its own transaction(s); safe to cut at any point. */
  prune?(step: PruneStep): Promise<PruneResult>;
  /** Bytes the store holds, as its size budget counts them. */
  sizeBytes?(): Promise<number>;
  close(): Promise<void>;
}
