// The one contract every cache store passes (in the spirit of @keyv/test-suite), so that sqlite, memory and
// Redis behave the same from a laptop to a cluster. Time comes from an injected clock: every store checks
// expiresAt against `now()`, so expiry is tested without real waits, also for Redis (whose own PX ttl,
// in real time, is only the clean-up).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import type { CacheRecord, CacheStore } from '../../src/storage/cache-store.js';

export interface CacheStoreFactoryOptions {
  maxBytes: number;
  now: () => number;
}

export interface CacheStoreCapabilities {
  /** The store evicts least recently used entries beyond maxBytes and counts bytes as key + value UTF-8. */
  enforcesBudget: boolean;
}

/** A budget no test reaches, for the tests that are not about the budget. */
const ROOMY_BYTES = 64 * 1024 * 1024;
const MINUTE = 60_000;

interface TestClock {
  now: () => number;
  advance: (ms: number) => void;
}

/** Starts at the real time, so that the TTLs a store hands its backend (Redis PX) are sensible. */
function createTestClock(): TestClock {
  let time = Date.now();
  return {
    now: () => time,
    advance: (ms) => {
      time += ms;
    },
  };
}

function bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

function sortedByKey(records: CacheRecord[]): CacheRecord[] {
  return [...records].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** entries() order is unspecified, so compare sorted. */
async function collect(iterable: AsyncIterable<CacheRecord>): Promise<CacheRecord[]> {
  const out: CacheRecord[] = [];
  for await (const record of iterable) out.push(record);
  return sortedByKey(out);
}

export function cacheStoreSuite(
  name: string,
  make: (opts: CacheStoreFactoryOptions) => Promise<CacheStore>,
  capabilities: CacheStoreCapabilities,
): void {
  describe(`cache store contract: ${name}`, () => {
    let clock: TestClock;
    let opened: CacheStore[] = [];
    let seq = 0;

    async function open(maxBytes = ROOMY_BYTES): Promise<CacheStore> {
      const store = await make({ maxBytes, now: clock.now });
      opened.push(store);
      return store;
    }

    /** Keys look like real ones (`<namespace>:<hash>`) and carry ':' and non-ASCII on purpose. */
    function record(overrides: Partial<CacheRecord> = {}): CacheRecord {
      seq += 1;
      return {
        key: `openai:chat:${seq.toString(16).padStart(8, '0')}:ключ-🔑`,
        value: JSON.stringify({ id: `resp-${seq}`, content: `héllo ${seq} — 你好 🌍`, nested: { n: seq } }),
        createdAt: clock.now(),
        expiresAt: clock.now() + 10 * MINUTE,
        ...overrides,
      };
    }

    /** A record whose key + value take exactly `size` bytes. */
    function recordOfSize(label: string, size: number): CacheRecord {
      const key = `budget:${label}:ü`;
      return record({ key, value: JSON.stringify('x'.repeat(size - bytes(key) - 2)) });
    }

    beforeEach(() => {
      clock = createTestClock();
    });

    afterEach(async () => {
      const stores = opened;
      opened = [];
      await Promise.all(stores.map((store) => store.close()));
    });

    it('reports its kind', async () => {
      const store = await open();
      expect(['sqlite', 'memory', 'redis']).toContain(store.kind);
    });

    it('reads in process exactly when it has no server to wait for: such a get answers before any timer', async () => {
      const store = await open();
      // The cache service arms no timeout around the reads of such a store: it must never need one.
      expect(store.readsInProcess).toBe(store.kind !== 'redis');
      if (!store.readsInProcess) return;
      const stored = record();
      await store.set(stored);
      const order: string[] = [];
      const timer = setTimeout(() => order.push('timer'), 0);
      await Promise.all([store.get(stored.key).then(() => order.push('hit')), store.get('nothing:here').then(() => order.push('miss'))]);
      clearTimeout(timer);
      expect(order).toEqual(['hit', 'miss']);
    });

    it('shows a set to the next get before the set settles, exactly when it says so', async () => {
      const store = await open();
      // The cache service keeps no copy of the entries being written for such a store: it must never need one.
      expect(store.setsSeenAtOnce).toBe(store.kind === 'sqlite' || store.kind === 'redis');
      if (!store.setsSeenAtOnce) return;
      const stored = record();
      let settled = false;
      const writing = store.set(stored).then(() => (settled = true));
      expect(await store.get(stored.key)).toEqual(stored);
      expect(settled).toBe(false);
      await writing;
      expect(await store.get(stored.key)).toEqual(stored);
    });

    it('returns exactly the record it stored', async () => {
      const store = await open();
      const stored = record();
      await store.set(stored);
      expect(await store.get(stored.key)).toEqual(stored);
    });

    it('returns undefined for a key that was never set', async () => {
      const store = await open();
      expect(await store.get('openai:chat:missing:ключ')).toBeUndefined();
    });

    it('replaces an existing entry', async () => {
      const store = await open();
      const first = record();
      await store.set(first);
      clock.advance(1_000);
      const second = { ...record(), key: first.key };
      await store.set(second);
      expect(await store.get(first.key)).toEqual(second);
      expect((await store.stats()).entries).toBe(1);
    });

    it('delete reports whether there was an entry', async () => {
      const store = await open();
      const stored = record();
      await store.set(stored);
      expect(await store.delete(stored.key)).toBe(true);
      expect(await store.get(stored.key)).toBeUndefined();
      expect(await store.delete(stored.key)).toBe(false);
    });

    it('stops returning an entry at its expiresAt', async () => {
      const store = await open();
      const stored = record({ expiresAt: clock.now() + 1_000 });
      await store.set(stored);
      clock.advance(999);
      expect(await store.get(stored.key)).toEqual(stored);
      clock.advance(1);
      expect(await store.get(stored.key)).toBeUndefined();
    });

    it('does not store an already expired record, and it supersedes the previous entry', async () => {
      const store = await open();
      const live = record();
      await store.set(live);
      await store.set({ ...live, value: '"stale"', expiresAt: clock.now() });
      expect(await store.get(live.key)).toBeUndefined();
    });

    it('entries() yields exactly the live records', async () => {
      const store = await open();
      const live = [record(), record(), record()];
      const deleted = record();
      const expiring = record({ expiresAt: clock.now() + 500 });
      for (const r of [...live, deleted, expiring]) await store.set(r);
      await store.delete(deleted.key);
      clock.advance(500);
      expect(await collect(store.entries())).toEqual(sortedByKey(live));
    });

    it('entries() of an empty store yields nothing', async () => {
      const store = await open();
      expect(await collect(store.entries())).toEqual([]);
    });

    it('stats() counts entries and their bytes', async () => {
      const store = await open();
      expect(await store.stats()).toEqual({ entries: 0, bytes: 0 });
      const kept = [record(), record()];
      const removed = record();
      for (const r of [...kept, removed]) await store.set(r);
      await store.delete(removed.key);
      const stats = await store.stats();
      const expected = kept.reduce((sum, r) => sum + bytes(r.key) + bytes(r.value), 0);
      expect(stats.entries).toBe(2);
      // Redis counts its serialized form, which is larger; budget-enforcing stores count exactly.
      if (capabilities.enforcesBudget) expect(stats.bytes).toBe(expected);
      else expect(stats.bytes).toBeGreaterThanOrEqual(expected);
    });

    it('roundtrips a ~1 MB JSON value', async () => {
      const store = await open();
      const content = 'ü€ 𝄞 '.repeat(100_000);
      const big = record({ value: JSON.stringify({ choices: [{ message: { role: 'assistant', content } }] }) });
      expect(bytes(big.value)).toBeGreaterThan(1_000_000);
      await store.set(big);
      expect(await store.get(big.key)).toEqual(big);
    });

    it('roundtrips 200 parallel sets and gets', async () => {
      const store = await open();
      const records = Array.from({ length: 200 }, () => record());
      await Promise.all(records.map((r) => store.set(r)));
      const got = await Promise.all(records.map((r) => store.get(r.key)));
      expect(got).toEqual(records);
      expect((await store.stats()).entries).toBe(200);
    });

    it('ping resolves', async () => {
      const store = await open();
      await expect(store.ping()).resolves.toBeUndefined();
    });

    it('close resolves, may be repeated, and later calls reject with StoreUnavailableError', async () => {
      const store = await open();
      await store.set(record());
      await store.close();
      await store.close();
      const error = await store.get('openai:chat:after-close').catch((err: unknown) => err);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).store).toBe('cache');
    });

    // Stores with a byte budget (sqlite, memory); Redis sizes itself with its own maxmemory policy, so these
    // tests are not registered for it rather than reported as skipped.
    if (!capabilities.enforcesBudget) return;

    it('evicts the least recently used entries beyond maxBytes', async () => {
      const store = await open(1_000);
      const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((label) => recordOfSize(label, 300)) as [
        CacheRecord,
        CacheRecord,
        CacheRecord,
        CacheRecord,
      ];
      for (const r of [a, b, c]) {
        await store.set(r);
        clock.advance(1);
      }
      expect(await store.get(a.key)).toEqual(a); // a is now the most recently used; b the least
      clock.advance(1);
      await store.set(d);
      expect(await store.stats()).toEqual({ entries: 3, bytes: 900 });
      expect(await store.get(b.key)).toBeUndefined();
      for (const r of [a, c, d]) expect(await store.get(r.key)).toEqual(r);
    });

    it('does not store an entry larger than maxBytes', async () => {
      const store = await open(1_000);
      const small = recordOfSize('small', 300);
      await store.set(small);
      const huge = recordOfSize('huge', 1_001);
      await store.set(huge);
      expect(await store.get(huge.key)).toBeUndefined();
      expect(await store.get(small.key)).toEqual(small);
      expect(await store.stats()).toEqual({ entries: 1, bytes: 300 });
    });
  });
}
