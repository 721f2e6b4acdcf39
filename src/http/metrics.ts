// /metrics: Prometheus text format through prom-client. Core reports its work as plain Telemetry calls;
// everything else (cache size, report queue, outbox) is read from its source when Prometheus scrapes.
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, type Metric, Registry, collectDefaultMetrics } from 'prom-client';
import type { CacheStatus } from '../core/proxy-report.js';
import type { Telemetry } from '../core/telemetry.js';

const PREFIX = 'llm_relay_';

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
  registry: Registry;
}

const CACHE_STATUSES: ReadonlySet<string> = new Set(['HIT', 'MISS', 'BYPASS', 'REFRESH', 'COALESCED'] satisfies CacheStatus[]);

// Overhead is what the relay adds (sub-millisecond when all is well); the top buckets catch a cache store
// that answers slowly or times out (RELAY_STORE_TIMEOUT_MS, 500 ms by default).
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
const UPSTREAM_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120];

// Process metrics describe the process, not an app, and prom-client's collectors never stop (an event-loop
// delay monitor and a GC observer each). So they live in one registry per process (not prom-client's
// global one), merged into each app's registry: tests that build many apps do not pile up collectors.
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry, prefix: PREFIX });
  }
  return processRegistry;
}

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

/** A counter that mirrors a monotonic number kept elsewhere: on scrape it is increased by what was added since. */
function mirrorCounter(name: string, help: string, read: () => number): Counter {
  let seen = 0;
  return new Counter({
    name,
    help,
    registers: [],
    collect() {
      const v = read();
      if (v < seen) {
        // The source restarted from 0: a counter reset, which Prometheus' rate() understands.
        this.reset();
        seen = 0;
      }
      if (v > seen) this.inc(v - seen);
      seen = v;
    },
  });
}

export function createMetrics(sources: MetricsSources, opts: MetricsOptions = {}): Metrics {
  const now = opts.now ?? (() => performance.now());
  const stats = createStatsReader(() => sources.cacheStore.stats(), opts.statsTimeoutMs ?? 250, opts.statsTtlMs ?? 2000, now);

  const requests = new Counter({
    name: `${PREFIX}requests_total`,
    help: 'Requests answered by the relay, by fastify route (proxy for the transparent proxy), x-relay-cache and status code',
    labelNames: ['route', 'cache_status', 'status_code'] as const,
    registers: [],
  });
  const overhead = new Histogram({
    name: `${PREFIX}overhead_seconds`,
    help: 'Time the relay itself added to a proxied exchange before its answer head went out, by upstream route',
    labelNames: ['route', 'cache_status'] as const,
    buckets: OVERHEAD_BUCKETS,
    registers: [],
  });
  const upstreamLatency = new Histogram({
    name: `${PREFIX}upstream_latency_seconds`,
    help: 'Time from the upstream request to its response head, by upstream route',
    labelNames: ['route'] as const,
    buckets: UPSTREAM_BUCKETS,
    registers: [],
  });
  const cacheFailures = new Counter({
    name: `${PREFIX}cache_failures_total`,
    help: 'Cache store calls on the proxy path that failed or timed out, by operation',
    labelNames: ['op'] as const,
    registers: [],
  });
  // Both series exist from the start, at 0, so alerts on increase() see the first failure.
  cacheFailures.inc({ op: 'lookup' }, 0);
  cacheFailures.inc({ op: 'save' }, 0);
  const fleetFlights = new Counter({
    name: `${PREFIX}fleet_flights_total`,
    help: 'Cache misses that went into the fleet (Redis cache), by what became of them: lead (this relay made the call), follow (another relay did), takeover (its relay died; this one made it), stored (found stored meanwhile), fallback (Redis failing: single flight on this relay only)',
    labelNames: ['event'] as const,
    registers: [],
  });

  const cacheEntries = new Gauge({
    name: `${PREFIX}cache_entries`,
    help: 'Entries in the cache store (last known value when the store does not answer)',
    registers: [],
    async collect() {
      this.set((await stats()).entries);
    },
  });
  const cacheBytes = new Gauge({
    name: `${PREFIX}cache_bytes`,
    help: 'Bytes in the cache store (last known value when the store does not answer)',
    registers: [],
    async collect() {
      this.set((await stats()).bytes);
    },
  });
  const reportsPending = new Gauge({
    name: `${PREFIX}reports_pending`,
    help: 'Reports accepted and not yet durable (in neither the report store nor the outbox)',
    registers: [],
    collect() {
      this.set(sources.reports.pending);
    },
  });
  const reportsWritten = mirrorCounter(`${PREFIX}reports_written_total`, 'Reports the report store has taken, directly or from the outbox', () => sources.reports.written);
  const reportsDropped = mirrorCounter(
    `${PREFIX}reports_dropped_total`,
    'Reports lost (neither written nor kept in the outbox); must stay 0',
    () => sources.outbox?.dropped ?? 0,
  );
  const outboxDepth = new Gauge({
    name: `${PREFIX}outbox_depth`,
    help: 'Reports waiting in the durable outbox for the report store to come back',
    registers: [],
    collect() {
      this.set(sources.outbox?.depth ?? 0);
    },
  });

  const spans = (): { exported: number; failed: number; dropped: number } => sources.spans?.() ?? { exported: 0, failed: 0, dropped: 0 };
  const spansExported = mirrorCounter(`${PREFIX}trace_spans_exported_total`, 'Trace spans the OTLP endpoint took (tracing on: OTEL_EXPORTER_OTLP_ENDPOINT)', () => spans().exported);
  const spansFailed = mirrorCounter(
    `${PREFIX}trace_spans_failed_total`,
    'Trace spans in exports that failed (endpoint down, refusing, or slower than OTEL_EXPORTER_OTLP_TIMEOUT); they are not retried later',
    () => spans().failed,
  );
  const spansDropped = mirrorCounter(
    `${PREFIX}trace_spans_dropped_total`,
    'Trace spans dropped because the export queue (OTEL_BSP_MAX_QUEUE_SIZE) was full: the endpoint does not keep up or is down',
    () => spans().dropped,
  );

  const own = new Registry();
  const all: Metric[] = [
    requests,
    overhead,
    upstreamLatency,
    cacheFailures,
    fleetFlights,
    cacheEntries,
    cacheBytes,
    reportsPending,
    reportsWritten,
    reportsDropped,
    outboxDepth,
    spansExported,
    spansFailed,
    spansDropped,
  ];
  for (const m of all) own.registerMetric(m);
  const registry = Registry.merge([processMetrics(), own]);

  const telemetry: Telemetry = {
    exchange(o) {
      // Telemetry must never throw into core's hot path: skip a value prom-client would reject.
      if (Number.isFinite(o.overheadMs)) overhead.observe({ route: o.route, cache_status: o.cacheStatus }, Math.max(0, o.overheadMs) / 1000);
      if (o.upstreamMs !== undefined && Number.isFinite(o.upstreamMs))
        upstreamLatency.observe({ route: o.route }, Math.max(0, o.upstreamMs) / 1000);
    },
    cacheFailure(op) {
      cacheFailures.inc({ op });
    },
    fleetFlight(event) {
      fleetFlights.inc({ event });
    },
  };

  function countRequest(route: string, cacheStatus: unknown, statusCode: number): void {
    requests.inc({
      route,
      // Only the relay's own values, so a stray header cannot add label values without bound.
      cache_status: typeof cacheStatus === 'string' && CACHE_STATUSES.has(cacheStatus) ? cacheStatus : 'none',
      status_code: String(statusCode),
    });
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
      const text = await registry.metrics();
      return reply.type(registry.contentType).send(text);
    });
  }

  return { telemetry, countRequest, install, registry };
}
