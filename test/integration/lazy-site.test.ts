// A relay used as a proxy never loads fastify: the edges answer proxied calls, /healthz, /readyz and
// /metrics (what probes and a scraper ask), and the site (the rest of the API, /dashboard) is built on the
// first request for it; the OpenAPI document and Swagger UI (/docs) on the first request for them. (This file runs in a process of its own, so what is loaded is what this relay
// loaded.)
import { createRequire } from 'node:module';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { chat } from '../helpers/proxy-call.js';
import { type TestRelay, startRelay } from '../helpers/relay.js';

const loaded = (pkg: string): boolean =>
  Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes(`/node_modules/${pkg}/`));

let up: FakeUpstream;
let relay: TestRelay;
beforeAll(async () => {
  up = await startFakeUpstream();
  relay = await startRelay({ upstreamUrl: up.url, cacheUrl: 'sqlite' });
});
afterAll(async () => {
  await relay.close();
  await up.close();
});

it('answers proxied calls and health checks without loading fastify, and builds the site on first use', async () => {
  expect((await chat(relay.url, 'lazy one')).cache).toBe('MISS');
  expect((await chat(relay.url, 'lazy one')).cache).toBe('HIT');
  expect(await (await fetch(`${relay.url}/healthz`)).json()).toEqual({ status: 'ok' });
  const ready = await fetch(`${relay.url}/readyz`);
  expect(ready.status).toBe(200);
  expect(await ready.json()).toMatchObject({ status: 'ready', cache: { kind: 'sqlite', status: 'ok' } });
  // prom-client (and @opentelemetry/api, which it requires) only for a scrape: the counts are plain until then
  expect(loaded('prom-client')).toBe(false);
  const scrape = await fetch(`${relay.url}/metrics`);
  expect(scrape.status).toBe(200);
  expect(await scrape.text()).toMatch(/^llm_relay_requests_total\{route="\/readyz",cache_status="none",status_code="200"\} 1$/m);
  // a load balancer's probe may be a HEAD
  const head = await fetch(`${relay.url}/readyz`, { method: 'HEAD' });
  expect([head.status, head.headers.get('content-type'), await head.text()]).toEqual([200, 'application/json; charset=utf-8', '']);
  expect(loaded('fastify')).toBe(false);

  // The first request for the site builds it, and is answered like any other.
  await relay.reports.flush();
  const list = (await (await fetch(`${relay.url}/api/reporting/v2/requests`)).json()) as { items: { proxy: { cacheStatus: string } }[] };
  expect(list.items.map((r) => r.proxy.cacheStatus)).toEqual(['HIT', 'MISS']);
  expect(loaded('fastify')).toBe(true);
  expect((await fetch(`${relay.url}/dashboard/`)).status).toBe(200);
  expect((await fetch(`${relay.url}/docsx`)).status).toBe(404);
  expect(loaded('@fastify/swagger')).toBe(false);

  // The OpenAPI document and Swagger UI: an app of their own, built on the first request under /docs.
  const doc = (await (await fetch(`${relay.url}/docs/json`)).json()) as { paths: Record<string, unknown> };
  expect(Object.keys(doc.paths)).toContain('/api/reporting/v2/requests');
  expect(loaded('@fastify/swagger')).toBe(true);
  expect((await fetch(`${relay.url}/docs`, { redirect: 'manual' })).status).toBeLessThan(400);
});
