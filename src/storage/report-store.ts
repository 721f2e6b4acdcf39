// The report store port. A StoredReport is the whole report as the relay answers it (client fields, kept
// as sent, plus derived fields); adapters index the columns below and keep the rest as JSON.
export interface StoredReport {
  id: string;
  /** ISO date-time at which the relay accepted the report */
  receivedAt: string;
  metadata?: Record<string, unknown>;
  request: { timestamp: string; body?: unknown; [k: string]: unknown };
  response: { timestamp: string; body?: unknown; [k: string]: unknown };
  properties?: Record<string, unknown>;
  cacheEnabled?: boolean | null;
  cacheHit?: boolean | null;
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

export interface ReportPage {
  items: StoredReport[];
  nextCursor: string | null;
}

export interface ReportStore {
  /** `sqlite` or `postgres` */
  readonly kind: string;
  /**
   * Writes a batch in one transaction and resolves only when it is durable. Idempotent by id: a report
   * whose id is already stored is left as it is (so an outbox can deliver at least once, stored exactly once).
   */
  insertMany(reports: StoredReport[]): Promise<void>;
  get(id: string): Promise<StoredReport | undefined>;
  /** Newest first by request.timestamp, then id. Rejects with RELAY_ERR_INVALID_CURSOR on a bad cursor. */
  list(query: ReportQuery): Promise<ReportPage>;
  count(): Promise<number>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
