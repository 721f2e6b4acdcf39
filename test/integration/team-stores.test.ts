// The direct API end to end on the team stores: cache in a real Redis, reports in a real PostgreSQL.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestRelay, get, post, startRelay } from '../helpers/relay.js';
import { DATABASE_URL, REDIS_URL, requirePostgres, requireRedis } from '../helpers/servers.js';

let relay: TestRelay;
let setupError: unknown;

// A failing beforeAll would mark the tests skipped; each test fails with the reason instead.
beforeAll(async () => {
  try {
    await requireRedis();
    await requirePostgres();
    relay = await startRelay({ cacheUrl: REDIS_URL, reportsUrl: DATABASE_URL });
  } catch (err) {
    setupError = err;
  }
});
afterAll(async () => relay?.close());

describe('Redis cache + PostgreSQL reports', () => {
  it('is ready with both stores named', async () => {
    if (setupError) throw setupError;
    expect(await get(`${relay.url}/readyz`)).toEqual({
      status: 200,
      body: { status: 'ready', cache: { kind: 'redis', status: 'ok' }, reports: { kind: 'postgres', status: 'ok', outboxDepth: 0 } },
    });
  });

  it('saves, retrieves and reports', async () => {
    if (setupError) throw setupError;
    const run = randomUUID();
    const request = { model: 'gpt-4o', messages: [{ role: 'user', content: `team ${run}` }] };
    const saved = await post(`${relay.url}/api/cache/v1/request/save`, { request, response: { answer: run } });
    expect(saved.status).toBe(201);
    expect(await post(`${relay.url}/api/cache/v1/request/retrieve`, { request })).toMatchObject({
      status: 200,
      body: { hit: true, data: { answer: run } },
    });
    expect((await post(`${relay.url}/api/cache/v1/request/retrieve`, { request }, { 'x-relay-cache-namespace': 'other' })).status).toBe(404);

    const sent = {
      metadata: { client: `team-${run}` },
      request: { timestamp: '2024-02-02T00:00:00.000Z', body: request },
      response: { timestamp: '2024-02-02T00:00:00.500Z', body: { model: 'gpt-4o', usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 } } },
      properties: { run },
    };
    const rep = await post(`${relay.url}/api/reporting/v2/request`, sent);
    expect(rep.status).toBe(201);
    expect(rep.body).toMatchObject({ ...sent, durationMs: 500, costUsd: (100 * 2.5 + 10 * 10) / 1e6 });
    expect(await get(`${relay.url}/api/reporting/v2/requests/${rep.body.id}`)).toEqual({ status: 200, body: rep.body });
    const listed = await get(`${relay.url}/api/reporting/v2/requests?property.run=${run}`);
    expect(listed.body).toEqual({ items: [rep.body], nextCursor: null });
  });
});
