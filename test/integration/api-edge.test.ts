// POST /api/reporting/v2/request and the cache calls (/api/cache/v1/request/save and /retrieve) of the usual
// form (an application/json body of declared length) are answered by the API edge without fastify; every
// other form by fastify's routes. Both must answer alike: the same request sent with its length declared
// (the edge) and chunked (fastify's route) gets the same status and body, for valid requests, broken JSON,
// schema violations (bodies and headers) and the relay token. And a relay that only takes reports and cache
// calls (the Pezzo client's traffic) never loads fastify. (This file runs in a process of its own, so what
// is loaded is what its relays loaded.)
import { createRequire } from 'node:module';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestRelay, startRelay } from '../helpers/relay.js';

const loaded = (pkg: string): boolean =>
  Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes(`/node_modules/${pkg}/`));

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: Record<string, unknown>;
}

/** POSTs `body` as is, with its length declared or chunked (then fastify's route answers). */
function post(url: string, body: string, opts: { chunked?: boolean; headers?: Record<string, string>; path?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'content-type': 'application/json', ...opts.headers };
    if (!opts.chunked) headers['content-length'] = String(Buffer.byteLength(body));
    const req = request(`${url}${opts.path ?? '/api/reporting/v2/request'}`, { method: 'POST', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, json: JSON.parse(text) as Record<string, unknown> }));
    });
    req.on('error', reject);
    if (opts.chunked) req.write(body.slice(0, 1));
    req.end(opts.chunked ? body.slice(1) : body);
  });
}

const SAVE = '/api/cache/v1/request/save';
const RETRIEVE = '/api/cache/v1/request/retrieve';
const T = '2026-11-25T10:00:00.000Z';
const valid = { metadata: { client: 'edge-test' }, request: { timestamp: T, body: { model: 'gpt-4o-mini', messages: [] } }, response: { timestamp: T, body: { id: 'x' } } };

let relay: TestRelay;
let guarded: TestRelay;
beforeAll(async () => {
  relay = await startRelay({ cacheUrl: 'sqlite' });
  guarded = await startRelay({ cacheUrl: 'memory', apiTokens: ['edge-token'] });
});
afterAll(async () => {
  await relay.close();
  await guarded.close();
});

describe('the API edge', () => {
  it('takes reports without loading fastify, and answers 201 with the stored report', async () => {
    const a = await post(relay.url, JSON.stringify(valid));
    expect(a.status).toBe(201);
    expect(a.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(a.json).toMatchObject({ ...valid, id: expect.any(String), requestBytes: expect.any(Number) });
    expect(loaded('fastify')).toBe(false);
  });

  it('takes the Pezzo client’s cache calls without loading fastify', async () => {
    const pezzo = { 'x-pezzo-api-key': 'k', 'x-pezzo-project-id': 'edge' };
    const key = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'edge' }] };
    const miss = await post(relay.url, JSON.stringify({ request: key }), { path: RETRIEVE, headers: pezzo });
    expect(miss).toMatchObject({ status: 200, json: { hit: false, data: null } });
    const saved = await post(relay.url, JSON.stringify({ request: key, response: { id: 'r1', choices: [] } }), { path: SAVE, headers: pezzo });
    expect(saved.status).toBe(201);
    expect(saved.json).toEqual({ hash: expect.stringMatching(/^[0-9a-f]{64}$/), exp: expect.any(String) });
    const hit = await post(relay.url, JSON.stringify({ request: key }), { path: RETRIEVE, headers: pezzo });
    expect(hit).toMatchObject({ status: 200, json: { hit: true, data: { id: 'r1', choices: [] } } });
    expect(hit.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(loaded('fastify')).toBe(false);
  });

  it.each<[string, string]>([
    ['a valid report', JSON.stringify(valid)],
    ['broken JSON', '{"request": {'],
    ['JSON with a prototype key', '{"__proto__": {"x": 1}, "request": {"timestamp": "2026-11-25T10:00:00.000Z"}, "response": {"timestamp": "2026-11-25T10:00:00.000Z"}}'],
    ['a number out of range', '{"request": {"timestamp": "2026-11-25T10:00:00.000Z"}, "response": {"timestamp": "2026-11-25T10:00:00.000Z"}, "properties": {"n": 1e400}}'],
    ['a missing timestamp', JSON.stringify({ request: {}, response: { timestamp: T } })],
    ['a bad timestamp', JSON.stringify({ ...valid, response: { timestamp: '2026-02-30T10:00:00Z' } })],
    ['a wrong type', JSON.stringify({ ...valid, cacheHit: 'yes' })],
    ['a wrong nested type', JSON.stringify({ ...valid, metadata: { client: 7 } })],
    ['not an object', '[1, 2]'],
  ])('answers %s as fastify’s route does', async (_what, body) => {
    const edge = await post(relay.url, body);
    const route = await post(relay.url, body, { chunked: true });
    expect(edge.status).toBe(route.status);
    expect(edge.headers['content-type']).toBe(route.headers['content-type']);
    if (edge.status === 201) {
      // Two reports: their own ids and receipt times, everything else alike.
      const strip = ({ id: _i, receivedAt: _r, ...rest }: Record<string, unknown>) => rest;
      expect(strip(edge.json)).toEqual(strip(route.json));
    } else expect(edge.json).toEqual(route.json);
  });

  it('asks for the relay token as fastify’s route does (x-relay-token or Authorization: Bearer)', async () => {
    const body = JSON.stringify(valid);
    for (const headers of [{}, { 'x-relay-token': 'wrong' }, { authorization: 'Bearer wrong' }] as Record<string, string>[]) {
      const edge = await post(guarded.url, body, { headers });
      const route = await post(guarded.url, body, { headers, chunked: true });
      expect(edge.status).toBe(401);
      expect(edge.json).toEqual(route.json);
    }
    expect((await post(guarded.url, body, { headers: { authorization: 'Bearer edge-token' } })).status).toBe(201);
    expect((await post(guarded.url, body, { headers: { 'x-relay-token': 'edge-token' } })).status).toBe(201);
    for (const path of [SAVE, RETRIEVE]) {
      const edge = await post(guarded.url, cacheBody, { path });
      expect(edge.status).toBe(401);
      expect(edge.json).toEqual((await post(guarded.url, cacheBody, { path, chunked: true })).json);
      expect((await post(guarded.url, cacheBody, { path, headers: { 'x-relay-token': 'edge-token' } })).status).toBe(path === SAVE ? 201 : 200);
    }
  });

  const cacheBody = JSON.stringify({ request: { model: 'm', n: 1 }, response: { id: 'cached' } });
  it.each<[string, string, string, Record<string, string>]>([
    ['a save', SAVE, cacheBody, {}],
    ['a save with a namespace and a TTL', SAVE, cacheBody, { 'x-relay-cache-namespace': 'edge-ns', 'x-relay-cache-ttl': '60' }],
    ['a retrieve that hits', RETRIEVE, cacheBody, {}],
    ['a retrieve that misses', RETRIEVE, JSON.stringify({ request: { other: 1 } }), {}],
    ['a Pezzo retrieve that misses', RETRIEVE, JSON.stringify({ request: { other: 1 } }), { 'x-pezzo-api-key': 'k' }],
    ['a save without a response', SAVE, JSON.stringify({ request: {} }), {}],
    ['a retrieve of a request that is no object', RETRIEVE, JSON.stringify({ request: 'text' }), {}],
    ['broken JSON', RETRIEVE, '{"request": ', {}],
    ['JSON with a prototype key', SAVE, '{"request": {"__proto__": {}}, "response": {}}', {}],
    ['a bad namespace header', RETRIEVE, cacheBody, { 'x-relay-cache-namespace': 'no spaces' }],
    ['a bad TTL header', SAVE, cacheBody, { 'x-relay-cache-ttl': '-5' }],
    ['a bad body and a bad header (the body is named)', SAVE, JSON.stringify({ request: 1 }), { 'x-relay-cache-ttl': 'x' }],
  ])('answers %s as fastify’s route does', async (_what, path, body, headers) => {
    const edge = await post(relay.url, body, { path, headers });
    const route = await post(relay.url, body, { path, headers, chunked: true });
    expect(edge.status).toBe(route.status);
    expect(edge.headers['content-type']).toBe(route.headers['content-type']);
    // A save's expiry is its own.
    const strip = ({ exp: _e, ...rest }: Record<string, unknown>) => rest;
    expect(strip(edge.json)).toEqual(strip(route.json));
  });

  it('answers GET /readyz and /metrics as fastify’s routes do (a GET that declares a body goes to them)', async () => {
    const get = (url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number; type: string | undefined; text: string }> =>
      new Promise((resolve, reject) => {
        const req = request(url, { method, headers }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, type: res.headers['content-type'], text }));
        });
        req.on('error', reject);
        req.end();
      });
    const headers = (url: string, sent: Record<string, string>): Promise<{ status: number; type?: string; length?: string; body: string }> =>
      new Promise((resolve, reject) => {
        const req = request(url, { method: 'HEAD', headers: sent }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, type: res.headers['content-type'], length: res.headers['content-length'], body }));
        });
        req.on('error', reject);
        req.end();
      });
    for (const r of [relay, guarded]) {
      const auth: Record<string, string> = r === guarded ? { 'x-relay-token': 'edge-token' } : {};
      const edge = await get(`${r.url}/readyz`, auth);
      const route = await get(`${r.url}/readyz`, { ...auth, 'content-length': '0' });
      expect(edge).toEqual(route);
      expect(JSON.parse(edge.text)).toMatchObject({ status: 'ready' });
      // HEAD: the GET's status and headers, no body
      const head = await headers(`${r.url}/readyz`, auth);
      expect(head).toEqual(await headers(`${r.url}/readyz`, { ...auth, 'content-length': '0' }));
      expect(head).toMatchObject({ status: 200, body: '', type: edge.type, length: String(Buffer.byteLength(edge.text)) });
      const scraped = await get(`${r.url}/metrics`, r === guarded ? { authorization: 'Bearer edge-token' } : {});
      const viaRoute = await get(`${r.url}/metrics`, { ...(r === guarded ? { authorization: 'Bearer edge-token' } : {}), 'content-length': '0' });
      expect(scraped.status).toBe(200);
      expect(scraped.type).toBe(viaRoute.type);
      const names = (text: string) => text.split('\n').filter((l) => l.startsWith('# TYPE')).sort();
      expect(names(scraped.text)).toEqual(names(viaRoute.text));
    }
    // The token, as fastify asks it: x-relay-token; on /metrics also Authorization: Bearer, not on /readyz.
    for (const [path, headers] of [
      ['/readyz', {}],
      ['/readyz', { authorization: 'Bearer edge-token' }],
      ['/metrics', { 'x-relay-token': 'wrong' }],
    ] as [string, Record<string, string>][]) {
      const edge = await get(`${guarded.url}${path}`, headers);
      expect(edge.status).toBe(401);
      expect(edge).toEqual(await get(`${guarded.url}${path}`, { ...headers, 'content-length': '0' }));
    }
  });

  it('counts its requests under the route’s name in /metrics', async () => {
    const text = await (await fetch(`${relay.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('llm_relay_requests_total{route="/api/reporting/v2/request",cache_status="none",status_code="201"}'));
    expect(Number(line?.split(' ')[1])).toBeGreaterThanOrEqual(2);
    const retrieved = text.split('\n').find((l) => l.startsWith('llm_relay_requests_total{route="/api/cache/v1/request/retrieve",cache_status="none",status_code="200"}'));
    expect(Number(retrieved?.split(' ')[1])).toBeGreaterThanOrEqual(4);
  });
});
