// Single flight across relays (issue 15): three relays on the machine's Redis act as one. Identical calls
// spread over them reach the upstream once, JSON and streams; a caller on another relay gets its first
// event about when the first caller does; every caller gets its own report. Each test uses a namespace of
// its own (x-relay-cache-namespace), so runs in parallel never share a key.
import { randomUUID } from 'node:crypto';
import { createClient } from '@keyv/redis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type FakeUpstream, chatCompletion, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type ProxyResult, chat } from '../helpers/proxy-call.js';
import { type TestRelay, get, startRelay } from '../helpers/relay.js';
import { REDIS_URL, requireRedis } from '../helpers/servers.js';

let up: FakeUpstream;
let relays: TestRelay[] = [];
let setupError: unknown;

// A failing beforeAll would mark the tests skipped; each test fails with the reason instead.
beforeAll(async () => {
  up = await startFakeUpstream();
  try {
    await requireRedis();
    relays = await Promise.all([0, 1, 2].map(() => startRelay({ upstreamUrl: up.url, cacheUrl: REDIS_URL })));
  } catch (err) {
    setupError = err;
  }
});
afterAll(async () => {
  await Promise.all(relays.map((r) => r.close()));
  await up.close();
});
beforeEach(() => {
  if (setupError) throw setupError;
  up.reset();
});

const space = () => ({ 'x-relay-cache-namespace': `fleet-${randomUUID()}` });

/** The stored report of an answer, read from the relay that answered it. */
async function reportOf(relay: TestRelay, res: { headers: Headers }) {
  await relay.reports.flush();
  const r = await get(`${relay.url}/api/reporting/v2/requests/${res.headers.get('x-relay-report-id')}`);
  expect(r.status).toBe(200);
  return r.body;
}

/** Every answer's report: the leader's says MISS, every other one COALESCED with the leader's as its origin. */
async function expectOwnReports(results: Array<{ relay: TestRelay; r: ProxyResult }>, streamed: boolean) {
  const leaders = results.filter(({ r }) => r.cache === 'MISS');
  expect(leaders).toHaveLength(1);
  const origin = await reportOf(leaders[0]!.relay, leaders[0]!.r);
  expect(origin).toMatchObject({ cacheHit: false, proxy: { cacheStatus: 'MISS', outcome: 'complete' } });
  const ids = new Set(results.map(({ r }) => r.headers.get('x-relay-report-id')));
  expect(ids.size).toBe(results.length);
  for (const { relay, r } of results) {
    if (r.cache === 'MISS') continue;
    expect(await reportOf(relay, r)).toMatchObject({
      cacheEnabled: true,
      cacheHit: true,
      originReportId: origin.id,
      response: { status: 200, streamed, body: origin.response.body },
      proxy: { cacheStatus: 'COALESCED', outcome: 'complete' },
    });
  }
}

/** A streamed call read as it arrives, with the time its first bytes came. */
async function openStream(base: string, content: string, headers: Record<string, string>) {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-fleet', ...headers },
    body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content }] }),
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let firstAt: number | undefined;
  const first = (async () => {
    const r = await reader.read();
    firstAt = performance.now();
    if (!r.done) text += decoder.decode(r.value, { stream: true });
    return firstAt;
  })();
  return {
    res,
    first,
    get firstAt() {
      return firstAt;
    },
    get text() {
      return text;
    },
    async rest(): Promise<string> {
      await first;
      for (;;) {
        const r = await reader.read();
        if (r.done) return text;
        text += decoder.decode(r.value, { stream: true });
      }
    },
  };
}

describe('single flight across three relays on one Redis', () => {
  it('30 concurrent identical JSON calls spread over the relays reach the upstream once; each caller has its own report', async () => {
    const headers = space();
    const prompt = `fleet json ${randomUUID()}`;
    up.delayMs = 300;
    const results = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const relay = relays[i % 3]!;
        return { relay, r: await chat(relay.url, prompt, { headers }) };
      }),
    );
    expect(up.calls).toHaveLength(1);
    for (const { r } of results) {
      expect(r.status).toBe(200);
      expect(JSON.parse(r.text)).toEqual(chatCompletion(`echo: ${prompt}`));
    }
    expect(results.map(({ r }) => r.cache).sort()).toEqual([...Array(29).fill('COALESCED'), 'MISS']);
    // One key: every answer names the same one.
    expect(new Set(results.map(({ r }) => r.headers.get('x-relay-cache-key'))).size).toBe(1);
    await expectOwnReports(results, false);
    // And it was stored once for all: a later call on any relay is a hit.
    for (const relay of relays) expect((await chat(relay.url, prompt, { headers })).cache).toBe('HIT');
    expect(up.calls).toHaveLength(1);
  });

  it('30 concurrent identical streamed calls spread over the relays reach the upstream once, and every caller gets identical events', async () => {
    const headers = space();
    const prompt = `fleet stream one two three four five ${randomUUID()}`;
    up.delayMs = 300;
    up.eventGapMs = 20;
    const results = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const relay = relays[i % 3]!;
        return { relay, r: await chat(relay.url, prompt, { headers, stream: true }) };
      }),
    );
    expect(up.calls).toHaveLength(1);
    const texts = new Set(results.map(({ r }) => r.text));
    expect(texts.size).toBe(1);
    const [text] = texts;
    expect(text).toMatch(/^data: \{.*\n\n(data: \{.*\n\n)+data: \[DONE\]\n\n$/s);
    for (const { r } of results) {
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('text/event-stream');
    }
    expect(results.map(({ r }) => r.cache).sort()).toEqual([...Array(29).fill('COALESCED'), 'MISS']);
    await expectOwnReports(results, true);
    const [report] = await Promise.all([reportOf(results[0]!.relay, results[0]!.r)]);
    expect(report.response.body.choices[0].message.content).toBe(`echo: ${prompt}`);
    for (const relay of relays) expect((await chat(relay.url, prompt, { headers, stream: true })).text).toBe(text);
    expect(up.calls).toHaveLength(1);
  });

  it('with an upstream that answers in 500 ms, a caller on another relay gets its first event within 50 ms of the first caller', async () => {
    const headers = space();
    const prompt = `fleet first event alpha beta gamma delta ${randomUUID()}`;
    up.delayMs = 500;
    up.eventGapMs = 50;
    const first = await openStream(relays[0]!.url, prompt, headers);
    expect(first.res.headers.get('x-relay-cache')).toBe('MISS'); // (headers come with the first event)
    // meanwhile on another relay (it arrived while the call was on its way)
    const second = openStream(relays[1]!.url, prompt, headers);
    const other = await second;
    await Promise.all([first.first, other.first]);
    expect(other.res.headers.get('x-relay-cache')).toBe('COALESCED');
    expect(Math.abs(other.firstAt! - first.firstAt!)).toBeLessThanOrEqual(50);
    // A third caller arrives mid-stream on the last relay: it gets the events so far at once, then the rest.
    const late = await openStream(relays[2]!.url, prompt, headers);
    await late.first;
    expect(late.res.headers.get('x-relay-cache')).toBe('COALESCED');
    expect(late.text).toMatch(/^data: \{/);
    const [a, b, c] = await Promise.all([first.rest(), other.rest(), late.rest()]);
    expect(a).toMatch(/data: \[DONE\]\n\n$/);
    expect(b).toBe(a);
    expect(c).toBe(a);
    expect(up.calls).toHaveLength(1);
    expect(up.closedEarly).toBe(0);
  });

  it('the first caller leaving does not cut a caller on another relay off: the call goes on for it, and is stored', async () => {
    const headers = space();
    const prompt = `fleet leave one two three four five six ${randomUUID()}`;
    up.eventGapMs = 80;
    const controller = new AbortController();
    const res = await fetch(`${relays[0]!.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-fleet', ...headers },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: prompt }] }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    const follower = await openStream(relays[1]!.url, prompt, headers);
    await follower.first;
    expect(follower.res.headers.get('x-relay-cache')).toBe('COALESCED');
    controller.abort();
    const text = await follower.rest();
    expect(text).toMatch(/data: \[DONE\]\n\n$/);
    expect(up.closedEarly).toBe(0);
    expect(up.calls).toHaveLength(1);
    const again = await chat(relays[2]!.url, prompt, { headers, stream: true });
    expect(again.cache).toBe('HIT');
    expect(again.text).toBe(text);
    expect(await reportOf(relays[0]!, res)).toMatchObject({ proxy: { cacheStatus: 'MISS', outcome: 'client-abort' } });
    expect(await reportOf(relays[1]!, follower.res)).toMatchObject({ proxy: { cacheStatus: 'COALESCED', outcome: 'complete' } });
  });

  it("a streamed answer no other relay follows puts only its head into Redis; its first follower gets the answer so far, then the rest", async () => {
    const headers = space();
    const prompt = `fleet unfollowed one two three four five six seven eight ${randomUUID()}`;
    up.eventGapMs = 60;
    const lone = await openStream(relays[0]!.url, prompt, headers);
    await lone.first;
    await new Promise((r) => setTimeout(r, 250)); // a few events more, read by its caller alone
    const redis = createClient({ url: REDIS_URL });
    await redis.connect();
    try {
      const kinds = async (): Promise<string[]> => {
        const [stream, ...others] = await redis.keys(`llm-relay:flight-stream:${headers['x-relay-cache-namespace']}:*`);
        expect(stream).toBeDefined();
        expect(others).toEqual([]);
        return (await redis.xRange(stream!, '-', '+')).map((e) => String(e.message.t));
      };
      expect(await kinds()).toEqual(['h']);
      const follower = await openStream(relays[1]!.url, prompt, headers);
      const [a, b] = await Promise.all([lone.rest(), follower.rest()]);
      expect(follower.res.headers.get('x-relay-cache')).toBe('COALESCED');
      expect(a).toMatch(/data: \[DONE\]\n\n$/);
      expect(b).toBe(a);
      expect(up.calls).toHaveLength(1);
      // the answer so far as one entry, the rest as it came, its end
      const after = await kinds();
      expect(after.slice(0, 2)).toEqual(['h', 'c']);
      expect(after).toContain('e');
    } finally {
      await redis.close();
    }
  });

  it('when every caller on every relay has left, the upstream call is aborted and nothing is stored', async () => {
    const headers = space();
    const prompt = `fleet all leave one two three four five six ${randomUUID()}`;
    up.eventGapMs = 100;
    const controllers = [new AbortController(), new AbortController()];
    const open = async (relay: TestRelay, signal: AbortSignal) => {
      const res = await fetch(`${relay.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-fleet', ...headers },
        body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: prompt }] }),
        signal,
      });
      await res.body!.getReader().read();
      return res;
    };
    await open(relays[0]!, controllers[0]!.signal);
    await open(relays[1]!, controllers[1]!.signal);
    for (const c of controllers) c.abort();
    // The leader lets go of the call at its next lease renewal at the latest (a third of the lease).
    const deadline = Date.now() + relays[0]!.config.fleetLeaseMs;
    while (up.closedEarly === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(up.closedEarly).toBe(1);
    up.eventGapMs = 0;
    expect((await chat(relays[2]!.url, prompt, { headers, stream: true })).cache).toBe('MISS');
    expect(up.calls).toHaveLength(2);
  });

  it('an upstream error is passed to its caller; callers on the other relays then go upstream themselves', async () => {
    const headers = space();
    const prompt = `fleet error ${randomUUID()}`;
    up.delayMs = 200;
    up.failWith(500, { error: { message: 'upstream broke' } });
    const results = await Promise.all(relays.map((relay) => chat(relay.url, prompt, { headers })));
    // Nothing to share: as on one relay, every waiting call goes upstream itself.
    expect(results.map((r) => r.status)).toEqual([500, 500, 500]);
    expect(results.map((r) => r.cache)).toEqual(['MISS', 'MISS', 'MISS']);
    expect(up.calls).toHaveLength(3);
  });

  it('max-age skips an entry stored meanwhile only when it is too old; only-if-cached and no-cache stay out of the fleet', async () => {
    const headers = space();
    const prompt = `fleet directives ${randomUUID()}`;
    await chat(relays[0]!.url, prompt, { headers });
    const fresh = await chat(relays[1]!.url, prompt, { headers: { ...headers, 'cache-control': 'max-age=60' } });
    expect(fresh.cache).toBe('HIT');
    const refresh = await Promise.all(relays.map((relay) => chat(relay.url, prompt, { headers: { ...headers, 'cache-control': 'no-cache' } })));
    expect(refresh.map((r) => r.cache)).toEqual(['REFRESH', 'REFRESH', 'REFRESH']);
    expect(up.calls).toHaveLength(4);
  });

  it('counts what became of each miss in /metrics', async () => {
    const headers = space();
    up.delayMs = 100;
    await Promise.all(relays.map((relay) => chat(relay.url, `fleet metrics ${randomUUID()}`, { headers })));
    const text = await (await fetch(`${relays[0]!.url}/metrics`)).text();
    expect(text).toMatch(/llm_relay_fleet_flights_total\{event="lead"\} [1-9]/);
  });
});

describe('RELAY_FLEET_LEASE_MS=0', () => {
  it('keeps single flight to each relay', async () => {
    const alone = await Promise.all([0, 1].map(() => startRelay({ upstreamUrl: up.url, cacheUrl: REDIS_URL, fleetLeaseMs: 0 })));
    try {
      const headers = space();
      up.delayMs = 200;
      const prompt = `fleet off ${randomUUID()}`;
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => chat(alone[i % 2]!.url, prompt, { headers })));
      expect(up.calls).toHaveLength(2);
      expect(results.map((r) => r.cache).sort()).toEqual(['COALESCED', 'COALESCED', 'COALESCED', 'COALESCED', 'MISS', 'MISS']);
    } finally {
      await Promise.all(alone.map((r) => r.close()));
    }
  });
});
