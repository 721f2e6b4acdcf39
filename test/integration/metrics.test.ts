// /metrics of the real relay: it parses as Prometheus text and its counters move with hits and misses.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { parse, value } from '../helpers/prometheus.js';
import { chat } from '../helpers/proxy-call.js';
import { type TestRelay, post, startRelay } from '../helpers/relay.js';

let up: FakeUpstream;
let relay: TestRelay;
beforeAll(async () => {
  up = await startFakeUpstream();
  relay = await startRelay({ upstreamUrl: up.url });
});
afterAll(async () => {
  await relay.close();
  await up.close();
});

async function scrape() {
  const res = await fetch(`${relay.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parse(await res.text());
}

describe('/metrics', () => {
  it('counts proxied hits and misses, API calls, overhead and reports', async () => {
    const before = await scrape();
    const proxied = (status: string) => value(before, 'llm_relay_requests_total', { route: 'proxy', cache_status: status, status_code: '200' }) ?? 0;
    const [miss0, hit0] = [proxied('MISS'), proxied('HIT')];

    await chat(relay.url, 'metrics one');
    await chat(relay.url, 'metrics one');
    await chat(relay.url, 'metrics one');
    await chat(relay.url, 'metrics two');
    await post(`${relay.url}/api/cache/v1/request/retrieve`, { request: { nothing: true } });
    await relay.reports.flush();

    const after = await scrape();
    const count = (status: string) => value(after, 'llm_relay_requests_total', { route: 'proxy', cache_status: status, status_code: '200' });
    expect(count('MISS')! - miss0).toBe(2);
    expect(count('HIT')! - hit0).toBe(2);
    expect(value(after, 'llm_relay_requests_total', { route: '/api/cache/v1/request/retrieve', cache_status: 'none', status_code: '404' })).toBe(1);
    expect(value(after, 'llm_relay_overhead_seconds_count', { route: 'default', cache_status: 'HIT' })).toBe(2);
    expect(value(after, 'llm_relay_upstream_latency_seconds_count', { route: 'default' })).toBe(2);
    expect(value(after, 'llm_relay_reports_written_total')).toBeGreaterThanOrEqual(4);
    expect(value(after, 'llm_relay_reports_dropped_total')).toBe(0);
    expect(value(after, 'llm_relay_outbox_depth')).toBe(0);
    // The cache gauges are read from the store at most every 2 s.
    await new Promise((r) => setTimeout(r, 2100));
    expect(value(await scrape(), 'llm_relay_cache_entries')).toBe(2);
  });
});
