// RELAY_API_TOKENS: every route but /healthz needs a token; a wrong or missing one is a 401 and never
// a cache hit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type TestRelay, startRelay } from '../helpers/relay.js';

let up: FakeUpstream;
let relay: TestRelay;
const TOKEN = 'relay-token-abc123';

beforeAll(async () => {
  up = await startFakeUpstream();
  relay = await startRelay({ upstreamUrl: up.url, apiTokens: [TOKEN, 'second-token'] });
});
afterAll(async () => {
  await relay.close();
  await up.close();
});

const MESSAGE =
  "Missing or invalid relay token: this relay has RELAY_API_TOKENS set, so send one of them as x-relay-token (or Authorization: Bearer on /api); this is the relay's token, not your provider API key";
const UNAUTHORIZED = { statusCode: 401, code: 'RELAY_ERR_UNAUTHORIZED', error: 'Unauthorized', message: MESSAGE };
/** On a proxied route the same error comes in the provider's shape, so an SDK shows the message. */
const UNAUTHORIZED_PROXY = {
  error: { message: MESSAGE, type: 'authentication_error', code: 'RELAY_ERR_UNAUTHORIZED', param: null },
  statusCode: 401,
  code: 'RELAY_ERR_UNAUTHORIZED',
  message: MESSAGE,
};
const chatBody = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'guarded' }] });

const routes: Array<[string, string, string | undefined]> = [
  ['POST', '/api/reporting/v2/request', JSON.stringify({ request: { timestamp: '2024-01-01T00:00:00Z' }, response: { timestamp: '2024-01-01T00:00:00Z' } })],
  ['POST', '/api/cache/v1/request/save', JSON.stringify({ request: { a: 1 }, response: { b: 2 } })],
  ['POST', '/api/cache/v1/request/retrieve', JSON.stringify({ request: { a: 1 } })],
  ['GET', '/api/reporting/v2/requests', undefined],
  ['GET', '/api/reporting/v2/requests/some-id', undefined],
  ['GET', '/api/cache/v1/export', undefined],
  ['GET', '/readyz', undefined],
  ['GET', '/metrics', undefined],
  ['GET', '/docs/json', undefined],
  ['POST', '/v1/chat/completions', chatBody],
];

async function call(method: string, path: string, body: string | undefined, headers: Record<string, string>) {
  const res = await fetch(`${relay.url}${path}`, { method, headers: { 'content-type': 'application/json', ...headers }, ...(body ? { body } : {}) });
  return { status: res.status, body: await res.json().catch(() => undefined), cache: res.headers.get('x-relay-cache') };
}

describe('access tokens', () => {
  it('/healthz is open', async () => {
    expect((await fetch(`${relay.url}/healthz`)).status).toBe(200);
  });

  it.each(routes)('%s %s: 401 without a token or with a wrong one', async (method, path, body) => {
    const attempts: Record<string, string>[] = [{}, { 'x-relay-token': 'wrong' }, { authorization: 'Bearer wrong' }, { 'x-relay-token': `${TOKEN}x` }];
    for (const headers of attempts) {
      const res = await call(method, path, body, headers);
      expect(res.status).toBe(401);
      expect(res.body).toEqual(path.startsWith('/v1/') ? UNAUTHORIZED_PROXY : UNAUTHORIZED);
    }
  });

  it.each(routes)('%s %s: passes with a valid token', async (method, path, body) => {
    const headers: Record<string, string> = path.startsWith('/api/') ? { authorization: `Bearer ${TOKEN}` } : { 'x-relay-token': 'second-token' };
    const res = await call(method, path, body, headers);
    expect(res.status).not.toBe(401);
  });

  it('never serves a cache hit to a caller without a valid token, and never forwards one', async () => {
    const ok = { 'x-relay-token': TOKEN, authorization: 'Bearer sk-upstream' };
    expect((await call('POST', '/v1/chat/completions', chatBody, ok)).cache).toBe('MISS');
    expect((await call('POST', '/v1/chat/completions', chatBody, ok)).cache).toBe('HIT');
    const calls = up.calls.length;
    const denied = await call('POST', '/v1/chat/completions', chatBody, { authorization: 'Bearer sk-upstream' });
    expect(denied.status).toBe(401);
    expect(denied.cache).toBeNull();
    expect(up.calls.length).toBe(calls);
    // On the proxy, Authorization belongs to the upstream: it is not a relay token.
    const bearer = await call('POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${TOKEN}` });
    expect(bearer.status).toBe(401);
  });

  it('the x-relay-token header is not forwarded upstream', async () => {
    await call('POST', '/v1/chat/completions', JSON.stringify({ model: 'm', messages: [] }), { 'x-relay-token': TOKEN });
    expect(up.calls.at(-1)!.headers['x-relay-token']).toBeUndefined();
  });
});
