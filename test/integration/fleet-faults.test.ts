// Single flight across relays when something fails (issue 15): the relay making the call is SIGKILLed (its
// lease runs out and one waiting caller takes over), and Redis is cut under load (each relay falls back to
// its own single flight; no answer fails). Real Redis, the built relay as a child process, a TCP proxy the
// test cuts.
import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type CutProxy, startCutProxy } from '../helpers/cut-proxy.js';
import { type FakeUpstream, chatCompletion, startFakeUpstream } from '../helpers/fake-upstream.js';
import { chat } from '../helpers/proxy-call.js';
import { type RelayProcess, spawnRelay } from '../helpers/relay-process.js';
import { type TestRelay, get, startRelay, tempDir } from '../helpers/relay.js';
import { REDIS_URL, requireRedis } from '../helpers/servers.js';

let up: FakeUpstream;
beforeAll(async () => {
  up = await startFakeUpstream();
});
afterAll(async () => up.close());
beforeEach(() => up.reset());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const space = () => ({ 'x-relay-cache-namespace': `fleet-${randomUUID()}` });
const callsFor = (prompt: string) => up.calls.filter((c) => c.body.includes(prompt)).length;

describe('the relay making the call is SIGKILLed', () => {
  const LEASE_MS = 1000;
  const UPSTREAM_MS = 1000;
  let child: RelayProcess | undefined;
  let childDir: string | undefined;
  let others: TestRelay[] = [];
  let setupError: unknown;

  // Two relays in this process; the third, the one killed, is the built relay as a child process (one per test).
  beforeAll(async () => {
    try {
      await requireRedis();
      others = await Promise.all([0, 1].map(() => startRelay({ upstreamUrl: up.url, cacheUrl: REDIS_URL })));
    } catch (err) {
      setupError = err;
    }
  });
  beforeEach(async () => {
    if (setupError) throw setupError;
    childDir = await tempDir();
    child = await spawnRelay({
      RELAY_CACHE_URL: REDIS_URL,
      RELAY_UPSTREAM_URL: up.url,
      RELAY_DATA_DIR: childDir,
      RELAY_FLEET_LEASE_MS: String(LEASE_MS),
      RELAY_LOG_FORMAT: 'json',
    });
  });
  afterEach(async () => {
    child?.child.kill('SIGKILL');
    await child?.exited;
    if (childDir) await rm(childDir, { recursive: true, force: true });
  });
  afterAll(async () => Promise.all(others.map((r) => r.close())));

  async function kill(): Promise<number> {
    child!.child.kill('SIGKILL');
    const at = performance.now();
    expect((await child!.exited).signal).toBe('SIGKILL');
    return at;
  }

  /** A streamed call read as it arrives: its answer head, and how its body ended (cut off or complete). */
  async function stream(base: string, prompt: string, headers: Record<string, string>) {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-default', ...headers },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: prompt }] }),
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let firstChunk!: () => void;
    const first = new Promise<void>((resolve) => (firstChunk = resolve));
    const ended = (async () => {
      try {
        for (;;) {
          const chunk = await reader.read();
          if (chunk.done) return { text, cut: false, at: performance.now() };
          text += decoder.decode(chunk.value, { stream: true });
          firstChunk();
        }
      } catch {
        return { text, cut: true, at: performance.now() };
      } finally {
        firstChunk();
      }
    })();
    return { res, first, ended };
  }

  it('JSON: no caller on the other relays hangs; each is answered within the lease plus one upstream call, by one call', async () => {
    const headers = space();
    const prompt = `fleet kill json ${randomUUID()}`;
    up.delayMs = UPSTREAM_MS;
    const doomed = chat(child!.url, prompt, { headers }).then(
      (r) => r,
      (err: Error) => err,
    );
    while (up.calls.length === 0) await sleep(5);
    // Ten callers on the two other relays, following the call the child makes.
    const callers = Array.from({ length: 10 }, async (_, i) => {
      const r = await chat(others[i % 2]!.url, prompt, { headers });
      return { r, at: performance.now() };
    });
    await sleep(200);
    const killedAt = await kill();
    const results = await Promise.all(callers);
    expect(await doomed).toBeInstanceOf(Error);
    for (const { r, at } of results) {
      expect(r.status).toBe(200);
      expect(JSON.parse(r.text)).toEqual(chatCompletion(`echo: ${prompt}`));
      // (the lease runs out at most LEASE_MS after the kill; then one upstream call, and a margin)
      expect(at - killedAt).toBeLessThan(LEASE_MS + UPSTREAM_MS + 500);
    }
    // The dead relay's call, and the one a waiting caller made for all when it took over.
    expect(up.calls).toHaveLength(2);
    expect(results.map(({ r }) => r.cache).sort()).toEqual([...Array(9).fill('COALESCED'), 'MISS']);
  });

  it('streamed, killed before the answer started: callers on the other relays get the whole answer of the one that took over', async () => {
    const headers = space();
    const prompt = `fleet kill before stream one two three ${randomUUID()}`;
    up.delayMs = UPSTREAM_MS;
    up.eventGapMs = 20;
    const doomed = stream(child!.url, prompt, headers).catch((err: Error) => err);
    while (up.calls.length === 0) await sleep(5);
    const callers = [0, 1, 0, 1].map((i) => stream(others[i]!.url, prompt, headers));
    await sleep(200);
    const killedAt = await kill();
    const results = await Promise.all(callers);
    const ends = await Promise.all(results.map((c) => c.ended));
    expect(await doomed).toBeInstanceOf(Error);
    const texts = new Set(ends.map((e) => e.text));
    expect(texts.size).toBe(1);
    expect([...texts][0]).toMatch(/^data: \{.*data: \[DONE\]\n\n$/s);
    for (const e of ends) {
      expect(e.cut).toBe(false);
      expect(e.at - killedAt).toBeLessThan(LEASE_MS + UPSTREAM_MS + 500);
    }
    expect(up.calls).toHaveLength(2);
    expect(results.map((c) => c.res.headers.get('x-relay-cache')).sort()).toEqual(['COALESCED', 'COALESCED', 'COALESCED', 'MISS']);
  });

  it('streamed, killed mid-answer: callers already reading it on the other relays are cut off within the lease, not left hanging', async () => {
    const headers = space();
    const prompt = `fleet kill mid stream one two three four five six seven ${randomUUID()}`;
    up.eventGapMs = 150;
    const leader = await stream(child!.url, prompt, headers);
    await leader.first;
    const readers = await Promise.all([0, 1].map((i) => stream(others[i]!.url, prompt, headers)));
    for (const r of readers) {
      expect(r.res.headers.get('x-relay-cache')).toBe('COALESCED');
      await r.first;
    }
    const killedAt = await kill();
    for (const [i, r] of readers.entries()) {
      const end = await r.ended;
      expect(end.cut).toBe(true);
      expect(end.text).toMatch(/^data: \{/);
      expect(end.text).not.toContain('[DONE]');
      expect(end.at - killedAt).toBeLessThan(LEASE_MS + 500);
      await others[i]!.reports.flush();
      const report = await get(`${others[i]!.url}/api/reporting/v2/requests/${r.res.headers.get('x-relay-report-id')}`);
      expect(report.body.proxy).toMatchObject({ cacheStatus: 'COALESCED', outcome: 'stream-error' });
    }
    // Nobody was waiting for a new answer: no second call. The next caller makes one, and it is stored.
    expect(up.calls).toHaveLength(1);
    up.eventGapMs = 0;
    const after = await chat(others[0]!.url, prompt, { headers, stream: true });
    expect(after.cache).toBe('MISS');
    expect(after.text).toMatch(/data: \[DONE\]\n\n$/);
    expect((await chat(others[1]!.url, prompt, { headers, stream: true })).cache).toBe('HIT');
  });
});

describe('Redis is cut under load', () => {
  let proxy: CutProxy;
  let relays: TestRelay[] = [];
  afterAll(async () => {
    await Promise.all(relays.map((r) => r.close()));
    await proxy?.close();
  });

  it('no answer fails, single flight holds on each relay meanwhile, and the fleet is one again once Redis is back', async () => {
    await requireRedis();
    const redis = new URL(REDIS_URL);
    proxy = await startCutProxy(redis.hostname, Number(redis.port || 6379));
    relays = await Promise.all([0, 1, 2].map(() => startRelay({ upstreamUrl: up.url, cacheUrl: proxy.url(REDIS_URL), storeTimeoutMs: 300 })));
    const headers = space();
    const spread = (prompt: string, n: number, opts: { stream?: boolean } = {}) =>
      Promise.all(Array.from({ length: n }, (_, i) => chat(relays[i % 3]!.url, prompt, { headers, ...opts })));

    // Through the proxy, the three are one.
    up.delayMs = 100;
    const before = `fleet cut before ${randomUUID()}`;
    await spread(before, 30);
    expect(callsFor(before)).toBe(1);

    // Load: waves of identical calls spread over the relays, each wave a new prompt.
    const statuses: number[] = [];
    let stop = false;
    let wave = 0;
    const load = (async () => {
      while (!stop) {
        const results = await spread(`fleet cut wave ${wave++} ${randomUUID()}`, 9);
        statuses.push(...results.map((r) => r.status));
      }
    })();
    await sleep(300);
    await proxy.cut();
    await sleep(500);

    // Redis is gone: each relay still makes one call for its identical callers (JSON and streams).
    const during = `fleet cut during ${randomUUID()}`;
    const json = await spread(during, 30);
    expect(callsFor(during)).toBe(3);
    expect(json.map((r) => r.status)).toEqual(Array(30).fill(200));
    for (const r of json) expect(JSON.parse(r.text)).toEqual(chatCompletion(`echo: ${during}`));
    expect(json.filter((r) => r.cache === 'MISS')).toHaveLength(3);
    const streamed = `fleet cut streamed ${randomUUID()}`;
    const streams = await spread(streamed, 15, { stream: true });
    expect(callsFor(streamed)).toBe(3);
    expect(new Set(streams.map((r) => r.text)).size).toBe(1);
    expect(streams.filter((r) => r.cache === 'MISS')).toHaveLength(3);

    await proxy.restore();
    // Back: each relay's connections reconnect by themselves (backoff up to 2 s), then fleet claims resume.
    for (const relay of relays) {
      const deadline = Date.now() + 10_000;
      while ((await get(`${relay.url}/readyz`)).status !== 200 && Date.now() < deadline) await sleep(100);
    }
    await sleep(2500);
    stop = true;
    await load;
    expect(wave).toBeGreaterThan(5);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);

    const after = `fleet cut after ${randomUUID()}`;
    await spread(after, 30);
    expect(callsFor(after)).toBe(1);
    const metrics = await Promise.all(relays.map(async (r) => (await fetch(`${r.url}/metrics`)).text()));
    expect(metrics.join('\n')).toMatch(/llm_relay_fleet_flights_total\{event="fallback"\} [1-9]/);
  });
});
