// Cache behaviour of the proxy (DESIGN §3–§4): directives, headers, what is never cached, namespaces,
// single flight, and the shared store with the direct API.
import { createHash } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { cacheHash } from '../../src/core/cache-key.js';
import { type FakeUpstream, chatCompletion, startFakeUpstream } from '../helpers/fake-upstream.js';
import { chat } from '../helpers/proxy-call.js';
import { type TestRelay, get, post, startRelay, tempDir } from '../helpers/relay.js';

let up: FakeUpstream;
let relay: TestRelay;
let shared: TestRelay;
let n = 0;
/** a fresh prompt per test, so tests never share entries */
const fresh = () => `prompt ${++n} ${Date.now()}`;

beforeAll(async () => {
  up = await startFakeUpstream();
  relay = await startRelay({ cacheUrl: 'sqlite', upstreamUrl: up.url });
  shared = await startRelay({ upstreamUrl: up.url, cacheScope: 'shared' });
});
afterAll(async () => {
  await relay.close();
  await shared.close();
  await up.close();
});
beforeEach(() => up.reset());

/** The stored report of a streamed call (after the relay has written what it holds). */
async function reportOf(call: { res: Response }) {
  await relay.reports.flush();
  return (await get(`${relay.url}/api/reporting/v2/requests/${call.res.headers.get('x-relay-report-id')}`)).body;
}

/** A streamed call read as it arrives: `next()` reads one chunk (false at the end), `rest()` reads to the end. */
async function openStream(base: string, content: string, signal?: AbortSignal) {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-default' },
    body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content }] }),
    ...(signal ? { signal } : {}),
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const next = async (): Promise<boolean> => {
    const r = await reader.read();
    if (r.done) return false;
    text += decoder.decode(r.value, { stream: true });
    return true;
  };
  return {
    res,
    next,
    async rest(): Promise<string> {
      while (await next());
      return text;
    },
    get text() {
      return text;
    },
  };
}

describe('request directives', () => {
  it('no-store: neither read nor written (BYPASS)', async () => {
    const p = fresh();
    await chat(relay.url, p); // stored
    const a = await chat(relay.url, p, { headers: { 'cache-control': 'no-store' } });
    expect(a.cache).toBe('BYPASS');
    expect(up.calls).toHaveLength(2);
    const q = fresh();
    expect((await chat(relay.url, q, { headers: { 'cache-control': 'no-store' } })).cache).toBe('BYPASS');
    expect((await chat(relay.url, q)).cache).toBe('MISS'); // nothing was written
  });

  it('no-cache: skips the lookup and stores the fresh answer (REFRESH)', async () => {
    const p = fresh();
    await chat(relay.url, p);
    up.failWith(200, { refreshed: true });
    const r = await chat(relay.url, p, { headers: { 'cache-control': 'no-cache' } });
    expect(r.cache).toBe('REFRESH');
    expect(JSON.parse(r.text)).toEqual({ refreshed: true });
    const after = await chat(relay.url, p);
    expect(after.cache).toBe('HIT');
    expect(JSON.parse(after.text)).toEqual({ refreshed: true });
    expect(up.calls).toHaveLength(2);
  });

  it('max-age=N accepts only entries at most N seconds old', async () => {
    const p = fresh();
    await chat(relay.url, p);
    expect((await chat(relay.url, p, { headers: { 'cache-control': 'max-age=60' } })).cache).toBe('HIT');
    await new Promise((r) => setTimeout(r, 1100));
    const stale = await chat(relay.url, p, { headers: { 'cache-control': 'max-age=0' } });
    expect(stale.cache).toBe('MISS');
    expect(up.calls).toHaveLength(2);
  });

  it('only-if-cached: a miss is a 504 and never reaches the upstream; a hit is served', async () => {
    const p = fresh();
    const miss = await chat(relay.url, p, { headers: { 'cache-control': 'only-if-cached' } });
    expect(miss.status).toBe(504);
    // The namespace the relay looked in is the caller's credential's (README: `cred-` + 32 hex of its sha256).
    const ns = `cred-${createHash('sha256').update('authorization:Bearer sk-default').digest('hex').slice(0, 32)}`;
    const message =
      `No cached answer in namespace "${ns}", and the request says only-if-cached. With RELAY_CACHE_SCOPE=credential, ` +
      'entries are kept per upstream credential, so a call with another API key looks in another namespace: record and ' +
      'replay with RELAY_CACHE_SCOPE=shared (or send the same x-relay-cache-namespace) to share entries across keys.';
    const body = {
      error: { message, type: 'timeout', code: 'RELAY_ERR_CACHE_ONLY_MISS', param: null },
      statusCode: 504,
      code: 'RELAY_ERR_CACHE_ONLY_MISS',
      message,
    };
    expect(JSON.parse(miss.text)).toEqual(body);
    expect(miss.cache).toBe('MISS');
    // It will miss again: SDKs, which retry a 504 by themselves, are told not to.
    expect(miss.headers.get('x-should-retry')).toBe('false');
    expect(miss.headers.get('x-relay-report-id')).toMatch(/^[0-9a-f-]{36}$/);
    await relay.reports.flush();
    const report = await get(`${relay.url}/api/reporting/v2/requests/${miss.headers.get('x-relay-report-id')}`);
    expect(report.body.response.body).toEqual(body);
    expect(up.calls).toHaveLength(0);
    await chat(relay.url, p);
    expect((await chat(relay.url, p, { headers: { 'cache-control': 'only-if-cached' } })).cache).toBe('HIT');
  });

  it('x-relay-cache-ttl sets the entry TTL', async () => {
    const p = fresh();
    await chat(relay.url, p, { headers: { 'x-relay-cache-ttl': '1' } });
    expect((await chat(relay.url, p)).cache).toBe('HIT');
    await new Promise((r) => setTimeout(r, 1100));
    expect((await chat(relay.url, p)).cache).toBe('MISS');
  });

  it('x-relay-cache: off bypasses one request', async () => {
    const p = fresh();
    await chat(relay.url, p);
    expect((await chat(relay.url, p, { headers: { 'x-relay-cache': 'off' } })).cache).toBe('BYPASS');
  });

  it('x-relay-* headers are not forwarded; hop-by-hop neither', async () => {
    await chat(relay.url, fresh(), { headers: { 'x-relay-cache-ttl': '5', 'x-relay-property-team': 'a', 'x-relay-user-id': 'u' } });
    const sent = up.calls[0]!.headers;
    expect(Object.keys(sent).filter((h) => h.startsWith('x-relay-'))).toEqual([]);
    expect(sent.authorization).toBe('Bearer sk-default');
  });
});

describe('what is never cached', () => {
  it('4xx and 5xx answers pass through unchanged, are reported, and are not stored', async () => {
    for (const status of [400, 429, 500, 503]) {
      const p = fresh();
      up.failWith(status, { error: { message: `upstream says ${status}` } });
      const a = await chat(relay.url, p);
      expect(a.status).toBe(status);
      expect(JSON.parse(a.text)).toEqual({ error: { message: `upstream says ${status}` } });
      expect(a.cache).toBe('MISS');
      up.reset();
      const b = await chat(relay.url, p);
      expect(b.status).toBe(200);
      expect(b.cache).toBe('MISS');
      await relay.reports.flush();
      const report = await get(`${relay.url}/api/reporting/v2/requests/${a.headers.get('x-relay-report-id')}`);
      expect(report.body).toMatchObject({ status, response: { body: { error: { message: `upstream says ${status}` } } }, proxy: { outcome: 'complete' } });
    }
  });

  it('a dropped stream is never stored', async () => {
    const p = fresh();
    up.dropAfterEvents = 2;
    const a = await chat(relay.url, p, { stream: true }).catch((e: Error) => e);
    // Either the client saw the cut, or got a truncated body; both are fine: what matters is the cache.
    expect(a).toBeDefined();
    up.reset();
    const b = await chat(relay.url, p, { stream: true });
    expect(b.cache).toBe('MISS');
    expect(up.calls).toHaveLength(1);
    expect((await chat(relay.url, p, { stream: true })).cache).toBe('HIT');
  });

  it('a stream that carries an error event is never stored', async () => {
    const p = fresh();
    up.errorEventAfter = 2;
    const a = await chat(relay.url, p, { stream: true });
    expect(a.cache).toBe('MISS');
    expect(a.text).toContain('event: error');
    up.reset();
    expect((await chat(relay.url, p, { stream: true })).cache).toBe('MISS');
    expect(up.calls).toHaveLength(1);
  });

  it('GET requests and non-JSON bodies are forwarded and BYPASS the cache', async () => {
    const g = await fetch(`${relay.url}/v1/models?limit=2`);
    expect(g.headers.get('x-relay-cache')).toBe('BYPASS');
    expect(g.status).toBe(404); // the fake upstream has no /v1/models
    expect(up.calls[0]).toMatchObject({ method: 'GET', path: '/v1/models?limit=2' });
    const t = await fetch(`${relay.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'not json' });
    expect(t.headers.get('x-relay-cache')).toBe('BYPASS');
    expect(up.calls[1]).toMatchObject({ method: 'POST', body: 'not json' });
  });

  it('forwards the client body bytes exactly', async () => {
    const raw = '{ "model" : "gpt-4o-mini",\n  "messages": [{"role":"user","content":"spaces  kept ✓"}] }';
    await fetch(`${relay.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: raw });
    expect(up.calls[0]!.body).toBe(raw);
  });
});

describe('namespaces', () => {
  it('two credentials do not share entries under the default scope', async () => {
    const p = fresh();
    expect((await chat(relay.url, p, { headers: { authorization: 'Bearer sk-alice' } })).cache).toBe('MISS');
    expect((await chat(relay.url, p, { headers: { authorization: 'Bearer sk-bob' } })).cache).toBe('MISS');
    expect((await chat(relay.url, p, { headers: { authorization: 'Bearer sk-alice' } })).cache).toBe('HIT');
    expect(up.calls).toHaveLength(2);
  });

  it('they do share under RELAY_CACHE_SCOPE=shared', async () => {
    const p = fresh();
    expect((await chat(shared.url, p, { headers: { authorization: 'Bearer sk-alice' } })).cache).toBe('MISS');
    expect((await chat(shared.url, p, { headers: { authorization: 'Bearer sk-bob' } })).cache).toBe('HIT');
    expect(up.calls).toHaveLength(1);
  });

  it('an explicit namespace is its own space', async () => {
    const p = fresh();
    await chat(relay.url, p, { headers: { 'x-relay-cache-namespace': 'team-a' } });
    expect((await chat(relay.url, p, { headers: { 'x-relay-cache-namespace': 'team-b' } })).cache).toBe('MISS');
    expect((await chat(relay.url, p, { headers: { 'x-relay-cache-namespace': 'team-a', authorization: 'Bearer other' } })).cache).toBe('HIT');
    const bad = await chat(relay.url, p, { headers: { 'x-relay-cache-namespace': 'bad name!' } });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text).code).toBe('RELAY_ERR_VALIDATION');
  });
});

describe('single flight', () => {
  it('10 concurrent identical requests make 1 upstream call', async () => {
    const p = fresh();
    up.delayMs = 150;
    const results = await Promise.all(Array.from({ length: 10 }, () => chat(relay.url, p)));
    expect(up.calls).toHaveLength(1);
    expect(results.map((r) => r.cache).sort()).toEqual(['COALESCED', ...Array(8).fill('COALESCED'), 'MISS'].sort());
    for (const r of results) expect(JSON.parse(r.text)).toEqual(chatCompletion(`echo: ${p}`));
    await relay.reports.flush();
    const ids = results.map((r) => r.headers.get('x-relay-report-id'));
    expect(new Set(ids).size).toBe(10);
  });

  it('concurrent identical streams make 1 upstream call and get the same events', async () => {
    const p = fresh();
    up.delayMs = 100;
    const results = await Promise.all(Array.from({ length: 5 }, () => chat(relay.url, p, { stream: true })));
    expect(up.calls).toHaveLength(1);
    expect(new Set(results.map((r) => r.text)).size).toBe(1);
    expect(results.filter((r) => r.cache === 'COALESCED')).toHaveLength(4);
  });

  it('a streamed call that arrives while an identical one streams joins it from its first event', async () => {
    const p = fresh();
    up.eventGapMs = 80;
    const leader = await openStream(relay.url, p);
    expect(leader.res.headers.get('x-relay-cache')).toBe('MISS');
    await leader.next(); // the answer is under way
    const joiner = await openStream(relay.url, p);
    expect(joiner.res.headers.get('x-relay-cache')).toBe('COALESCED');
    expect(joiner.res.headers.get('content-type')).toBe('text/event-stream');
    expect(joiner.res.headers.get('x-relay-cache-key')).toBe(leader.res.headers.get('x-relay-cache-key'));
    await joiner.next();
    // it got the events so far at once, before the answer was over
    expect(joiner.text).toMatch(/^data: \{/);
    expect(joiner.text).not.toContain('[DONE]');
    const [a, b] = await Promise.all([leader.rest(), joiner.rest()]);
    expect(a).toMatch(/data: \[DONE\]\n\n$/);
    expect(b).toBe(a);
    expect(up.calls).toHaveLength(1);
    expect(up.closedEarly).toBe(0);

    const again = await chat(relay.url, p, { stream: true });
    expect(again.cache).toBe('HIT');
    expect(again.text).toBe(a);
    expect(up.calls).toHaveLength(1);

    const first = await reportOf(leader);
    const joined = await reportOf(joiner);
    expect(first).toMatchObject({ cacheHit: false, proxy: { cacheStatus: 'MISS', outcome: 'complete' } });
    expect(joined).toMatchObject({
      cacheEnabled: true,
      cacheHit: true,
      originReportId: first.id,
      response: { status: 200, streamed: true, body: first.response.body },
      proxy: { cacheStatus: 'COALESCED', outcome: 'complete' },
    });
    expect(joined.response.body.choices[0].message.content).toBe(`echo: ${p}`);
  });

  it('the first caller leaving does not cut the answer for a call that joined it; the answer is stored', async () => {
    const p = fresh();
    up.eventGapMs = 80;
    const controller = new AbortController();
    const leader = await openStream(relay.url, p, controller.signal);
    await leader.next();
    const joiner = await openStream(relay.url, p);
    expect(joiner.res.headers.get('x-relay-cache')).toBe('COALESCED');
    await joiner.next();
    controller.abort();
    const text = await joiner.rest();
    expect(text).toMatch(/data: \[DONE\]\n\n$/);
    expect(up.closedEarly).toBe(0);
    const again = await chat(relay.url, p, { stream: true });
    expect(again.cache).toBe('HIT');
    expect(again.text).toBe(text);
    expect(up.calls).toHaveLength(1);

    const left = await reportOf(leader);
    const joined = await reportOf(joiner);
    expect(left.proxy).toMatchObject({ cacheStatus: 'MISS', outcome: 'client-abort' });
    expect(joined.proxy).toMatchObject({ cacheStatus: 'COALESCED', outcome: 'complete' });
  });

  it('when every caller of a shared answer has left, the upstream call is aborted and nothing is stored', async () => {
    const p = fresh();
    up.eventGapMs = 80;
    const c1 = new AbortController();
    const c2 = new AbortController();
    const leader = await openStream(relay.url, p, c1.signal);
    await leader.next();
    const joiner = await openStream(relay.url, p, c2.signal);
    await joiner.next();
    c2.abort();
    await new Promise((r) => setTimeout(r, 100));
    expect(up.closedEarly).toBe(0); // the first caller still reads
    c1.abort();
    const deadline = Date.now() + 2000;
    while (up.closedEarly === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(up.closedEarly).toBe(1);
    up.eventGapMs = 0;
    expect((await chat(relay.url, p, { stream: true })).cache).toBe('MISS');
    expect(up.calls).toHaveLength(2);
    const joined = await reportOf(joiner);
    expect(joined.proxy).toMatchObject({ cacheStatus: 'COALESCED', outcome: 'client-abort' });
  });

  it('a long stream (its copy kept as differences past 4 KB) reaches a call joining late, the cache and the report byte for byte', async () => {
    // 600 words: ~600 events of ~150 bytes, the relay's copy of them held as what each adds to the one before
    const p = `${fresh()} ${Array.from({ length: 600 }, (_, i) => `wörd${i % 37}`).join(' ')}`;
    up.eventGapMs = 1;
    const leader = await openStream(relay.url, p);
    while (leader.text.length < 20_000) expect(await leader.next()).toBe(true);
    const joiner = await openStream(relay.url, p);
    expect(joiner.res.headers.get('x-relay-cache')).toBe('COALESCED');
    const [a, b] = await Promise.all([leader.rest(), joiner.rest()]);
    expect(a.length).toBeGreaterThan(80_000);
    expect(a).toMatch(/data: \[DONE\]\n\n$/);
    expect(b).toBe(a);
    expect(up.calls).toHaveLength(1);

    const again = await chat(relay.url, p, { stream: true });
    expect(again.cache).toBe('HIT');
    expect(again.text).toBe(a);
    expect(up.calls).toHaveLength(1);

    const first = await reportOf(leader);
    expect(first.response.body.choices[0].message.content).toBe(`echo: ${p}`);
    const joined = await reportOf(joiner);
    expect(joined.response.body).toEqual(first.response.body);
  });

  it('an answer cut short upstream cuts every call that joined it, and is not stored', async () => {
    const p = fresh();
    up.eventGapMs = 60;
    up.dropAfterEvents = 3;
    const leader = await openStream(relay.url, p);
    await leader.next();
    const joiner = await openStream(relay.url, p);
    expect(joiner.res.headers.get('x-relay-cache')).toBe('COALESCED');
    await expect(leader.rest()).rejects.toThrow();
    await expect(joiner.rest()).rejects.toThrow();
    expect(joiner.text).not.toContain('[DONE]');
    up.dropAfterEvents = undefined;
    up.eventGapMs = 0;
    expect((await chat(relay.url, p, { stream: true })).cache).toBe('MISS');
    expect(up.calls).toHaveLength(2);
    const joined = await reportOf(joiner);
    expect(joined.proxy).toMatchObject({ cacheStatus: 'COALESCED', outcome: 'stream-error' });
  });
});

describe('one store, one key function for both paths', () => {
  it('an entry saved through the API with the proxy key object is served by the proxy', async () => {
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: fresh() }] };
    const keyObject = { method: 'POST', path: '/v1/chat/completions', body, vary: {} };
    const saved = await post(`${relay.url}/api/cache/v1/request/save`, { request: keyObject, response: { seeded: true } }, { 'x-relay-cache-namespace': 'seeded' });
    expect(saved.status).toBe(201);
    expect(saved.body.hash).toBe(cacheHash(keyObject));
    const res = await fetch(`${relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-relay-cache-namespace': 'seeded' },
      body: JSON.stringify(body),
    });
    expect(res.headers.get('x-relay-cache')).toBe('HIT');
    expect(res.headers.get('x-relay-cache-key')).toBe(saved.body.hash);
    expect(await res.json()).toEqual({ seeded: true });
    expect(up.calls).toHaveLength(0);
  });

  it('a proxy-cached entry is visible through retrieve', async () => {
    const content = fresh();
    await chat(shared.url, content);
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content }] };
    const hit = await post(`${shared.url}/api/cache/v1/request/retrieve`, { request: { method: 'POST', path: '/v1/chat/completions', body, vary: {} } });
    expect(hit).toMatchObject({ status: 200, body: { hit: true, data: chatCompletion(`echo: ${content}`) } });
  });
});

describe('offline mode', () => {
  it('answers hits and refuses misses with 504 without calling upstream', async () => {
    const dataDir = await tempDir();
    const p = fresh();
    // Recorded by one relay; then, once it has stopped (a data dir has one relay at a time), a relay on the
    // same data dir, offline, replays what it recorded.
    const recorder = await startRelay({ cacheUrl: 'sqlite', upstreamUrl: up.url, dataDir });
    try {
      await chat(recorder.url, p, { headers: { 'x-relay-cache-namespace': 'ci' } });
    } finally {
      await recorder.close();
    }
    const offline = await startRelay({ cacheUrl: 'sqlite', upstreamUrl: up.url, offline: true, dataDir });
    try {
      const hit = await chat(offline.url, p, { headers: { 'x-relay-cache-namespace': 'ci' } });
      expect(hit.cache).toBe('HIT');
      expect(JSON.parse(hit.text)).toEqual(chatCompletion(`echo: ${p}`));
      const miss = await chat(offline.url, fresh(), { headers: { 'x-relay-cache-namespace': 'ci' } });
      expect(miss.status).toBe(504);
      expect(JSON.parse(miss.text).message).toBe('No cached answer in namespace "ci" (x-relay-cache-namespace), and the relay is offline (RELAY_OFFLINE).');
      const get404 = await fetch(`${offline.url}/v1/models`);
      expect(get404.status).toBe(504);
      expect(get404.headers.get('x-relay-cache')).toBe('BYPASS');
      expect(((await get404.json()) as { message: string }).message).toBe(
        'No cached answer: this request is not looked up in the cache (only a POST with a JSON body is, while the cache is on for it), and the relay is offline (RELAY_OFFLINE).',
      );
    } finally {
      await offline.close();
      await rm(dataDir, { recursive: true, force: true });
    }
    expect(up.calls).toHaveLength(1);
  });
});
