// The Redis side of single flight across relays (storage/redis-flight.ts) on the real Redis: several
// "relays" (flights on their own connections) claim one key; what the leader says reaches the followers in
// order; an entry stored meanwhile is found; a lease that runs out is taken over by one follower; the
// leader hears at once when a relay starts or stops following. Keys are random per test.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { FleetClaim, FleetFlight, FleetLease, FollowEvents, LiveHead } from '../../src/storage/fleet-flight.js';
import { type RedisCacheStore, createRedisCacheStore } from '../../src/storage/redis-cache-store.js';
import { createRedisFlight } from '../../src/storage/redis-flight.js';
import { REDIS_URL, requireRedis } from '../helpers/servers.js';

const log = { warn() {}, info() {} };
const opened: Array<{ flight: FleetFlight; store: RedisCacheStore }> = [];

async function relay(leaseMs = 5000) {
  await requireRedis();
  const store = await createRedisCacheStore({ url: REDIS_URL });
  const flight = await createRedisFlight({ ...store.redis, leaseMs, timeoutMs: 1000, maxBytes: 1 << 20, log });
  opened.push({ flight, store });
  return { flight, store };
}

afterEach(async () => {
  for (const { flight, store } of opened.splice(0)) {
    await flight.close();
    await store.close();
  }
});

/** A follower's events, recorded; `next(kind)` resolves when that event has been heard. */
function recorder() {
  const heard: Array<[string, unknown?]> = [];
  const waiters: Array<{ kind: string; resolve: (v: unknown) => void }> = [];
  const note = (kind: string, value?: unknown) => {
    heard.push([kind, value]);
    for (const w of waiters.filter((x) => x.kind === kind)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(value);
    }
  };
  const events: FollowEvents = {
    head: (h: LiveHead) => note('head', h),
    chunk: (b: Buffer) => note('chunk', b.toString()),
    end: () => note('end'),
    fail: (why: string) => note('fail', why),
    done: (stored: boolean) => note('done', stored),
    takeover: (lease: FleetLease) => note('takeover', lease),
    lost: (err: unknown) => note('lost', err),
  };
  return {
    events,
    heard,
    next: (kind: string) =>
      new Promise<unknown>((resolve) => {
        const already = heard.find(([k]) => k === kind);
        if (already) resolve(already[1]);
        else waiters.push({ kind, resolve });
      }),
  };
}

const key = () => `flight-test:${randomUUID().replace(/-/g, '')}`;
const HEAD: LiveHead = { status: 200, headers: { 'content-type': 'text/event-stream' }, reportId: 'r-1' };

describe('redis flight', () => {
  it('one relay leads; the others follow and hear the streamed answer in order, then the outcome', async () => {
    const [a, b, c] = await Promise.all([relay(), relay(), relay()]);
    const k = key();
    const lead = await a.flight.claim(k, { entryCheck: true, events: recorder().events });
    expect(lead.role).toBe('lead');
    const lease = (lead as Extract<FleetClaim, { role: 'lead' }>).lease;
    const fb = recorder();
    const fc = recorder();
    expect((await b.flight.claim(k, { entryCheck: true, events: fb.events })).role).toBe('follow');
    lease.head(HEAD);
    lease.chunk(Buffer.from('data: 1\n\n'));
    expect((await c.flight.claim(k, { entryCheck: true, events: fc.events })).role).toBe('follow');
    for (let i = 2; i <= 50; i++) lease.chunk(Buffer.from(`data: ${i}\n\n`));
    lease.end();
    lease.finish(Promise.resolve(true));
    await Promise.all([fb.next('done'), fc.next('done')]);
    const expected = Array.from({ length: 50 }, (_, i) => `data: ${i + 1}\n\n`).join('');
    for (const f of [fb, fc]) {
      // (chunks that arrived together go as one entry)
      const kinds = f.heard.map(([kind]) => kind).filter((kind, i, all) => kind !== 'chunk' || all[i - 1] !== 'chunk');
      expect(kinds).toEqual(['head', 'chunk', 'end', 'done']);
      expect(f.heard[0]).toEqual(['head', HEAD]);
      expect(f.heard.filter(([kind]) => kind === 'chunk').map(([, b]) => b).join('')).toBe(expected);
      expect(f.heard.at(-1)).toEqual(['done', true]);
    }
    // The lease was given back: the next claim leads.
    expect((await b.flight.claim(k, { entryCheck: false, events: recorder().events })).role).toBe('lead');
  });

  it('a JSON flight: followers hear only the outcome', async () => {
    const [a, b] = await Promise.all([relay(), relay()]);
    const k = key();
    const lease = ((await a.flight.claim(k, { entryCheck: true, events: recorder().events })) as Extract<FleetClaim, { role: 'lead' }>).lease;
    const f = recorder();
    await b.flight.claim(k, { entryCheck: true, events: f.events });
    lease.finish(false);
    expect(await f.next('done')).toBe(false);
    expect(f.heard).toEqual([['done', false]]);
  });

  it('an entry stored meanwhile is found, unless the call asks for a fresh one', async () => {
    const { flight, store } = await relay();
    const k = key();
    await store.set({ key: k, value: '{"v":2,"status":200,"headers":{}}\n{}', createdAt: Date.now(), expiresAt: Date.now() + 60_000 });
    expect(await flight.claim(k, { entryCheck: true, events: recorder().events })).toEqual({ role: 'stored' });
    const fresh = await flight.claim(k, { entryCheck: false, events: recorder().events });
    expect(fresh.role).toBe('lead');
    (fresh as Extract<FleetClaim, { role: 'lead' }>).lease.finish(false);
    await store.delete(k);
  });

  it('a lease that runs out (its relay is gone) is taken over by one follower; the other follows the new leader', async () => {
    const dead = await relay(300);
    const [b, c] = await Promise.all([relay(), relay()]);
    const k = key();
    expect((await dead.flight.claim(k, { entryCheck: true, events: recorder().events })).role).toBe('lead');
    const fb = recorder();
    const fc = recorder();
    await b.flight.claim(k, { entryCheck: true, events: fb.events });
    await c.flight.claim(k, { entryCheck: true, events: fc.events });
    // The relay dies: no more renewals, nothing given back.
    await dead.flight.close();
    const taker = await Promise.race([fb.next('takeover'), fc.next('takeover')]);
    const [follower] = [fb, fc].filter((f) => !f.heard.some(([kind]) => kind === 'takeover'));
    // The taker makes the call and stores its answer. The other hears so on the taker's stream, or (when
    // its own check comes after the end) finds the entry.
    await b.store.set({ key: k, value: '{"v":2,"status":200,"headers":{}}\n{}', createdAt: Date.now(), expiresAt: Date.now() + 60_000 });
    (taker as FleetLease).finish(true);
    expect(await follower!.next('done')).toBe(true);
    expect(follower!.heard.map(([kind]) => kind)).toEqual(['done']);
    await b.store.delete(k);
  });

  it('the leader hears at once when a relay starts following its streamed answer, and when it stops', async () => {
    const [a, b] = await Promise.all([relay(), relay()]);
    const k = key();
    const lease = ((await a.flight.claim(k, { entryCheck: true, events: recorder().events })) as Extract<FleetClaim, { role: 'lead' }>).lease;
    const told: boolean[] = [];
    let tell!: () => void;
    let heard = new Promise<void>((r) => (tell = r));
    lease.onRemoteReaders((reading) => {
      told.push(reading);
      tell();
    });
    lease.head(HEAD);
    await heard; // (at the head: nobody follows yet)
    heard = new Promise<void>((r) => (tell = r));
    const claim = await b.flight.claim(k, { entryCheck: true, events: recorder().events });
    await heard;
    heard = new Promise<void>((r) => (tell = r));
    (claim as Extract<FleetClaim, { role: 'follow' }>).follow.reading(false);
    await heard;
    expect(told).toEqual([false, true, false]);
    lease.finish(false);
  });
});
