// The one cache service behind both the direct API and the proxy: key → namespace → store, with TTL,
// the entry size limit and a bounded wait on the store.
import { RELAY_ERR_CACHE_UNAVAILABLE, StoreUnavailableError } from '../errors.js';
import type { CacheRecord, CacheStore } from '../storage/cache-store.js';
import { cacheHash, storedKey } from './cache-key.js';
import { LRUCache } from 'lru-cache';
import { type StoredAnswer, decodeAnswer, encodeAnswer } from './cached-response.js';

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
  answer: StoredAnswer;
  createdAt: number;
  expiresAt: number;
}

interface Parsed {
  value: string;
  answer: StoredAnswer;
}

/** Parsed entries kept for repeat hits (bounded by the bytes of their stored text). */
const PARSED_MEMO_BYTES = 64 * 1024 * 1024;

export interface SaveResult {
  hash: string;
  /** false when the entry was over the size limit */
  stored: boolean;
  expiresAt: number;
}

export interface CacheService {
  hash(keyObject: unknown): string;
  lookup(namespace: string, hash: string): Promise<CacheHit | undefined>;
  save(namespace: string, hash: string, answer: StoredAnswer, ttlSec?: number): Promise<SaveResult>;
  readonly maxEntryBytes: number;
  readonly store: CacheStore;
}

export function createCacheService(opts: CacheServiceOptions): CacheService {
  const now = opts.now ?? Date.now;
  const { store, timeoutMs } = opts;
  // A hot entry's head is parsed once, not on every hit: the memo is keyed by the stored key and used only
  // while the store returns the very same text, so it can never serve anything the store would not.
  const parsedMemo = new LRUCache<string, Parsed>({
    maxSize: PARSED_MEMO_BYTES,
    sizeCalculation: (p) => Math.max(1, p.value.length * 2),
  });

  // Entries being written are visible to lookups at once (read-your-writes within one relay), whatever
  // the store's write latency: a second identical call right after the first one ended is a HIT.
  const writing = new Map<string, CacheRecord>();

  /**
   * A store call with store failures as the one 503 error; bounded in time unless the store works in process
   * (it answers before any timer could fire: no timer and promise race to arm for it on every call).
   */
  const guarded = <T>(op: Promise<T>): Promise<T> => (store.readsInProcess ? unavailableAs503(op) : bounded(op, timeoutMs));

  function parse(key: string, value: string): Parsed | undefined {
    const memo = parsedMemo.get(key);
    if (memo && memo.value === value) return memo;
    const answer = decodeAnswer(value);
    // An entry that no longer parses (written by a future version, or damaged) is a miss, not an error.
    if (!answer) return undefined;
    const parsed = { value, answer };
    parsedMemo.set(key, parsed);
    return parsed;
  }

  return {
    store,
    maxEntryBytes: opts.maxEntryBytes,
    hash: cacheHash,

    async lookup(namespace, hash) {
      const key = storedKey(namespace, hash);
      const pending = writing.get(key);
      const record =
        pending && pending.expiresAt > now()
          ? pending
          : await guarded(store.get(key));
      if (!record) return undefined;
      const parsed = parse(key, record.value);
      if (!parsed) return undefined;
      return { hash, answer: parsed.answer, createdAt: record.createdAt, expiresAt: record.expiresAt };
    },

    async save(namespace, hash, answer, ttlSec = opts.defaultTtlSec) {
      const createdAt = now();
      const expiresAt = createdAt + ttlSec * 1000;
      const value = encodeAnswer(answer);
      if (Buffer.byteLength(value) > opts.maxEntryBytes) return { hash, stored: false, expiresAt };
      const record = { key: storedKey(namespace, hash), value, createdAt, expiresAt };
      // A store that shows its pending sets at once needs no copy here. Not keeping one matters: a record in
      // this long-lived Map outlived its write in the Map's old tables and was moved to V8's old generation
      // with its whole text (docs/benchmarks.md).
      if (store.setsSeenAtOnce) {
        await guarded(store.set(record));
        return { hash, stored: true, expiresAt };
      }
      writing.set(record.key, record);
      try {
        await guarded(store.set(record));
      } finally {
        if (writing.get(record.key) === record) writing.delete(record.key);
      }
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
    return await unavailableAs503(Promise.race([op, timeout]));
  } finally {
    clearTimeout(timer);
  }
}

async function unavailableAs503<T>(op: Promise<T>): Promise<T> {
  try {
    return await op;
  } catch (err) {
    if (err instanceof StoreUnavailableError) throw new RELAY_ERR_CACHE_UNAVAILABLE(err.message, { cause: err });
    throw err;
  }
}
