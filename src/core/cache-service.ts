// The one cache service behind both the direct API and the proxy: key → namespace → store, with TTL,
// the entry size limit and a bounded wait on the store.
import { RELAY_ERR_CACHE_UNAVAILABLE, StoreUnavailableError } from '../errors.js';
import type { CacheStore } from '../storage/cache-store.js';
import { cacheHash, storedKey } from './cache-key.js';
import { type CachedResponse, parseCachedResponse } from './cached-response.js';

export interface CacheServiceOptions {
  store: CacheStore;
  defaultTtlSec: number;
  maxEntryBytes: number;
  /** a store call slower than this fails (the proxy treats that as a miss) */
  timeoutMs: number;
  now?: () => number;
}

export interface CacheHit {
  hash: string;
  response: CachedResponse;
  createdAt: number;
  expiresAt: number;
}

export interface SaveResult {
  hash: string;
  /** false when the entry was over the size limit */
  stored: boolean;
  expiresAt: number;
}

export interface CacheService {
  hash(keyObject: unknown): string;
  lookup(namespace: string, hash: string): Promise<CacheHit | undefined>;
  save(namespace: string, hash: string, response: CachedResponse, ttlSec?: number): Promise<SaveResult>;
  readonly maxEntryBytes: number;
  readonly store: CacheStore;
}

export function createCacheService(opts: CacheServiceOptions): CacheService {
  const now = opts.now ?? Date.now;
  const { store, timeoutMs } = opts;

  return {
    store,
    maxEntryBytes: opts.maxEntryBytes,
    hash: cacheHash,

    async lookup(namespace, hash) {
      const record = await bounded(store.get(storedKey(namespace, hash)), timeoutMs);
      if (!record) return undefined;
      const response = parseCachedResponse(record.value);
      // An entry that no longer parses (written by a future version, or damaged) is a miss, not an error.
      if (!response) return undefined;
      return { hash, response, createdAt: record.createdAt, expiresAt: record.expiresAt };
    },

    async save(namespace, hash, response, ttlSec = opts.defaultTtlSec) {
      const createdAt = now();
      const expiresAt = createdAt + ttlSec * 1000;
      const value = JSON.stringify(response);
      if (Buffer.byteLength(value) > opts.maxEntryBytes) return { hash, stored: false, expiresAt };
      await bounded(store.set({ key: storedKey(namespace, hash), value, createdAt, expiresAt }), timeoutMs);
      return { hash, stored: true, expiresAt };
    },
  };
}

/** Store failures and slow stores become one error the http layer answers with 503. */
async function bounded<T>(op: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new StoreUnavailableError('cache', `no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([op, timeout]);
  } catch (err) {
    if (err instanceof StoreUnavailableError) throw new RELAY_ERR_CACHE_UNAVAILABLE(err.message, { cause: err });
    throw err;
  } finally {
    clearTimeout(timer);
  }
}
