// Someone opens the relay's address in a browser: the page load of / goes to the dashboard and the
// favicon is answered by the relay; neither is an upstream call or a report. An API client's GET / is
// still forwarded.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type TestRelay, get, startRelay } from '../helpers/relay.js';

/** What Chromium sends for a page load typed into the address bar. */
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8';

let up: FakeUpstream;
let relay: TestRelay;
let guarded: TestRelay;

beforeAll(async () => {
  up = await startFakeUpstream();
  relay = await startRelay({ upstreamUrl: up.url, reportsUrl: 'sqlite' });
  guarded = await startRelay({ upstreamUrl: up.url, apiTokens: ['secret-token'] });
});
afterAll(async () => {
  await relay.close();
  await guarded.close();
  await up.close();
});
beforeEach(() => up.reset());

async function storedReports(r: TestRelay) {
  await r.reports.flush();
  return (await get(`${r.url}/api/reporting/v2/requests`, { 'x-relay-token': 'secret-token' })).body;
}

describe('a browser at the relay root', () => {
  it('GET / with Accept text/html is a 302 to /dashboard/: no upstream call, no report', async () => {
    for (const url of [`${relay.url}/`, `${relay.url}/?from=bookmark`]) {
      const res = await fetch(url, { headers: { accept: BROWSER_ACCEPT }, redirect: 'manual' });
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('/dashboard/');
      expect(res.headers.get('x-relay-cache')).toBeNull();
      await res.arrayBuffer();
    }
    // Followed, as a browser does: the dashboard page.
    const page = await fetch(`${relay.url}/`, { headers: { accept: BROWSER_ACCEPT } });
    expect(page.status).toBe(200);
    expect(page.url).toBe(`${relay.url}/dashboard/`);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    await page.text();

    expect(up.calls).toEqual([]);
    expect(await storedReports(relay)).toEqual({ items: [], nextCursor: null });
  });

  it('/favicon.ico is answered by the relay (204, cached for a day), whatever the Accept', async () => {
    for (const accept of ['image/avif,image/webp,image/apng,image/*,*/*;q=0.8', '*/*']) {
      const res = await fetch(`${relay.url}/favicon.ico`, { headers: { accept } });
      expect(res.status).toBe(204);
      expect(res.headers.get('cache-control')).toBe('public, max-age=86400');
      expect(await res.text()).toBe('');
    }
    expect(up.calls).toEqual([]);
    expect(await storedReports(relay)).toEqual({ items: [], nextCursor: null });
  });

  it('needs no relay token (neither answer holds data, and a browser sends no header)', async () => {
    const root = await fetch(`${guarded.url}/`, { headers: { accept: BROWSER_ACCEPT }, redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/dashboard/');
    expect((await fetch(`${guarded.url}/favicon.ico`)).status).toBe(204);
    // An API client's GET / is the proxy's, and the proxy wants the token.
    const api = await fetch(`${guarded.url}/`);
    expect(api.status).toBe(401);
    // an API client's GET / is proxied: the relay's 401 comes in the provider's shape
    expect(await api.json()).toMatchObject({ statusCode: 401, code: 'RELAY_ERR_UNAUTHORIZED', error: { type: 'authentication_error', code: 'RELAY_ERR_UNAUTHORIZED' } });
    expect(up.calls).toEqual([]);
  });

  it('an API client\'s GET / (no text/html in Accept) is forwarded and reported like any path', async () => {
    const res = await fetch(`${relay.url}/`, { headers: { accept: '*/*' } });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { message: 'no route /' } });
    expect(up.calls.map((c) => [c.method, c.path])).toEqual([['GET', '/']]);
    const reports = await storedReports(relay);
    expect(reports.items).toHaveLength(1);
    expect(reports.items[0]).toMatchObject({ status: 404, proxy: { method: 'GET', path: '/', outcome: 'complete' } });
  });
});
