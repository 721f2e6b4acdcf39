// What every report store derives the same way: the indexed columns of a report and the WHERE clause of a
// list query (or of the list's filters alone, for stats). Only the SQL spelling of a placeholder and of a
// property match differs between dialects, so the filter semantics (bounds, NULL handling, cursor order)
// cannot drift apart between adapters.
import { RELAY_ERR_VALIDATION } from '../errors.js';
import { decodeCursor, encodeCursor, requestTimeMs, timestampMs } from './report-cursor.js';
import type { ReportFilter, ReportPage, ReportQuery, StoredReport } from './report-store.js';

export const MAX_LIST_LIMIT = 1000;

/** The same rule as the http layer's `property.<name>`; it also keeps a name safe inside a JSON path. */
export const PROPERTY_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

export interface ReportColumns {
  id: string;
  requestMs: number;
  environment: string | null;
  promptId: string | null;
  client: string | null;
  model: string | null;
  status: number | null;
  cacheHit: boolean | null;
  durationMs: number | null;
  /** usage.inputTokens / outputTokens as whole numbers, 0 without usage */
  inputTokens: number;
  outputTokens: number;
  costUsd: number | null;
  /** what a cache hit avoided; null when the report does not say */
  costSavedUsd: number | null;
  /** proxy.outcome of a proxied exchange (`complete`, `stream-error`, …); null for a direct report without one */
  outcome: string | null;
}

export function reportColumns(report: StoredReport): ReportColumns {
  const metadata = report.metadata ?? {};
  return {
    id: report.id,
    requestMs: requestTimeMs(report),
    environment: stringOrNull(metadata['environment']),
    promptId: stringOrNull(metadata['promptId']),
    client: stringOrNull(metadata['client']),
    model: stringOrNull(report.model),
    status: typeof report.status === 'number' && Number.isFinite(report.status) ? report.status : null,
    cacheHit: typeof report.cacheHit === 'boolean' ? report.cacheHit : null,
    durationMs: finiteOrNull(report.durationMs),
    inputTokens: tokenCount(report.usage?.inputTokens),
    outputTokens: tokenCount(report.usage?.outputTokens),
    costUsd: finiteOrNull(report.costUsd),
    costSavedUsd: finiteOrNull(report.costSavedUsd),
    outcome: stringOrNull(objectOrNull(report['proxy'])?.['outcome']),
  };
}

export interface FilterDialect {
  /** the placeholder for the parameter at 1-based position n */
  placeholder(n: number): string;
  cacheHit(value: boolean): unknown;
  /** SQL true when the report's property `name` is a string, number or boolean whose text is `value` */
  propertyEquals(name: string, value: string, bind: (v: unknown) => string): string;
}

export interface FilterSql {
  /** `WHERE …` or an empty string */
  where: string;
  params: unknown[];
}

export interface ListSql extends FilterSql {
  /** rows to fetch: one more than the page, to know whether another page follows */
  fetch: number;
}

/**
 * Builds the WHERE clause of a list query. Throws RELAY_ERR_INVALID_CURSOR or RELAY_ERR_VALIDATION before
 * any backend is touched, so callers can tell a bad query from a failing store.
 */
export function buildListSql(query: ReportQuery, dialect: FilterDialect): ListSql {
  const { limit } = query;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw new RELAY_ERR_VALIDATION(`limit must be an integer from 1 to ${MAX_LIST_LIMIT}`);
  }
  const built = filterConditions(query, dialect);
  if (query.cursor !== undefined) {
    const pos = decodeCursor(query.cursor);
    // A row comparison is exactly "strictly after (t, id) in (request_ms DESC, id DESC) order" and lets
    // both engines walk the (request_ms, id) index.
    built.conditions.push(`(request_ms, id) < (${built.bind(pos.t)}, ${built.bind(pos.id)})`);
  }
  return { ...whereOf(built), fetch: limit + 1 };
}

/** The WHERE clause of the list's filters alone (no paging), for aggregates such as stats. */
export function buildFilterSql(filter: ReportFilter, dialect: FilterDialect): FilterSql {
  return whereOf(filterConditions(filter, dialect));
}

interface Conditions {
  conditions: string[];
  params: unknown[];
  bind: (v: unknown) => string;
}

function filterConditions(filter: ReportFilter, dialect: FilterDialect): Conditions {
  const params: unknown[] = [];
  const bind = (v: unknown): string => {
    params.push(v);
    return dialect.placeholder(params.length);
  };
  const conditions: string[] = [];
  const equals = (column: string, value: unknown): void => {
    if (value !== undefined) conditions.push(`${column} = ${bind(value)}`);
  };

  if (filter.from !== undefined) conditions.push(`request_ms >= ${bind(timeBound('from', filter.from))}`);
  if (filter.to !== undefined) conditions.push(`request_ms < ${bind(timeBound('to', filter.to))}`);
  equals('environment', filter.environment);
  equals('prompt_id', filter.promptId);
  equals('client', filter.client);
  equals('model', filter.model);
  equals('status', filter.status);
  if (filter.cacheHit !== undefined) equals('cache_hit', dialect.cacheHit(filter.cacheHit));
  for (const [name, value] of Object.entries(filter.properties ?? {})) {
    if (!PROPERTY_NAME.test(name)) {
      throw new RELAY_ERR_VALIDATION(`property name ${JSON.stringify(name)} must match ${PROPERTY_NAME.source}`);
    }
    conditions.push(dialect.propertyEquals(name, String(value), bind));
  }
  return { conditions, params, bind };
}

function whereOf({ conditions, params }: Conditions): FilterSql {
  return { where: conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '', params };
}

function timeBound(name: string, iso: string): number {
  const t = timestampMs(iso);
  if (!Number.isFinite(t)) throw new RELAY_ERR_VALIDATION(`${name} must be an ISO date-time`);
  return t;
}

function stringOrNull(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

function objectOrNull(v: unknown): Record<string, unknown> | null {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}

export function finiteOrNull(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/**
 * Token counts go into integer columns (BIGINT in PostgreSQL): a fractional or absurd count from a client's
 * body is rounded and capped rather than failing the whole batch it was written in.
 */
function tokenCount(v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) return 0;
  return Math.min(Math.round(v), Number.MAX_SAFE_INTEGER);
}

export interface ListedRow {
  requestMs: number;
  id: string;
  report: StoredReport;
}

/** Turns the `fetch` rows of a list query into a page; the cursor points at the page's last row. */
export function pageFromRows(rows: ListedRow[], limit: number): ReportPage {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    items: page.map((row) => row.report),
    nextCursor: rows.length > limit && last ? encodeCursor({ t: last.requestMs, id: last.id }) : null,
  };
}
