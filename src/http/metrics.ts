// /metrics: what the relay counts, kept in plain counts on the hot path (a map lookup and an addition per
// call), and the Prometheus text prom-client writes from them when Prometheus scrapes (metrics-registry.ts,
// which loads prom-client with the first scrape). Core reports its work as plain Telemetry calls; everything
// else (cache size, report queue, outbox) is read from its source on scrape.
import type { FastifyInstance } from 'fastify';
import type { CacheStatus } from '../core/proxy-report.js';
import type { Telemetry } from '../core/telemetry.js';
import type { Registry } from 'prom-client';

export interface MetricsSources {
  cacheStore: { stats(): Promise<{ entries: number; bytes: number }> };
  reports: { readonly pending: number; readonly written: number };
  outbox?: { readonly depth: number; readonly dropped: number };
  /** trace spans (report worker): exported, in failed exports, dropped; undefined while tracing is off or idle */
  spans?: () => { exported: number; failed: number; dropped: number } | undefined;
}

export interface MetricsOptions {
  /** longest a scrape waits for cacheStore.stats() before using the last known value (default 250) */
  statsTimeoutMs?: number;
  /** how long one stats() answer is reused, so frequent scrapes do not SCAN Redis each time (default 2000) */
  statsTtlMs?: number;
  now?: () => number;
}

export interface Metrics {
  telemetry: Telemetry;
  /** Counts one answered request: `route` is fastify's route pattern, `proxy` for the proxy edge, or `unmatched`. */
  countRequest(route: string, cacheStatus: unknown, statusCode: number): void;
  /** Adds the onResponse hook and GET /metrics to the root instance: call it before any route is registered. */
  install(app: FastifyInstance): void;
  /** The exposition text and its content type (prom-client, loaded with the first scrape). */
  scrape(): Promise<{ text: string; contentType: string }>;
}

/** A counter's values by label set (the key: the label values joined). */
export type Counts = Map<string, { labels: Record<string, string>; value: number }>;

/** A histogram's series by label set: each bucket's own count (not cumulative), the count and the sum. */
export interface Histograms {
  bounds: readonly number[];
  series: Map<string, { labels: Record<string, string>; counts: Float64Array; count: number; sum: number }>;
}

/** The count of a label set, made (at 0) the first time it is met: the labels are built only then. */
function countOf(counts: Counts, key: string, labels: Record<string, string>): { value: number } {
  let c = counts.get(key);
  if (!c) counts.set(key, (c = { labels, value: 0 }));
  return c;
}

function histograms(bounds: readonly number[]): Histograms {
  return { bounds, series: new Map() };
}

type Series = Histograms['series'] extends Map<string, infer S> ? S : never;

function seriesOf(h: Histograms, key: string, labels: Record<string, string>): Series {
  const s = { labels, counts: new Float64Array(h.bounds.length), count: 0, sum: 0 };
  h.series.set(key, s);
  return s;
}

/** As prom-client's Histogram counts: the first bucket whose bound the value does not exceed (or only +Inf). */
function observe(h: Histograms, s: Series, value: number): void {
  const i = h.bounds.findIndex((b) => value <= b);
  if (i !== -1) s.counts[i]!++;
  s.count++;
  s.sum += value;
}

const CACHE_STATUSES: ReadonlySet<string> = new Set(['HIT', 'MISS', 'BYPASS', 'REFRESH', 'COALESCED'] satisfies CacheStatus[]);

// Overhead is what the relay adds (sub-millisecond when all is well); the top buckets catch a cache store
// that answers slowly or times out (RELAY_STORE_TIMEOUT_MS, 500 ms by default).
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
const UPSTREAM_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120];

/**
 * Reads cacheStore.stats() at most once per `ttlMs`, waits at most `timeoutMs` for it, and otherwise answers
 * the last known value (zeros before the first answer). Only one call is outstanding at a time, so a slow
 * store is not asked again on every scrape; one that never answers is given up after `abandonMs`.
 */
function createStatsReader(read: () => Promise<{ entries: number; bytes: number }>, timeoutMs: number, ttlMs: number, now: () => number) {
  const abandonMs = Math.max(30_000, ttlMs);
  let last = { entries: 0, bytes: 0 };
  let settledAt = -Infinity;
  let inFlight: { promise: Promise<void>; startedAt: number } | undefined;

  function start(): Promise<void> {
    // The slot is taken before read() runs: a read() that throws at once settles within this call.
    const call = { startedAt: now(), promise: Promise.resolve() };
    inFlight = call;
    call.promise = (async () => {
      try {
        const s = await read();
        if (Number.isFinite(s.entries) && Number.isFinite(s.bytes)) last = { entries: s.entries, bytes: s.bytes };
      } catch {
        // Keep the last known value: /readyz is where an unreachable store shows.
      } finally {
        // A call given up on (see abandonMs) may still bring a value, but no longer owns the slot.
        if (inFlight === call) {
          inFlight = undefined;
          settledAt = now();
        }
      }
    })();
    return call.promise;
  }

  return async (): Promise<{ entries: number; bytes: number }> => {
    const t = now();
    if (t - settledAt < ttlMs) return last;
    const pending = inFlight && t - inFlight.startedAt < abandonMs ? inFlight.promise : start();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([pending, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    return last;
  };
}

export function createMetrics(sources: MetricsSources, opts: MetricsOptions = {}): Metrics {
  const now = opts.now ?? (() => performance.now());
  const stats = createStatsReader(() => sources.cacheStore.stats(), opts.statsTimeoutMs ?? 250, opts.statsTtlMs ?? 2000, now);

  const kept = {
    requests: new Map() as Counts,
    overhead: histograms(OVERHEAD_BUCKETS),
    upstreamLatency: histograms(UPSTREAM_BUCKETS),
    // Both series exist from the start, at 0, so alerts on increase() see the first failure.
    cacheFailures: new Map([
      ['lookup', { labels: { op: 'lookup' }, value: 0 }],
      ['save', { labels: { op: 'save' }, value: 0 }],
    ]) as Counts,
    fleetFlights: new Map() as Counts,
  };
  let registry: Promise<Registry> | undefined;

  // (each label set's labels are built the first time it is met, never on the calls after)
  const telemetry: Telemetry = {
    exchange(o) {
      // Telemetry must never throw into core's hot path: a value that is no number is skipped.
      if (Number.isFinite(o.overheadMs)) {
        const key = `${o.route}\0${o.cacheStatus}`;
        const h = kept.overhead;
        observe(h, h.series.get(key) ?? seriesOf(h, key, { route: o.route, cache_status: o.cacheStatus }), Math.max(0, o.overheadMs) / 1000);
      }
      if (o.upstreamMs !== undefined && Number.isFinite(o.upstreamMs)) {
        const h = kept.upstreamLatency;
        observe(h, h.series.get(o.route) ?? seriesOf(h, o.route, { route: o.route }), Math.max(0, o.upstreamMs) / 1000);
      }
    },
    cacheFailure(op) {
      countOf(kept.cacheFailures, op, { op }).value++;
    },
    fleetFlight(event) {
      countOf(kept.fleetFlights, event, { event }).value++;
    },
  };

  function countRequest(route: string, cacheStatus: unknown, statusCode: number): void {
    // Only the relay's own values, so a stray header cannot add label values without bound.
    const status = typeof cacheStatus === 'string' && CACHE_STATUSES.has(cacheStatus) ? cacheStatus : 'none';
    const key = `${route}\0${status}\0${statusCode}`;
    const c = kept.requests.get(key) ?? countOf(kept.requests, key, { route, cache_status: status, status_code: String(statusCode) });
    c.value++;
  }

  async function scrape(): Promise<{ text: string; contentType: string }> {
    const r = await (registry ??= import('./metrics-registry.js').then(
      (m) => m.createRegistry(kept, sources, stats),
      (err: unknown) => {
        registry = undefined; // the next scrape tries again
        throw err;
      },
    ));
    return { text: await r.metrics(), contentType: r.contentType };
  }

  function install(app: FastifyInstance): void {
    app.addHook('onResponse', (request, reply, done) => {
      const url = request.routeOptions.url;
      // Scrapes are not counted: they would be most of a quiet relay's traffic, and Prometheus' own `up`
      // series already tells whether a scrape worked.
      if (url !== '/metrics') countRequest(url ?? 'unmatched', reply.getHeader('x-relay-cache'), reply.statusCode);
      done();
    });

    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
      const { text, contentType } = await scrape();
      return reply.type(contentType).send(text);
    });
  }

  return { telemetry, countRequest, install, scrape };
}
