// Real Redis and PostgreSQL behind a TCP proxy the test cuts: a dead cache store loses no client call,
// a dead report store loses no report, and both recover by themselves.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CutProxy, startCutProxy } from '../helpers/cut-proxy.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { chat } from '../helpers/proxy-call.js';
import { type TestRelay, get, post, startRelay } from '../helpers/relay.js';
import { DATABASE_URL, REDIS_URL, requirePostgres, requireRedis } from '../helpers/servers.js';

let up: FakeUpstream;
beforeAll(async () => {
  up = await startFakeUpstream();
});
afterAll(async () => up.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Redis dies under load', () => {
  let proxy: CutProxy;
  let relay: TestRelay;
  afterAll(async () => {
    await relay?.close();
    await proxy?.close();
  });

  it('loses no client call, answers /api/cache with 503 meanwhile, and recovers by itself', async () => {
    await requireRedis();
    const redis = new URL(REDIS_URL);
    proxy = await startCutProxy(redis.hostname, Number(redis.port || 6379));
    relay = await startRelay({ upstreamUrl: up.url, cacheUrl: proxy.url(REDIS_URL), storeTimeoutMs: 300 });
    const run = randomUUID();
    const prompts = Array.from({ length: 20 }, (_, i) => `redis ${run} ${i}`);
    for (const p of prompts) expect((await chat(relay.url, p)).cache).toBe('MISS');
    expect((await chat(relay.url, prompts[0]!)).cache).toBe('HIT');

    const statuses: number[] = [];
    let stop = false;
    const load = (async () => {
      for (let i = 0; !stop; i++) {
        const batch = await Promise.all(prompts.slice(0, 5).map((p) => chat(relay.url, `${p}${i % 3 ? '' : ' new'}`)));
        statuses.push(...batch.map((r) => r.status));
      }
    })();
    await sleep(200);
    await proxy.cut();
    await sleep(800);
    const api = await post(`${relay.url}/api/cache/v1/request/retrieve`, { request: { x: run } });
    expect(api.status).toBe(503);
    expect(api.body).toEqual({ statusCode: 503, code: 'RELAY_ERR_CACHE_UNAVAILABLE', error: 'Service Unavailable', message: expect.stringMatching(/^The cache store is unavailable: /) });
    const ready = await get(`${relay.url}/readyz`);
    expect(ready.status).toBe(503);
    await proxy.restore();
    await sleep(2500); // reconnect backoff
    stop = true;
    await load;
    expect(statuses.length).toBeGreaterThan(20);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    // Recovered: hits again, /readyz is green.
    expect((await chat(relay.url, prompts[1]!)).cache).toBe('HIT');
    expect((await get(`${relay.url}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${relay.url}/metrics`)).text();
    expect(metrics).toMatch(/llm_relay_cache_failures_total\{op="lookup"\} [1-9]/);
  });
});

describe('PostgreSQL dies under load', () => {
  let proxy: CutProxy;
  let relay: TestRelay;
  afterAll(async () => {
    await relay?.close();
    await proxy?.close();
  });

  it('loses no report: acknowledged reports wait in the outbox and land when it is back', async () => {
    await requirePostgres();
    const pgUrl = new URL(DATABASE_URL);
    proxy = await startCutProxy(pgUrl.hostname, Number(pgUrl.port || 5432));
    relay = await startRelay({ upstreamUrl: up.url, reportsUrl: proxy.url(DATABASE_URL), outboxRetryMs: 100 });
    const client = `pg-fault-${randomUUID()}`;
    const report = (i: number) => ({
      metadata: { client },
      request: { timestamp: new Date().toISOString(), body: { i } },
      response: { timestamp: new Date().toISOString(), body: { ok: true } },
    });
    const acknowledged: string[] = [];
    let sent = 0;
    let stop = false;
    const load = (async () => {
      while (!stop) {
        const batch = await Promise.all(Array.from({ length: 10 }, () => post(`${relay.url}/api/reporting/v2/request`, report(sent++))));
        for (const r of batch) if (r.status === 201) acknowledged.push(r.body.id);
        // Proxied calls are reported too.
        await chat(relay.url, `${client} ${sent}`, { headers: { 'x-relay-client': client } });
      }
    })();
    await sleep(300);
    await proxy.cut();
    await sleep(1000);
    const depth = (await get(`${relay.url}/readyz`)).body.reports.outboxDepth;
    expect(depth).toBeGreaterThan(0);
    await proxy.restore();
    await sleep(300);
    stop = true;
    await load;
    // Every acknowledged report and every proxied exchange is in PostgreSQL once the outbox drained.
    for (let i = 0; i < 100 && relay.reports.counters.outboxDepth > 0; i++) await sleep(100);
    expect(relay.reports.counters.outboxDepth).toBe(0);
    await relay.reports.flush();
    const db = new pg.Client({ connectionString: DATABASE_URL });
    await db.connect();
    try {
      const rows = await db.query<{ id: string }>("SELECT id FROM reports WHERE client = $1 AND data->'proxy' IS NULL", [client]);
      const stored = new Set(rows.rows.map((r) => r.id));
      expect(acknowledged.filter((id) => !stored.has(id))).toEqual([]);
      expect(stored.size).toBe(acknowledged.length);
      const proxied = await db.query<{ n: string }>("SELECT count(*) AS n FROM reports WHERE client = $1 AND data->'proxy' IS NOT NULL", [client]);
      expect(Number(proxied.rows[0]!.n)).toBe(Math.ceil(sent / 10));
    } finally {
      await db.end();
    }
    expect(acknowledged.length).toBe(sent);
    expect(relay.reports.counters.dropped).toBe(0);
  });
});
