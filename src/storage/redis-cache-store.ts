// The team cache: Redis (or Valkey) through keyv + @keyv/redis, shared by every relay instance. Redis
// expires entries by itself (PX ttl) and bounds memory with its own maxmemory policy, so this adapter
// enforces no byte budget. A down Redis must never crash the process or hang a request: errors are
// listened for, offline commands are rejected instead of queued, and every call has a deadline.
import Keyv from 'keyv';
import KeyvRedis, { createClient } from '@keyv/redis';
import { StoreUnavailableError } from '../errors.js';
import type { CacheRecord, CacheStore, CacheStoreStats } from './cache-store.js';
import { scratchUtf8 } from '../scratch-buffer.js';
import { DEFLATE_FROM, deflateRaw, inflateRaw } from './raw-deflate.js';

export interface RedisCacheStoreOptions {
  /** redis://[user:password@]host:port[/db] or rediss://… */
  url: string;
  /** Prefix of every key this store writes (`<namespace>::<key>`), so several relays can share a Redis. */
  namespace?: string;
  /** How long the factory waits for Redis to answer before failing. */
  connectTimeoutMs?: number;
  /** Deadline of each operation (each SCAN page for entries()/stats()); a hung Redis fails at this point. */
  commandTimeoutMs?: number;
  /** Upper bound of the reconnect backoff after Redis went away; the client retries forever. */
  maxReconnectDelayMs?: number;
  /** COUNT hint per SCAN page in entries() and stats(). */
  scanCount?: number;
  now?: () => number;
}

const DEFAULT_NAMESPACE = 'llm-relay';
const DEFAULT_CONNECT_TIMEOUT_MS = 2_000;
const DEFAULT_COMMAND_TIMEOUT_MS = 2_000;
const DEFAULT_MAX_RECONNECT_DELAY_MS = 2_000;
const DEFAULT_SCAN_COUNT = 100;
/** First reconnect delay; it doubles per attempt up to maxReconnectDelayMs. */
const FIRST_RECONNECT_DELAY_MS = 50;

/** The few calls the fleet flight makes on a node-redis client. */
export interface RedisCommandClient {
  sendCommand(args: ReadonlyArray<string | Buffer>, options?: { typeMapping?: Record<number, unknown> }): Promise<unknown>;
  /** a new client with the same options (a connection of its own) */
  duplicate(): RedisCommandClient;
  connect(): Promise<unknown>;
  destroy(): void;
  on(event: 'error', listener: (err: unknown) => void): unknown;
  readonly isReady: boolean;
}

/** What the fleet flight (redis-flight.ts) shares with this store: its connection, and where its keys live. */
export interface RedisConnection {
  /** the store's connection; the flight's commands go on it, and its reader is a duplicate */
  client: RedisCommandClient;
  /** the prefix of this store's Redis keys (`llm-relay:`); its entries are under `<prefix>:` */
  keyPrefix: string;
  /** the Redis key of the entry stored under `<namespace>:<hash>` */
  entryKey(key: string): string;
}

export interface RedisCacheStore extends CacheStore {
  readonly redis: RedisConnection;
}

/**
 * What is kept per key, serialized by keyv inside its `{ value, expires }` envelope: the value's text, or (a
 * value of DEFLATE_FROM characters or more, when it comes out smaller) its UTF-8 deflated and in base64.
 */
interface StoredEntry {
  value?: string;
  /** the value's UTF-8, raw DEFLATE (raw-deflate.ts), base64 */
  z?: string;
  createdAt: number;
  expiresAt: number;
}

/**
 * The entry of a record: deflated from DEFLATE_FROM characters up (raw-deflate.ts). An answer's text inside
 * keyv's JSON envelope was escaped once more (every quote and newline of an SSE stream: ~1.15 times its
 * length) and crossed the connection whole: a thousand streams ending together left ~145 KB of promoted
 * garbage each on the event loop (the value, its escaped envelope, the command's RESP text, all held until
 * Redis answered). Deflated, a 60-event stream's entry is 0.6 KB instead of 16.5 (Redis' memory, the bytes
 * on the wire), reading and writing it take about half the time, and the garbage is ~88 KB a stream
 * (docs/internals.md, "The Redis cache's entries").
 */
function packEntry(record: CacheRecord): StoredEntry {
  const times = { createdAt: record.createdAt, expiresAt: record.expiresAt };
  if (record.value.length < DEFLATE_FROM) return { value: record.value, ...times };
  // (its UTF-8 in the thread's scratch bytes: only the deflated copy is kept)
  const z = deflateRaw(scratchUtf8(record.value)).toString('base64');
  return z.length < record.value.length ? { z, ...times } : { value: record.value, ...times };
}

/**
 * The entry's value, or undefined for a value that is not one of ours (written by something else in the
 * namespace, or cut short): such a key is skipped, as a miss.
 */
function valueOf(entry: StoredEntry | undefined): string | undefined {
  if (typeof entry?.value === 'string') return entry.value;
  if (typeof entry?.z !== 'string') return undefined;
  try {
    return inflateRaw(Buffer.from(entry.z, 'base64')).toString('utf8');
  } catch {
    return undefined;
  }
}

function describeError(err: unknown): string {
  if (err instanceof Error) return err.message || (err as NodeJS.ErrnoException).code || err.name;
  return String(err);
}

/** host:port only: the URL may carry a password, and this text ends up in logs and 503 bodies. */
function safeHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '(invalid url)';
  }
}

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** Rejects after `ms` unless `promise` settles first; the loser's rejection stays handled by race(). */
export async function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

export async function createRedisCacheStore(opts: RedisCacheStoreOptions): Promise<RedisCacheStore> {
  const namespace = opts.namespace ?? DEFAULT_NAMESPACE;
  const connectTimeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const commandTimeoutMs = opts.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  const maxReconnectDelayMs = opts.maxReconnectDelayMs ?? DEFAULT_MAX_RECONNECT_DELAY_MS;
  const scanCount = opts.scanCount ?? DEFAULT_SCAN_COUNT;
  const now = opts.now ?? Date.now;
  const host = safeHost(opts.url);

  // Kept only to explain failures: the client reports connection problems as events, not rejections.
  let lastError: unknown;
  const unavailable = (err: unknown): StoreUnavailableError => {
    if (err instanceof StoreUnavailableError) return err;
    const detail = lastError !== undefined && lastError !== err ? ` (last error: ${describeError(lastError)})` : '';
    return new StoreUnavailableError('cache', `redis cache store at ${host}: ${describeError(err)}${detail}`, {
      cause: err,
    });
  };

  const client = createClient({
    url: opts.url,
    // Fail commands while disconnected instead of queueing them until Redis returns (maybe never).
    disableOfflineQueue: true,
    socket: {
      connectTimeout: connectTimeoutMs,
      // Never give up (the client recovers by itself when Redis is back), but never wait long between tries.
      reconnectStrategy: (retries: number) => Math.min(FIRST_RECONNECT_DELAY_MS * 2 ** retries, maxReconnectDelayMs),
    },
  });
  // Without a listener an 'error' event would throw and take the process down.
  client.on('error', (err: unknown) => {
    lastError = err;
  });
  // Once reconnected, an old error would only mislead the next message.
  client.on('ready', () => {
    lastError = undefined;
  });

  try {
    await withDeadline(client.connect(), connectTimeoutMs, 'Redis');
  } catch (err) {
    // Stops the reconnect loop; connect() then settles on its own.
    if (client.isOpen) client.destroy();
    throw unavailable(err);
  }

  const adapter = new KeyvRedis<string>(client, {
    namespace,
    throwOnErrors: true,
    throwOnConnectError: true,
    connectionTimeout: connectTimeoutMs,
  });
  // Plain JSON: values are JSON text already, and keyv's default serializer adds escaping we do not need.
  const keyv = new Keyv<StoredEntry>(adapter, {
    namespace,
    useKeyPrefix: false,
    throwOnErrors: true,
    serialize: (data) => JSON.stringify(data),
    deserialize: (text) => JSON.parse(text),
  });
  keyv.on('error', (err: unknown) => {
    lastError = err;
  });
  const prefix = `${namespace}${adapter.keyPrefixSeparator}`;
  const prefixBytes = Buffer.byteLength(prefix, 'utf8');
  const match = `${escapeGlob(prefix)}*`;
  let closed = false;

  async function op<T>(what: string, fn: () => Promise<T>): Promise<T> {
    if (closed) throw new StoreUnavailableError('cache', 'redis cache store is closed');
    try {
      return await withDeadline(fn(), commandTimeoutMs, what);
    } catch (err) {
      throw unavailable(err);
    }
  }

  /** A value that is not ours (written by something else in the namespace) is skipped, not fatal. */
  async function parseEntry(text: string): Promise<StoredEntry | undefined> {
    try {
      const entry = (await keyv.deserializeData<StoredEntry>(text))?.value;
      return (typeof entry?.value === 'string' || typeof entry?.z === 'string') && typeof entry.expiresAt === 'number' ? entry : undefined;
    } catch {
      return undefined;
    }
  }

  /** Walks the namespace one SCAN page at a time. */
  async function* scanKeys(): AsyncGenerator<string[]> {
    let cursor = '0';
    do {
      const page = await op('SCAN', () => client.scan(cursor, { MATCH: match, COUNT: scanCount, TYPE: 'string' }));
      cursor = String(page.cursor);
      if (page.keys.length > 0) yield page.keys;
    } while (cursor !== '0');
  }

  // Sets on their way to Redis, packed: a get meanwhile finds them here (setsSeenAtOnce), so the cache service
  // keeps no copy of its own. That copy was the whole value, held until Redis answered: at the end of a burst,
  // long enough to be promoted to V8's old generation, and garbage there a moment later.
  const pending = new Map<string, StoredEntry>();

  return {
    kind: 'redis',
    readsInProcess: false,
    setsSeenAtOnce: true,
    redis: { client, keyPrefix: `${namespace}:`, entryKey: (key) => `${prefix}${key}` },

    async get(key) {
      // (a closed store rejects, as op does, also for a set it never finished)
      const entry = (closed ? undefined : pending.get(key)) ?? (await op('GET', () => keyv.get(key)));
      // Redis drops the key at expiresAt by itself; this check makes the store follow the injected clock
      // too. No delete here: another instance may have just written a fresh entry under this key.
      if (entry === undefined || entry.expiresAt <= now()) return undefined;
      const value = valueOf(entry);
      return value === undefined ? undefined : { key, value, createdAt: entry.createdAt, expiresAt: entry.expiresAt };
    },

    async set(record) {
      const ttl = Math.ceil(record.expiresAt - now());
      if (ttl <= 0) {
        pending.delete(record.key);
        await op('DEL', () => keyv.delete(record.key));
        return;
      }
      const entry = packEntry(record);
      pending.set(record.key, entry);
      try {
        await op('SET', () => keyv.set(record.key, entry, ttl));
      } finally {
        if (pending.get(record.key) === entry) pending.delete(record.key);
      }
    },

    delete(key) {
      pending.delete(key);
      return op('DEL', () => keyv.delete(key));
    },

    async *entries(): AsyncIterable<CacheRecord> {
      for await (const keys of scanKeys()) {
        const texts = await op('MGET', () => client.mGet(keys));
        for (const [i, text] of texts.entries()) {
          const redisKey = keys[i];
          if (text === null || redisKey === undefined) continue; // expired between SCAN and MGET
          const entry = await parseEntry(text);
          if (entry === undefined || entry.expiresAt <= now()) continue;
          const value = valueOf(entry);
          if (value === undefined) continue;
          const key = redisKey.slice(prefix.length);
          yield { key, value, createdAt: entry.createdAt, expiresAt: entry.expiresAt };
        }
      }
    },

    // O(n) in the namespace. bytes is best-effort: key bytes plus the stored (serialized) string length,
    // without Redis' own per-key overhead (MEMORY USAGE per key would be exact but far too slow).
    async stats(): Promise<CacheStoreStats> {
      let entries = 0;
      let bytes = 0;
      for await (const keys of scanKeys()) {
        const lengths = await op('STRLEN', () => Promise.all(keys.map((k) => client.strLen(k))));
        entries += keys.length;
        for (const [i, k] of keys.entries()) bytes += Buffer.byteLength(k, 'utf8') - prefixBytes + (lengths[i] ?? 0);
      }
      return { entries, bytes };
    },

    async ping() {
      await op('PING', () => client.ping());
    },

    async close() {
      if (closed) return;
      closed = true;
      if (!client.isOpen) return;
      try {
        // close() waits for replies still in flight. A hung Redis gets the deadline; after it the socket
        // is unreferenced so that it cannot keep the process alive on shutdown.
        await withDeadline(client.close(), commandTimeoutMs, 'Redis');
      } catch {
        client.unref();
      }
    },
  };
}
