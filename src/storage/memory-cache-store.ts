// The in-process cache: keyv over a byte-bounded LRU. Nothing survives a restart; it exists for tests,
// demos and deployments that want no files at all. The LRU bounds memory; expiry is checked against each
// record's own expiresAt, so the store needs no timers.
import Keyv, { type KeyvStoreAdapter } from 'keyv';
import { LRUCache } from 'lru-cache';
import { StoreUnavailableError } from '../errors.js';
import type { CacheRecord, CacheStore, CacheStoreStats } from './cache-store.js';

export interface MemoryCacheStoreOptions {
  /** Budget for the bytes of key + value (UTF-8); least recently used entries are evicted beyond it. */
  maxBytes: number;
  now?: () => number;
}

/** What is kept per key; the key itself is the LRU's key. */
interface StoredEntry {
  value: string;
  createdAt: number;
  expiresAt: number;
}

/** What keyv hands its store when serialization is off: our entry plus keyv's own expiry stamp. */
interface Envelope {
  value: StoredEntry;
  expires?: number;
}

function unavailable(err: unknown): StoreUnavailableError {
  if (err instanceof StoreUnavailableError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new StoreUnavailableError('cache', `memory cache store: ${message}`, { cause: err });
}

function entrySize(key: string, value: string): number {
  return Buffer.byteLength(key, 'utf8') + Buffer.byteLength(value, 'utf8');
}

/**
 * keyv calls `store.set(key, value, ttl)` with a number as third argument, which LRUCache would read as
 * its options object; this adapter makes the mapping explicit. The ttl is not given to the LRU: its clock
 * is performance.now(), while expiry here follows the injected clock via StoredEntry.expiresAt.
 */
function lruAdapter(lru: LRUCache<string, Envelope>): KeyvStoreAdapter {
  return {
    opts: {},
    namespace: undefined,
    get: async <Value>(key: string) => lru.get(key) as Value | undefined,
    set: async (key: string, value: Envelope) => {
      lru.set(key, value);
    },
    delete: async (key: string) => lru.delete(key),
    clear: async () => {
      lru.clear();
    },
    on() {
      // The LRU never fails asynchronously, so there are no error events to forward.
      return this;
    },
  };
}

export function createMemoryCacheStore(opts: MemoryCacheStoreOptions): CacheStore {
  const { maxBytes } = opts;
  if (!(maxBytes > 0)) throw new RangeError(`maxBytes must be positive, got ${maxBytes}`);
  const now = opts.now ?? Date.now;

  const lru = new LRUCache<string, Envelope>({
    maxSize: maxBytes,
    // An entry larger than maxSize is refused by the LRU (and replaces, i.e. removes, the old one).
    sizeCalculation: (envelope, key) => Math.max(1, entrySize(key, envelope.value.value)),
  });
  // No serialization: values stay objects in this process, and keys stay unprefixed because the LRU
  // belongs to this store alone.
  const keyv = new Keyv<StoredEntry>(lruAdapter(lru), {
    serialize: undefined,
    deserialize: undefined,
    useKeyPrefix: false,
    throwOnErrors: true,
  });
  let closed = false;

  async function run<T>(fn: () => Promise<T> | T): Promise<T> {
    if (closed) throw new StoreUnavailableError('cache', 'memory cache store is closed');
    try {
      return await fn();
    } catch (err) {
      throw unavailable(err);
    }
  }

  return {
    kind: 'memory',
    readsInProcess: true,
    // keyv's set awaits before its LRU holds the record
    setsSeenAtOnce: false,

    get: (key) =>
      run(async () => {
        const entry = await keyv.get(key);
        if (entry === undefined) return undefined;
        if (entry.expiresAt <= now()) {
          // Only if it is still the same entry: a set may have replaced it while we awaited.
          if (lru.peek(key)?.value === entry) lru.delete(key);
          return undefined;
        }
        return { key, value: entry.value, createdAt: entry.createdAt, expiresAt: entry.expiresAt };
      }),

    set: (record) =>
      run(async () => {
        const ttl = record.expiresAt - now();
        if (ttl <= 0) {
          await keyv.delete(record.key);
          return;
        }
        const entry: StoredEntry = {
          value: record.value,
          createdAt: record.createdAt,
          expiresAt: record.expiresAt,
        };
        await keyv.set(record.key, entry, ttl);
      }),

    delete: (key) => run(() => keyv.delete(key)),

    async *entries(): AsyncIterable<CacheRecord> {
      if (closed) throw new StoreUnavailableError('cache', 'memory cache store is closed');
      // A snapshot of the keys, because the consumer may change the cache while we yield; peek() reads
      // without making the entry recently used, so an export does not reorder the LRU.
      for (const key of [...lru.keys()]) {
        const entry = lru.peek(key)?.value;
        if (entry === undefined || entry.expiresAt <= now()) continue;
        yield { key, value: entry.value, createdAt: entry.createdAt, expiresAt: entry.expiresAt };
      }
    },

    stats: () => run((): CacheStoreStats => ({ entries: lru.size, bytes: lru.calculatedSize })),

    ping: () => run(() => undefined),

    close: async () => {
      closed = true;
      lru.clear();
    },
  };
}
