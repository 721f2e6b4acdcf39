// Stats over the reports a filter selects (DESIGN §6), for both report stores: one SQL statement over the
// indexed columns (never the JSON, never rows in memory) and one mapping of its rows, so SQLite and
// PostgreSQL give the same numbers for the same data. Only the spelling of a few expressions differs.
import { RELAY_ERR_VALIDATION } from '../errors.js';
import { buildFilterSql, type FilterDialect } from './report-filters.js';
import type { ReportFilter, ReportStats, StatsGroupBy, StatsResult } from './report-store.js';

export const STATS_GROUP_BY: readonly StatsGroupBy[] = ['model', 'environment', 'client', 'day'];

export interface StatsDialect extends FilterDialect {
  /** SQL true when the row's cache_hit column holds true */
  hitTrue: string;
  /** a sum that cannot fail on overflow: total() in SQLite (a float; its sum() raises), sum() in PostgreSQL */
  sum(column: string): string;
  /** `YYYY-MM-DD` of an integer expression holding the epoch seconds of a UTC midnight */
  utcDate(epochSeconds: string): string;
  /** ORDER BY term for the group key `k`, comparing bytes like SQLite's BINARY collation */
  keyOrder: string;
  /** `native`: percentile_cont (PostgreSQL); `window`: the same formula from row_number/count windows */
  percentiles: 'native' | 'window';
}

export interface StatsSql {
  sql: string;
  params: unknown[];
}

/** One row of the statement: `grouped` 0 is the totals row, 1 a group (drivers may give numbers as text). */
export interface StatsRow {
  grouped: number | string;
  k: string | null;
  requests: number | string;
  cache_hits: number | string;
  input_tokens: number | string | null;
  output_tokens: number | string | null;
  cost_usd: number | string | null;
  cost_saved_usd: number | string | null;
  errors: number | string;
  p50: number | string | null;
  p95: number | string | null;
  p99: number | string | null;
}

const PERCENTILES = [
  ['p50', '0.5'],
  ['p95', '0.95'],
  ['p99', '0.99'],
] as const;

const MS_PER_DAY = 86_400_000;

/**
 * What `errors` counts: an answer with status 400 or more, and a proxied stream that broke after a 2xx
 * start (outcome `stream-error`: the client got part of an answer). A client that left (`client-abort`)
 * is not an error of the upstream or the relay: it counts only by its status (499 when it left before
 * the answer started). `upstream-error` and `cache-only-miss` always carry a status of 400 or more.
 */
const ERROR_SQL = "status >= 400 OR outcome = 'stream-error'";

/**
 * The statement for `stats`. Throws RELAY_ERR_VALIDATION (bad filter or groupBy) before any backend is
 * touched. Totals and groups come from one statement, so they describe the same snapshot of the table.
 */
export function buildStatsSql(
  table: string,
  filter: ReportFilter,
  groupBy: StatsGroupBy | undefined,
  dialect: StatsDialect,
): StatsSql {
  if (groupBy !== undefined && !STATS_GROUP_BY.includes(groupBy)) {
    throw new RELAY_ERR_VALIDATION(`groupBy must be one of ${STATS_GROUP_BY.join(', ')}`);
  }
  const { where, params } = buildFilterSql(filter, dialect);
  const key = groupBy === undefined ? 'CAST(NULL AS TEXT)' : keyExpr(groupBy, dialect);
  const filtered =
    `WITH f AS (SELECT ${key} AS k, cache_hit, status, duration_ms, input_tokens, output_tokens, ` +
    `cost_usd, cost_saved_usd, outcome FROM ${table} ${where})`;
  const totals = `SELECT 0 AS grouped, CAST(NULL AS TEXT) AS k, ${aggregates(dialect)} FROM ${source(dialect, false)}`;
  const groups =
    groupBy === undefined
      ? ''
      : ` UNION ALL SELECT 1 AS grouped, k, ${aggregates(dialect)} FROM ${source(dialect, true)} GROUP BY k`;
  return {
    sql: `${filtered} SELECT * FROM (${totals}${groups}) AS s ORDER BY grouped, ${dialect.keyOrder} NULLS LAST`,
    params,
  };
}

function keyExpr(groupBy: StatsGroupBy, dialect: StatsDialect): string {
  if (groupBy !== 'day') return groupBy;
  // Floor to the UTC midnight in integer arithmetic. `%` truncates toward zero in both engines, so the
  // double modulo keeps instants before 1970 on the right day.
  const midnightMs = `(request_ms - ((request_ms % ${MS_PER_DAY}) + ${MS_PER_DAY}) % ${MS_PER_DAY})`;
  return dialect.utcDate(`(${midnightMs} / 1000)`);
}

function aggregates(dialect: StatsDialect): string {
  const latency = PERCENTILES.map(([name, p]) =>
    dialect.percentiles === 'native'
      ? `percentile_cont(${p}) WITHIN GROUP (ORDER BY duration_ms) AS ${name}`
      : `${windowPercentile(p)} AS ${name}`,
  );
  return [
    'count(*) AS requests',
    `count(CASE WHEN ${dialect.hitTrue} THEN 1 END) AS cache_hits`,
    `${dialect.sum('input_tokens')} AS input_tokens`,
    `${dialect.sum('output_tokens')} AS output_tokens`,
    `${dialect.sum('cost_usd')} AS cost_usd`,
    `${dialect.sum('cost_saved_usd')} AS cost_saved_usd`,
    `count(CASE WHEN ${ERROR_SQL} THEN 1 END) AS errors`,
    ...latency,
  ].join(', ');
}

/**
 * The rows to aggregate. For the window dialect each row with a duration also gets its 0-based rank among
 * the durations of its group (`pos_rank`) and the group's highest rank (`last_rank`, count − 1).
 */
function source(dialect: StatsDialect, grouped: boolean): string {
  if (dialect.percentiles === 'native') return 'f';
  const by = grouped ? 'k, ' : '';
  return (
    `(SELECT f.*, CASE WHEN duration_ms IS NOT NULL THEN ` +
    `row_number() OVER (PARTITION BY ${by}duration_ms IS NULL ORDER BY duration_ms) - 1 END AS pos_rank, ` +
    `count(duration_ms) OVER (${grouped ? 'PARTITION BY k' : ''}) - 1 AS last_rank FROM f) AS r`
  );
}

/**
 * PostgreSQL's percentile_cont, step for step (orderedsetaggs.c): pos = p × (n − 1) in double precision,
 * lo = floor(pos), hi = ceil(pos), result = v[lo] + (v[hi] − v[lo]) × (pos − lo). Same operations on the
 * same doubles, so the same bits. NULL when the group has no durations (every pos_rank is NULL).
 */
function windowPercentile(p: string): string {
  const pos = `(${p} * last_rank)`;
  const lo = `CAST(${pos} AS INTEGER)`;
  const at = (rank: string): string => `max(CASE WHEN pos_rank = ${rank} THEN duration_ms END)`;
  const low = at(lo);
  const high = at(`${lo} + (${pos} > ${lo})`);
  const fraction = `max(CASE WHEN pos_rank IS NOT NULL THEN ${pos} - ${lo} END)`;
  return `(${low} + (${high} - ${low}) * ${fraction})`;
}

/** The statement's rows as a StatsResult; groups keep the statement's order (key ascending, null last). */
export function statsResult(rows: StatsRow[], groupBy: StatsGroupBy | undefined): StatsResult {
  const totalsRow = rows.find((row) => Number(row.grouped) === 0);
  // An aggregate without GROUP BY always yields its row; a missing one would be a broken statement.
  if (!totalsRow) throw new Error('stats statement returned no totals row');
  const totals = toStats(totalsRow);
  if (groupBy === undefined) return { totals };
  return {
    totals,
    groups: rows.filter((row) => Number(row.grouped) === 1).map((row) => ({ key: row.k, ...toStats(row) })),
  };
}

function toStats(row: StatsRow): ReportStats {
  const requests = Number(row.requests);
  const cacheHits = Number(row.cache_hits);
  return {
    requests,
    cacheHits,
    hitRatio: requests > 0 ? cacheHits / requests : null,
    inputTokens: Number(row.input_tokens ?? 0),
    outputTokens: Number(row.output_tokens ?? 0),
    costUsd: nano(Number(row.cost_usd ?? 0)),
    costSavedUsd: nano(Number(row.cost_saved_usd ?? 0)),
    errors: Number(row.errors),
    latencyMs: { p50: nanoOrNull(row.p50), p95: nanoOrNull(row.p95), p99: nanoOrNull(row.p99) },
  };
}

/**
 * Rounds to 1e-9. Engines add floating costs in different orders (SQLite's total() even compensates for
 * rounding error), and interpolated percentiles carry float noise (p95 of [100, 200, 300, 400, 1000] is
 * 879.9999999999999 in PostgreSQL itself): rounding at a nano-dollar / nano-millisecond, far below anything
 * meaningful, makes both stores answer the same clean numbers. `+ 0` turns a -0 into 0.
 */
function nano(x: number): number {
  return Number(x.toFixed(9)) + 0;
}

function nanoOrNull(x: number | string | null): number | null {
  return x === null ? null : nano(Number(x));
}
