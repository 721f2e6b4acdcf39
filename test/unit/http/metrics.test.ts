import swagger from '@fastify/swagger';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { type MetricsOptions, type MetricsSources, createMetrics } from '../../../src/http/metrics.js';

import { parse, value } from '../../helpers/prometheus.js';

function fakeSources(): MetricsSources & { calls: number; next: () => Promise<{ entries: number; bytes: number }> } {
  const s = {
    calls: 0,
    next: async () => ({ entries: 3, bytes: 1234 }),
    cacheStore: {
      stats: () => {
        s.calls++;
        return s.next();
      },
    },
    reports: { pending: 2, written: 5 },
  };
  return s;
}

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

async function build(sources: MetricsSources, opts?: MetricsOptions) {
  const app = Fastify();
  apps.push(app);
  const metrics = createMetrics(sources, opts);
  metrics.install(app);
  await app.register(swagger, { openapi: { info: { title: 't', version: '0' } } });
  // Routes in encapsulated child plugins, registered after install, as app.ts does.
  await app.register(async (api) => {
    api.get('/api/thing/:id', async () => ({ ok: true }));
  });

  await app.ready();
  const scrape = async () => {
    const res = await app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    return parse(res.body);
  };
  return { app, metrics, scrape };
}

describe('metrics', () => {
  it('counts every answered request by route, cache status and status code, but not scrapes', async () => {
    const { app, metrics, scrape } = await build(fakeSources());
    await app.inject({ method: 'GET', url: '/api/thing/1' });
    await app.inject({ method: 'GET', url: '/api/thing/2' });
    await app.inject({ method: 'POST', url: '/v1/chat/completions' }); // no such route: fastify's 404
    // The proxy edge answers beside fastify and counts its requests itself.
    metrics.countRequest('proxy', 'HIT', 200);
    metrics.countRequest('proxy', 'not-a-cache-status', 502);
    await scrape();
    const s = await scrape();
    expect(value(s, 'llm_relay_requests_total', { route: '/api/thing/:id', cache_status: 'none', status_code: '200' })).toBe(2);
    expect(value(s, 'llm_relay_requests_total', { route: 'proxy', cache_status: 'HIT', status_code: '200' })).toBe(1);
    expect(value(s, 'llm_relay_requests_total', { route: 'proxy', cache_status: 'none', status_code: '502' })).toBe(1);
    expect(value(s, 'llm_relay_requests_total', { route: 'unmatched', cache_status: 'none', status_code: '404' })).toBe(1);
    expect(s.filter((x) => x.name === 'llm_relay_requests_total' && x.labels.route === '/metrics')).toEqual([]);
    expect(s.filter((x) => x.name === 'llm_relay_requests_total').reduce((n, x) => n + x.value, 0)).toBe(5);
  });

  it('records exchanges and cache failures reported by core', async () => {
    const { metrics, scrape } = await build(fakeSources());
    const before = await scrape();
    expect(value(before, 'llm_relay_cache_failures_total', { op: 'lookup' })).toBe(0);
    expect(value(before, 'llm_relay_cache_failures_total', { op: 'save' })).toBe(0);

    metrics.telemetry.exchange({ route: 'default', cacheStatus: 'MISS', status: 200, overheadMs: 0.4, upstreamMs: 150 });
    metrics.telemetry.exchange({ route: 'default', cacheStatus: 'HIT', status: 200, overheadMs: 0.2 });
    metrics.telemetry.exchange({ route: '/anthropic', cacheStatus: 'HIT', status: 200, overheadMs: 3 });
    metrics.telemetry.cacheFailure('lookup');
    metrics.telemetry.cacheFailure('lookup');
    const s = await scrape();

    expect(value(s, 'llm_relay_overhead_seconds_count', { route: 'default', cache_status: 'MISS' })).toBe(1);
    expect(value(s, 'llm_relay_overhead_seconds_sum', { route: 'default', cache_status: 'MISS' })).toBeCloseTo(0.0004, 9);
    expect(value(s, 'llm_relay_overhead_seconds_bucket', { route: 'default', cache_status: 'MISS', le: '0.00025' })).toBe(0);
    expect(value(s, 'llm_relay_overhead_seconds_bucket', { route: 'default', cache_status: 'MISS', le: '0.0005' })).toBe(1);
    expect(value(s, 'llm_relay_overhead_seconds_count', { route: 'default', cache_status: 'HIT' })).toBe(1);
    expect(value(s, 'llm_relay_overhead_seconds_count', { route: '/anthropic', cache_status: 'HIT' })).toBe(1);
    expect(value(s, 'llm_relay_upstream_latency_seconds_count', { route: 'default' })).toBe(1);
    expect(value(s, 'llm_relay_upstream_latency_seconds_sum', { route: 'default' })).toBeCloseTo(0.15, 9);
    expect(value(s, 'llm_relay_upstream_latency_seconds_bucket', { route: 'default', le: '0.1' })).toBe(0);
    expect(value(s, 'llm_relay_upstream_latency_seconds_bucket', { route: 'default', le: '0.25' })).toBe(1);
    expect(value(s, 'llm_relay_upstream_latency_seconds_count', { route: '/anthropic' })).toBeUndefined();
    expect(value(s, 'llm_relay_cache_failures_total', { op: 'lookup' })).toBe(2);
    expect(value(s, 'llm_relay_cache_failures_total', { op: 'save' })).toBe(0);
  });

  it('counts as prom-client’s histograms do: cumulative buckets, a value past the last bound in +Inf only, and skips what is no number', async () => {
    const { metrics, scrape } = await build(fakeSources());
    for (const overheadMs of [0.05, 0.1, 0.7, 3000, Number.NaN]) metrics.telemetry.exchange({ route: 'default', cacheStatus: 'MISS', status: 200, overheadMs });
    metrics.telemetry.fleetFlight!('lead');
    metrics.telemetry.fleetFlight!('lead');
    const s = await scrape();
    const bucket = (le: string) => value(s, 'llm_relay_overhead_seconds_bucket', { route: 'default', cache_status: 'MISS', le });
    // 0.05 ms and 0.1 ms (exactly on the first bound) in the first bucket, 0.7 ms in 0.001, 3 s past 1
    expect([bucket('0.0001'), bucket('0.00025'), bucket('0.001'), bucket('0.5'), bucket('1'), bucket('+Inf')]).toEqual([2, 2, 3, 3, 3, 4]);
    expect(value(s, 'llm_relay_overhead_seconds_count', { route: 'default', cache_status: 'MISS' })).toBe(4);
    expect(value(s, 'llm_relay_overhead_seconds_sum', { route: 'default', cache_status: 'MISS' })).toBeCloseTo(3.00085, 9);
    expect(value(s, 'llm_relay_fleet_flights_total', { event: 'lead' })).toBe(2);
  });

  it('reads cache, report and outbox numbers on scrape', async () => {
    const sources = fakeSources();
    const { scrape } = await build(sources, { statsTtlMs: 0 });
    let s = await scrape();
    expect(value(s, 'llm_relay_cache_entries')).toBe(3);
    expect(value(s, 'llm_relay_cache_bytes')).toBe(1234);
    expect(value(s, 'llm_relay_reports_pending')).toBe(2);
    expect(value(s, 'llm_relay_reports_written_total')).toBe(5);
    expect(value(s, 'llm_relay_reports_dropped_total')).toBe(0);
    expect(value(s, 'llm_relay_outbox_depth')).toBe(0);

    sources.reports = { pending: 0, written: 9 };
    sources.next = async () => ({ entries: 4, bytes: 2000 });
    s = await scrape();
    expect(value(s, 'llm_relay_cache_entries')).toBe(4);
    expect(value(s, 'llm_relay_cache_bytes')).toBe(2000);
    expect(value(s, 'llm_relay_reports_pending')).toBe(0);
    expect(value(s, 'llm_relay_reports_written_total')).toBe(9);
  });

  it('declares counters as counters and reads the outbox when there is one', async () => {
    const sources: MetricsSources = { ...fakeSources(), outbox: { depth: 7, dropped: 1 } };
    const { app, scrape } = await build(sources);
    const s = await scrape();
    expect(value(s, 'llm_relay_outbox_depth')).toBe(7);
    expect(value(s, 'llm_relay_reports_dropped_total')).toBe(1);
    const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    for (const name of ['requests_total', 'cache_failures_total', 'reports_written_total', 'reports_dropped_total'])
      expect(text).toContain(`# TYPE llm_relay_${name} counter\n`);
    for (const name of ['overhead_seconds', 'upstream_latency_seconds']) expect(text).toContain(`# TYPE llm_relay_${name} histogram\n`);
    for (const name of ['cache_entries', 'cache_bytes', 'reports_pending', 'outbox_depth']) expect(text).toContain(`# TYPE llm_relay_${name} gauge\n`);
    // Default process metrics, prefixed.
    expect(value(s, 'llm_relay_process_cpu_user_seconds_total')).toBeGreaterThanOrEqual(0);
    expect(s.some((x) => x.name.startsWith('llm_relay_nodejs_'))).toBe(true);
    expect(s.every((x) => x.name.startsWith('llm_relay_'))).toBe(true);
  });

  it('reuses one stats() answer for a while', async () => {
    const sources = fakeSources();
    const { scrape } = await build(sources, { statsTtlMs: 60_000 });
    await scrape();
    await scrape();
    await scrape();
    expect(sources.calls).toBe(1);
  });

  it('keeps the last known cache numbers when stats() hangs or fails, without failing the scrape', async () => {
    const sources = fakeSources();
    const { scrape } = await build(sources, { statsTtlMs: 0, statsTimeoutMs: 100 });
    await scrape();

    sources.next = () => new Promise(() => {}); // Redis down: never answers
    const t0 = performance.now();
    let s = await scrape();
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(value(s, 'llm_relay_cache_entries')).toBe(3);
    expect(value(s, 'llm_relay_cache_bytes')).toBe(1234);
    // The hanging call is still outstanding: a second scrape waits for it again instead of piling up calls.
    s = await scrape();
    expect(value(s, 'llm_relay_cache_entries')).toBe(3);
    expect(sources.calls).toBe(2);
  });

  it('keeps the last known cache numbers when stats() rejects', async () => {
    const sources = fakeSources();
    const { scrape } = await build(sources, { statsTtlMs: 0 });
    await scrape();
    sources.next = async () => {
      throw new Error('ECONNREFUSED');
    };
    const s = await scrape();
    expect(value(s, 'llm_relay_cache_entries')).toBe(3);
    expect(value(s, 'llm_relay_cache_bytes')).toBe(1234);
    expect(sources.calls).toBe(2);
  });

  it('survives a stats() that throws instead of rejecting, and asks again after giving up on a hung call', async () => {
    const sources = fakeSources();
    let clock = 0;
    const { scrape } = await build(sources, { statsTtlMs: 1000, statsTimeoutMs: 20, now: () => clock });
    sources.next = () => {
      throw new Error('not connected');
    };
    expect(value(await scrape(), 'llm_relay_cache_entries')).toBe(0);

    clock += 1000;
    sources.next = () => new Promise(() => {});
    await scrape();
    clock += 29_000; // still waiting on the hung call: no second call
    await scrape();
    expect(sources.calls).toBe(2);
    clock += 1000; // 30 s: that call is given up on
    sources.next = async () => ({ entries: 8, bytes: 80 });
    expect(value(await scrape(), 'llm_relay_cache_entries')).toBe(8);
    expect(sources.calls).toBe(3);
  });

  it('treats a report count that went back to 0 as a counter reset', async () => {
    const sources = fakeSources();
    const { scrape } = await build(sources);
    expect(value(await scrape(), 'llm_relay_reports_written_total')).toBe(5);
    sources.reports = { pending: 0, written: 1 };
    expect(value(await scrape(), 'llm_relay_reports_written_total')).toBe(1);
    sources.reports = { pending: 0, written: 4 };
    expect(value(await scrape(), 'llm_relay_reports_written_total')).toBe(4);
  });

  it('answers zeros before the store ever answered', async () => {
    const sources = fakeSources();
    sources.next = () => new Promise(() => {});
    const { scrape } = await build(sources, { statsTimeoutMs: 50 });
    const s = await scrape();
    expect(value(s, 'llm_relay_cache_entries')).toBe(0);
    expect(value(s, 'llm_relay_cache_bytes')).toBe(0);
  });

  it('keeps /metrics out of the OpenAPI document, and many apps can live in one process', async () => {
    const { app } = await build(fakeSources());
    const doc = app.swagger() as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toContain('/api/thing/{id}');
    expect(Object.keys(doc.paths)).not.toContain('/metrics');
    const other = await build(fakeSources());
    other.metrics.telemetry.cacheFailure('save');
    const mine = parse((await (await build(fakeSources())).metrics.scrape()).text);
    expect(value(mine, 'llm_relay_cache_failures_total', { op: 'save' })).toBe(0);
  });
});
