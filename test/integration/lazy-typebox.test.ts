// The bodies and headers of the cache calls and of reports are checked with the checks generated from their
// schemas (http/site-validation.ts), on the API edge and on fastify's routes alike, so the real
// @pezzo/client, caching on, is answered by a relay that never loads TypeBox (~0.5 s and ~30 MB), and so is
// the dashboard with the reads it makes; TypeBox loads for the first value a check refuses (whose 400 is the
// one TypeBox's compiler words) and for a querystring value written otherwise than plainly (`cacheHit=1`).
// The relay is a process of its own (dist/cli.js), whose resolved modules a hook writes out.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pezzo, PezzoOpenAI } from '@pezzo/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type FakeUpstream, chatCompletion, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type RelayProcess, spawnRelay } from '../helpers/relay-process.js';

const WATCH = fileURLToPath(new URL('../helpers/typebox-watch.mjs', import.meta.url));
let upstream: FakeUpstream;
let relay: RelayProcess;
let dataDir: string;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'relay-lazy-typebox-'));
  relay = await spawnRelay({ RELAY_DATA_DIR: dataDir, RELAY_UPSTREAM_URL: upstream.url, NODE_OPTIONS: `--import=${WATCH}` });
});
afterAll(async () => {
  relay?.child.kill('SIGTERM');
  await relay?.exited;
  await upstream.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Whether the relay loaded TypeBox, beyond its guards (typebox/guard: a few modules the generated checks call). */
const typeboxLoaded = (): boolean =>
  relay
    .output()
    .split('\n')
    .some((line) => line.startsWith('typebox module: ') && !line.includes('/node_modules/typebox/build/guard/'));

/** POSTs JSON with its length declared (the API edge answers), or chunked (fastify's route). */
async function post(url: string, body: unknown, chunked = false): Promise<{ status: number; body: any }> {
  const text = JSON.stringify(body);
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    ...(chunked ? { body: new Blob([text]).stream(), duplex: 'half' } : { body: text }),
  } as RequestInit);
  return { status: res.status, body: await res.json() };
}

it('answers the Pezzo client with caching on without loading TypeBox, and loads it for a refusal and a querystring written otherwise', async () => {
  const pezzo = new Pezzo({ serverUrl: relay.url, apiKey: 'pez_test_key', projectId: 'lazy', environment: 'test' });
  const openai = new PezzoOpenAI(pezzo, { apiKey: 'sk-upstream-test', baseURL: `${upstream.url}/v1` });
  const params = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Hello lazy' }] };
  const first = await openai.chat.completions.create(params, { cache: true });
  expect(first).toEqual(chatCompletion('echo: Hello lazy'));
  // (Pezzo zeroes the usage of a cached answer)
  expect(await openai.chat.completions.create(params, { cache: true })).toEqual({ ...first, usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } });
  expect(upstream.calls).toHaveLength(1);
  // the same routes with the relay's own headers, and the dashboard
  const saved = await fetch(`${relay.url}/api/cache/v1/request/save`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-relay-cache-namespace': 'lazy-ns', 'x-relay-cache-ttl': '60' },
    body: JSON.stringify({ request: { q: 1 }, response: { a: 1 } }),
  });
  expect(saved.status).toBe(201);
  expect(await post(`${relay.url}/api/cache/v1/request/retrieve`, { request: { q: 2 } })).toMatchObject({ status: 404, body: { code: 'RELAY_ERR_CACHE_MISS' } });
  // (chunked: fastify's route, the site's validator)
  expect(await post(`${relay.url}/api/cache/v1/request/retrieve`, { request: { q: 2 } }, true)).toMatchObject({ status: 404, body: { code: 'RELAY_ERR_CACHE_MISS' } });
  expect((await fetch(`${relay.url}/dashboard/`)).status).toBe(200);
  expect(relay.output()).toContain('/api/cache/v1/request/retrieve'); // (the watch is in place: the access log is in the same output)

  // The list, one report and the stats, their querystrings written plainly (limit=1 is the number 1: one
  // item and a cursor). The client's two reports are sent in the background: read until both are there.
  type Page = { items: { id: string; cacheHit: boolean }[]; nextCursor: string | null };
  let newest: Page = { items: [], nextCursor: null };
  for (let i = 0; i < 50 && newest.nextCursor === null; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 20));
    const res = await fetch(`${relay.url}/api/reporting/v2/requests?limit=1&environment=test`);
    expect(res.status).toBe(200);
    newest = (await res.json()) as Page;
  }
  expect(newest.items).toHaveLength(1);
  expect(newest.nextCursor).not.toBeNull();
  const page = (await (await fetch(`${relay.url}/api/reporting/v2/requests?environment=test&cacheHit=true`)).json()) as Page;
  expect(page.items.map((r) => r.cacheHit)).toEqual([true]);
  const one = await fetch(`${relay.url}/api/reporting/v2/requests/${page.items[0]!.id}`);
  expect(((await one.json()) as { id: string }).id).toBe(page.items[0]!.id);
  const stats = (await (await fetch(`${relay.url}/api/reporting/v2/stats?groupBy=model&environment=test`)).json()) as { totals: { requests: number } };
  expect(stats.totals.requests).toBe(2);
  expect(typeboxLoaded()).toBe(false);

  // The first refusal loads TypeBox for its message; the second gets the same answer from it directly; and
  // so for the site's route.
  const refused = { statusCode: 400, code: 'RELAY_ERR_VALIDATION', error: 'Bad Request', message: 'body/request must be object' };
  for (const chunked of [false, true]) {
    expect(await post(`${relay.url}/api/cache/v1/request/save`, { request: 1, response: {} }, chunked)).toEqual({ status: 400, body: refused });
    expect(typeboxLoaded()).toBe(true);
    expect(await post(`${relay.url}/api/cache/v1/request/save`, { request: 1, response: {} }, chunked)).toEqual({ status: 400, body: refused });
  }

  // A value written otherwise is TypeBox's to convert, as it always was: cacheHit=1 is true, limit=1.5 is 1.
  const converted = (await (await fetch(`${relay.url}/api/reporting/v2/requests?limit=1.5&environment=test&cacheHit=1`)).json()) as Page;
  expect(converted.items.map((r) => r.id)).toEqual([page.items[0]!.id]);
});
