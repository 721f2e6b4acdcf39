// The scrape side of /metrics (metrics.ts): prom-client, loaded with the first scrape. A relay nobody scrapes
// never loads it (with @opentelemetry/api, which it requires: ~150 modules; measured in the relay, ~2 MB of
// RSS at rest and 30–40 ms of its start).
// What the relay counts on its hot path is kept by metrics.ts in plain counts; the metrics here read them as
// they are when Prometheus asks, through prom-client's own metric shape (`get()`), so prom-client writes the
// exposition text. Node's process metrics (collectDefaultMetrics) are collected from the first scrape on.
import { Counter, Gauge, type Metric, Registry, collectDefaultMetrics } from 'prom-client';
import type { Counts, Histograms, MetricsSources } from './metrics.js';

export const PREFIX = 'llm_relay_';

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

/** One value as prom-client's metrics give it (`get()`): its own labels, those shared with its series, its name. */
interface Value {
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string>;
  value: number;
  metricName?: string;
}

/** A metric whose values are read from counts kept elsewhere, in prom-client's shape (what its Registry reads). */
function readMetric(name: string, help: string, type: 'counter' | 'histogram', values: () => Value[]): Metric {
  const metric = {
    name,
    help,
    type,
    aggregator: 'sum',
    get: async () => ({ name, help, type, aggregator: 'sum', values: values() }),
    reset() {},
  };
  return metric as unknown as Metric;
}

function counterOf(name: string, help: string, counts: Counts): Metric {
  return readMetric(name, help, 'counter', () => [...counts.values()].map(({ labels, value }) => ({ labels, value })));
}

/** As prom-client's Histogram writes its values: cumulative buckets, +Inf, sum and count, per label set. */
function histogramOf(name: string, help: string, h: Histograms): Metric {
  return readMetric(name, help, 'histogram', () =>
    [...h.series.values()].flatMap((s): Value[] => {
      let acc = 0;
      const buckets = h.bounds.map((le, i) => {
        acc += s.counts[i]!;
        return { labels: { le }, sharedLabels: s.labels, value: acc, metricName: `${name}_bucket` };
      });
      return [
        ...buckets,
        { labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: `${name}_bucket` },
        { labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${name}_sum` },
        { labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${name}_count` },
      ];
    }),
  );
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

export interface Kept {
  requests: Counts;
  overhead: Histograms;
  upstreamLatency: Histograms;
  cacheFailures: Counts;
  fleetFlights: Counts;
}

export function createRegistry(kept: Kept, sources: MetricsSources, stats: () => Promise<{ entries: number; bytes: number }>): Registry {
  const gauge = (name: string, help: string, read: () => number | Promise<number>): Gauge =>
    new Gauge({
      name,
      help,
      registers: [],
      async collect() {
        this.set(await read());
      },
    });
  const spans = (): { exported: number; failed: number; dropped: number } => sources.spans?.() ?? { exported: 0, failed: 0, dropped: 0 };
  const all: Metric[] = [
    counterOf(`${PREFIX}requests_total`, 'Requests answered by the relay, by fastify route (proxy for the transparent proxy), x-relay-cache and status code', kept.requests),
    histogramOf(`${PREFIX}overhead_seconds`, 'Time the relay itself added to a proxied exchange before its answer head went out, by upstream route', kept.overhead),
    histogramOf(`${PREFIX}upstream_latency_seconds`, 'Time from the upstream request to its response head, by upstream route', kept.upstreamLatency),
    counterOf(`${PREFIX}cache_failures_total`, 'Cache store calls on the proxy path that failed or timed out, by operation', kept.cacheFailures),
    counterOf(
      `${PREFIX}fleet_flights_total`,
      'Cache misses that went into the fleet (Redis cache), by what became of them: lead (this relay made the call), follow (another relay did), takeover (its relay died; this one made it), stored (found stored meanwhile), fallback (Redis failing: single flight on this relay only)',
      kept.fleetFlights,
    ),
    gauge(`${PREFIX}cache_entries`, 'Entries in the cache store (last known value when the store does not answer)', async () => (await stats()).entries),
    gauge(`${PREFIX}cache_bytes`, 'Bytes in the cache store (last known value when the store does not answer)', async () => (await stats()).bytes),
    gauge(`${PREFIX}reports_pending`, 'Reports accepted and not yet durable (in neither the report store nor the outbox)', () => sources.reports.pending),
    mirrorCounter(`${PREFIX}reports_written_total`, 'Reports the report store has taken, directly or from the outbox', () => sources.reports.written),
    mirrorCounter(`${PREFIX}reports_dropped_total`, 'Reports lost (neither written nor kept in the outbox); must stay 0', () => sources.outbox?.dropped ?? 0),
    gauge(`${PREFIX}outbox_depth`, 'Reports waiting in the durable outbox for the report store to come back', () => sources.outbox?.depth ?? 0),
    mirrorCounter(`${PREFIX}trace_spans_exported_total`, 'Trace spans the OTLP endpoint took (tracing on: OTEL_EXPORTER_OTLP_ENDPOINT)', () => spans().exported),
    mirrorCounter(
      `${PREFIX}trace_spans_failed_total`,
      'Trace spans in exports that failed (endpoint down, refusing, or slower than OTEL_EXPORTER_OTLP_TIMEOUT); they are not retried later',
      () => spans().failed,
    ),
    mirrorCounter(
      `${PREFIX}trace_spans_dropped_total`,
      'Trace spans dropped because the export queue (OTEL_BSP_MAX_QUEUE_SIZE) was full: the endpoint does not keep up or is down',
      () => spans().dropped,
    ),
  ];
  const own = new Registry();
  for (const m of all) own.registerMetric(m);
  return Registry.merge([processMetrics(), own]);
}
