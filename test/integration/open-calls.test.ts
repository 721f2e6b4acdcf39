// The calls the relay counts as open (Exchange.openCalls): every upstream call from its start until its answer
// ends, with the cache on or off. The report service tells a burst of streams by this count (BURST_OPEN in
// report-service.ts): a relay with the cache off, which has no single flights, must count its calls too.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { chat } from '../helpers/proxy-call.js';
import { type TestRelay, startRelay } from '../helpers/relay.js';

let up: FakeUpstream;
const relays: TestRelay[] = [];

beforeAll(async () => {
  up = await startFakeUpstream();
});
afterEach(async () => {
  up.reset();
  for (const r of relays.splice(0)) await r.close();
});
afterAll(async () => {
  await up.close();
});

async function relayWith(cache: boolean, upstreamUrl = up.url): Promise<TestRelay> {
  const relay = await startRelay({ upstreamUrl, cache });
  relays.push(relay);
  return relay;
}

/** Waits (up to 5 s) until `what` holds. */
const until = (what: () => boolean): Promise<void> =>
  vi.waitFor(() => expect(what()).toBe(true), { timeout: 5000, interval: 5 });

describe('open calls', () => {
  for (const cache of [true, false]) {
    it(`counts each streamed call from its start until its answer ends (cache ${cache ? 'on' : 'off'})`, async () => {
      const relay = await relayWith(cache);
      up.eventGapMs = 60;
      expect(relay.exchange.openCalls).toBe(0);
      const calls = [1, 2, 3, 4, 5].map((i) => chat(relay.url, `stream ${i} of a burst`, { stream: true }));
      await until(() => up.calls.length === 5);
      expect(relay.exchange.openCalls).toBe(5);
      const answers = await Promise.all(calls);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
      expect(answers.map((a) => a.cache)).toEqual(Array(5).fill(cache ? 'MISS' : 'BYPASS'));
      await until(() => relay.exchange.openCalls === 0);
      // a hit goes nowhere upstream (with the cache off the same call is one more upstream call)
      const again = await chat(relay.url, 'stream 1 of a burst', { stream: true });
      expect(again.cache).toBe(cache ? 'HIT' : 'BYPASS');
      expect(up.calls).toHaveLength(cache ? 5 : 6);
      await until(() => relay.exchange.openCalls === 0);
    });
  }

  it('counts an answer identical calls share once (the cache on: one upstream call)', async () => {
    const relay = await relayWith(true);
    up.eventGapMs = 60;
    const calls = [chat(relay.url, 'the same question', { stream: true }), chat(relay.url, 'the same question', { stream: true })];
    await until(() => up.calls.length === 1);
    expect(relay.exchange.openCalls).toBe(1);
    const answers = await Promise.all(calls);
    expect(answers[1]!.text).toBe(answers[0]!.text);
    expect(up.calls).toHaveLength(1);
    await until(() => relay.exchange.openCalls === 0);
  });

  it('closes a call whose upstream cannot be reached, and one whose client left mid-stream', async () => {
    const unreachable = await relayWith(false, 'http://127.0.0.1:9');
    const failed = await chat(unreachable.url, 'nobody answers');
    expect(failed.status).toBe(502);
    expect(unreachable.exchange.openCalls).toBe(0);

    const relay = await relayWith(false);
    up.eventGapMs = 100;
    const controller = new AbortController();
    const res = await fetch(`${relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-leaves' },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'a long answer that nobody reads to its end' }] }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    expect(relay.exchange.openCalls).toBe(1);
    controller.abort();
    await until(() => relay.exchange.openCalls === 0);
    await until(() => up.closedEarly === 1);
  });
});
