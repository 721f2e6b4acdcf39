// Following another relay's flight: what a follower hears becomes this relay's local flight — a live answer
// its callers join, or the flight's result — and what happens when the flight breaks, its relay dies or
// Redis fails. No Redis here: the events are played by hand, in the order redis-flight.ts delivers them.
import type { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { StoredAnswer } from '../../../src/core/cached-response.js';
import { createRemoteFollow } from '../../../src/core/fleet-follow.js';
import type { LiveAnswer } from '../../../src/core/live-answer.js';
import { ClientGone } from '../../../src/core/proxy-types.js';
import { createSingleFlight } from '../../../src/core/single-flight.js';
import type { FleetLease } from '../../../src/storage/fleet-flight.js';

const HEAD = { status: 200, headers: { 'content-type': 'text/event-stream' }, reportId: 'leader-report' };
const EVENTS = ['data: {"n":1}\n\n', 'data: {"n":2}\n\n', 'data: [DONE]\n\n'];

function setup(stored?: StoredAnswer) {
  const inflight = createSingleFlight<StoredAnswer, LiveAnswer>();
  const leader = inflight.lead('ns:key');
  const flight = inflight.join('ns:key')!;
  let reads = 0;
  const presence: boolean[] = [];
  const follow = createRemoteFollow({
    leader,
    maxBytes: 1024,
    readStored: async () => {
      reads++;
      return stored;
    },
  });
  follow.attach({ reading: (on) => presence.push(on) });
  return {
    follow,
    flight,
    presence,
    get reads() {
      return reads;
    },
  };
}

async function readAll(out: Readable): Promise<string> {
  let text = '';
  for await (const chunk of out) text += chunk;
  return text;
}

function fakeLease() {
  const finished: Array<Promise<boolean> | boolean> = [];
  const lease: FleetLease = {
    head() {},
    chunk() {},
    end() {},
    fail() {},
    finish: (stored) => void finished.push(stored),
    onRemoteReaders() {},
  };
  return { lease, finished };
}

describe('following another relay’s flight', () => {
  it('a streamed answer becomes a live answer here: callers join it from its first event, and the result is what was heard', async () => {
    const s = setup();
    s.follow.events.head(HEAD);
    expect(await s.follow.outcome).toEqual({ via: 'shared' });
    const live = (await s.flight.started)!;
    expect(live).toMatchObject({ status: 200, headers: HEAD.headers, reportId: 'leader-report' });
    s.follow.events.chunk(Buffer.from(EVENTS[0]!));
    const ends: string[] = [];
    const out = live.join(new ClientGone(), (how) => ends.push(how))!;
    expect(s.presence).toEqual([true]);
    s.follow.events.chunk(Buffer.from(EVENTS[1]!));
    s.follow.events.chunk(Buffer.from(EVENTS[2]!));
    s.follow.events.end();
    expect(await readAll(out)).toBe(EVENTS.join(''));
    expect(ends).toEqual(['complete']);
    s.follow.events.done(true);
    expect(await s.flight.result).toEqual({ ...HEAD, payload: EVENTS.join(''), sse: true });
    expect(s.reads).toBe(0); // heard whole: nothing to read from the cache
  });

  it('a JSON answer: the stored entry is read once the flight says it is stored', async () => {
    const answer: StoredAnswer = { status: 200, headers: { 'content-type': 'application/json' }, payload: '{"ok":true}', sse: false, reportId: 'r' };
    const s = setup(answer);
    s.follow.events.done(true);
    expect(await s.follow.outcome).toEqual({ via: 'shared' });
    expect(await s.flight.started).toBeUndefined();
    expect(await s.flight.result).toBe(answer);
    expect(s.reads).toBe(1);
  });

  it('a flight that stored nothing (an error, or not cacheable) leaves its callers to go upstream themselves', async () => {
    const s = setup();
    s.follow.events.done(false);
    expect(await s.follow.outcome).toEqual({ via: 'shared' });
    expect(await s.flight.result).toBeUndefined();
    expect(s.reads).toBe(0);
  });

  it('the leader’s relay died before its answer started: this relay holds the lease now and makes the call', async () => {
    const s = setup();
    const { lease, finished } = fakeLease();
    s.follow.events.takeover(lease);
    expect(await s.follow.outcome).toEqual({ via: 'upstream', lease });
    // The local flight waits for this relay's own call (it settles it, as any leader does).
    let settled = false;
    void s.flight.result.then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    expect(finished).toEqual([]);
  });

  it('the leader’s relay died mid-answer: callers reading it are cut off, and the lease is given back', async () => {
    const s = setup();
    s.follow.events.head(HEAD);
    s.follow.events.chunk(Buffer.from(EVENTS[0]!));
    const live = (await s.flight.started)!;
    const ends: string[] = [];
    const out = live.join(new ClientGone(), (how) => ends.push(how))!;
    const { lease, finished } = fakeLease();
    s.follow.events.takeover(lease);
    await expect(readAll(out)).rejects.toThrow('cut short');
    expect(ends).toEqual(['stream-error']);
    expect(finished).toEqual([false]);
    expect(await s.flight.result).toBeUndefined();
  });

  it('Redis fails while waiting: this relay goes on alone; while reading: the answer is cut off', async () => {
    const waiting = setup();
    waiting.follow.events.lost(new Error('down'));
    expect(await waiting.follow.outcome).toEqual({ via: 'upstream' });

    const reading = setup();
    reading.follow.events.head(HEAD);
    const out = (await reading.flight.started)!.join(new ClientGone(), () => {})!;
    reading.follow.events.lost(new Error('down'));
    await expect(readAll(out)).rejects.toThrow();
    expect(await reading.flight.result).toBeUndefined();
  });

  it('parts not heard (trimmed before they were read) are made up from the stored answer when it continues what was heard', async () => {
    const whole: StoredAnswer = { ...HEAD, payload: EVENTS.join(''), sse: true };
    const s = setup(whole);
    s.follow.events.head(HEAD);
    s.follow.events.chunk(Buffer.from(EVENTS[0]!));
    const out = (await s.flight.started)!.join(new ClientGone(), () => {})!;
    // (the rest was trimmed: the next thing heard is the outcome)
    s.follow.events.done(true);
    expect(await readAll(out)).toBe(EVENTS.join(''));
    expect(await s.flight.result).toBe(whole);

    const other = setup({ ...HEAD, payload: 'data: {"n":9}\n\n', sse: true });
    other.follow.events.head(HEAD);
    other.follow.events.chunk(Buffer.from(EVENTS[0]!));
    const cut = (await other.flight.started)!.join(new ClientGone(), () => {})!;
    other.follow.events.done(true);
    await expect(readAll(cut)).rejects.toThrow();
    expect(await other.flight.result).toBeUndefined();
  });

  it('tells the leader when nobody on this relay reads any more', async () => {
    const s = setup();
    s.follow.events.head(HEAD);
    const live = (await s.flight.started)!;
    const a = new ClientGone();
    const b = new ClientGone();
    live.join(a, () => {})!.resume();
    live.join(b, () => {})!.resume();
    a.abort();
    expect(s.presence).toEqual([true]);
    b.abort();
    expect(s.presence).toEqual([true, false]);
  });
});
