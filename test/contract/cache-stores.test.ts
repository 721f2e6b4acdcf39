// Runs the cache store contract against every adapter, plus what only one adapter can show: sqlite's
// file survives a restart, Redis fails fast and recovers when the server is away. Redis is a real server
// (REDIS_URL, default local); when it is not running these tests fail, they do not skip.
import { mkdtemp, rm } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '@keyv/redis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import type { CacheRecord, CacheStore } from '../../src/storage/cache-store.js';
import { createMemoryCacheStore } from '../../src/storage/memory-cache-store.js';
import { createRedisCacheStore, type RedisCacheStoreOptions } from '../../src/storage/redis-cache-store.js';
import { createSqliteCacheStore, keyHash } from '../../src/storage/sqlite-cache-store.js';
import { Database } from '../../src/storage/sqlite-driver.js';
import { cacheStoreSuite } from './cache-store-suite.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const REDIS_HINT =
  'Start one with: redis-server --daemonize yes --port 6379 --save "" --appendonly no (or set REDIS_URL)';
/** Every namespace of this run starts with it, so afterAll can remove exactly what this run wrote. */
const RUN_NAMESPACE = `test-${process.pid}-${Date.now()}`;
let namespaces = 0;
const nextNamespace = (): string => `${RUN_NAMESPACE}-${++namespaces}`;

let tempDir: string;
let files = 0;
beforeAll(async () => {
  tempDir = await mkdtemp(join(tmpdir(), 'llm-relay-cache-'));
});
afterAll(async () => {
  await rm(tempDir, { recursive: true, force: true });
  await removeRedisKeys(`${RUN_NAMESPACE}-*`);
});

async function openRedis(opts: Omit<RedisCacheStoreOptions, 'url'> & { url?: string }): Promise<CacheStore> {
  try {
    return await createRedisCacheStore({ url: REDIS_URL, ...opts });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(`Redis is not reachable at ${REDIS_URL}: ${reason}. ${REDIS_HINT}`, { cause: err });
  }
}

function createAdminClient() {
  return createClient({ url: REDIS_URL, socket: { reconnectStrategy: false, connectTimeout: 2_000 } });
}

/** A plain client, to look at and clean up what the stores wrote. */
async function withRedisClient<T>(fn: (client: ReturnType<typeof createAdminClient>) => Promise<T>): Promise<T> {
  const client = createAdminClient();
  client.on('error', () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    client.destroy();
  }
}

async function removeRedisKeys(pattern: string): Promise<void> {
  await withRedisClient(async (client) => {
    for await (const keys of client.scanIterator({ MATCH: pattern, COUNT: 500 })) {
      if (keys.length > 0) await client.del(keys);
    }
  }).catch(() => {
    // Redis was not reachable: the Redis tests have failed already and there is nothing to clean.
  });
}

cacheStoreSuite('sqlite (file)', async ({ maxBytes, now }) =>
  createSqliteCacheStore({ file: join(tempDir, `cache-${++files}.db`), maxBytes, now }),
  { enforcesBudget: true },
);
cacheStoreSuite('sqlite (:memory:)', async ({ maxBytes, now }) =>
  createSqliteCacheStore({ file: ':memory:', maxBytes, now }),
  { enforcesBudget: true },
);
cacheStoreSuite('memory', async ({ maxBytes, now }) => createMemoryCacheStore({ maxBytes, now }), {
  enforcesBudget: true,
});
// Redis bounds memory with its own maxmemory policy; maxBytes does not apply to it.
cacheStoreSuite('redis', async ({ now }) => openRedis({ namespace: nextNamespace(), now }), {
  enforcesBudget: false,
});

function sized(key: string, size: number, now: number, ttlMs = 60_000): CacheRecord {
  const value = JSON.stringify('x'.repeat(size - Buffer.byteLength(key) - 2));
  return { key, value, createdAt: now, expiresAt: now + ttlMs };
}

/** One row of a query on the file, through a connection of its own, read-only. */
function readFile<T>(file: string, sql: string): T {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare(sql).get() as T;
  } finally {
    db.close();
  }
}

describe('sqlite cache store', () => {
  it('moves the rows of a file written with a key index to the table without one, once, and keeps serving them', async () => {
    const file = join(tempDir, `upgrade-${++files}.db`);
    let time = Date.now();
    const old = new Database(file);
    old.exec(`CREATE TABLE cache_entries (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL, last_access INTEGER NOT NULL, size INTEGER NOT NULL);
      CREATE INDEX cache_entries_last_access ON cache_entries (last_access);
      CREATE INDEX cache_entries_expires_at ON cache_entries (expires_at);`);
    const stored = ['k:a', 'k:b', 'k:c'].map((key) => sized(key, 300, time));
    // k:a is the least recently used one
    stored.forEach((r, i) => old.prepare('INSERT INTO cache_entries VALUES (?, ?, ?, ?, ?, ?)').run(r.key, r.value, r.createdAt, r.expiresAt, time + i, 300));
    old.close();
    const tableSql = (): string => readFile<{ sql: string }>(file, "SELECT sql FROM sqlite_master WHERE name = 'cache_entries'").sql;
    // `cache export` reads it as it is (a relay of the earlier version may be running on it)
    const exporter = createSqliteCacheStore({ file, maxBytes: 1_000, now: () => time, exportOnly: true });
    const exported: CacheRecord[] = [];
    for await (const r of exporter.entries()) exported.push(r);
    expect(exported).toEqual(stored);
    await expect(exporter.get('k:a')).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(exporter.set(sized('k:e', 300, time))).rejects.toBeInstanceOf(StoreUnavailableError);
    await exporter.close();
    expect(tableSql()).toMatch(/PRIMARY KEY/i);
    const notices: string[] = [];
    const store = createSqliteCacheStore({ file, maxBytes: 1_000, now: () => time, onUpgrade: (what) => notices.push(what) });
    expect(tableSql()).not.toMatch(/PRIMARY KEY/i);
    expect(notices).toEqual([`the entries of ${file} are rewritten into this version's layout, once`]);
    expect(await store.stats()).toEqual({ entries: 3, bytes: 900 });
    for (const r of stored) expect(await store.get(r.key)).toEqual(r);
    await store.close();
    const again = createSqliteCacheStore({ file, maxBytes: 1_000, now: () => time, onUpgrade: (what) => notices.push(what) });
    expect(notices).toHaveLength(1);
    try {
      time += 10;
      for (const key of ['k:b', 'k:c']) await again.get(key);
      await again.set(sized('k:d', 300, time)); // over budget: k:a goes, by the recency the old rows carried
      expect(await again.get('k:a')).toBeUndefined();
      for (const r of stored.slice(1)) expect(await again.get(r.key)).toEqual(r);
      expect(await again.stats()).toEqual({ entries: 3, bytes: 900 });
    } finally {
      await again.close();
    }
  });

  it('a commit that fails leaves the entries it would have evicted findable, and the ones it would have added absent', async () => {
    const file = join(tempDir, `rollback-${++files}.db`);
    const time = Date.now();
    const store = createSqliteCacheStore({ file, maxBytes: 700, now: () => time });
    const x = sized('k:x', 300, time);
    await store.set(x);
    // the file refuses one key (another connection's trigger): the batch that holds it rolls back whole
    const other = new Database(file);
    other.exec("CREATE TRIGGER refuse BEFORE INSERT ON cache_entries WHEN NEW.key = 'k:bad' BEGIN SELECT RAISE(ABORT, 'refused'); END");
    other.close();
    try {
      // y, then z (over budget: x is evicted), then the refused one, in one commit
      const results = await Promise.allSettled(['k:y', 'k:z', 'k:bad'].map((key) => store.set(sized(key, 300, time))));
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
      expect((results[0] as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
      expect(await store.get('k:x')).toEqual(x);
      for (const key of ['k:y', 'k:z', 'k:bad']) expect(await store.get(key)).toBeUndefined();
      expect(await store.stats()).toEqual({ entries: 1, bytes: 300 });
      const y = sized('k:y', 300, time);
      await store.set(y);
      expect(await store.get('k:y')).toEqual(y);
      expect(await store.get('k:x')).toEqual(x);
    } finally {
      await store.close();
    }
  });

  it('tells apart keys whose hashes collide: each is stored, read, replaced, deleted and evicted on its own', async () => {
    // two keys with the same 30-bit hash (a birthday search: ~40,000 keys)
    const seen = new Map<number, string>();
    let pair: [string, string] | undefined;
    for (let i = 0; !pair; i++) {
      const key = `ns:${i.toString(16)}`;
      const other = seen.get(keyHash(key));
      if (other !== undefined) pair = [other, key];
      else seen.set(keyHash(key), key);
    }
    const [x, y] = pair;
    expect(keyHash(x)).toBe(keyHash(y));
    const file = join(tempDir, `collide-${++files}.db`);
    let time = Date.now();
    const store = createSqliteCacheStore({ file, maxBytes: 1_000, now: () => time });
    const rx = sized(x, 300, time);
    const ry = sized(y, 300, time);
    await store.set(rx);
    expect(await store.get(y)).toBeUndefined(); // same hash, another key: not x's answer
    await store.set(ry);
    expect(await store.get(x)).toEqual(rx);
    expect(await store.get(y)).toEqual(ry);
    const ry2 = { ...sized(y, 310, time), value: JSON.stringify('y'.repeat(310 - Buffer.byteLength(y) - 2)) };
    await store.set(ry2);
    expect(await store.stats()).toEqual({ entries: 2, bytes: 610 });
    await store.close();
    // the index is built again from the file
    const reopened = createSqliteCacheStore({ file, maxBytes: 1_000, now: () => time });
    try {
      expect(await reopened.get(y)).toEqual(ry2);
      expect(await reopened.get(x)).toEqual(rx);
      expect(await reopened.delete(x)).toBe(true);
      expect(await reopened.get(x)).toBeUndefined();
      expect(await reopened.get(y)).toEqual(ry2);
      await reopened.set(rx);
      time += 1;
      await reopened.get(y);
      await reopened.set(sized('ns:z', 400, time)); // over budget: x, the least recently used, goes
      expect(await reopened.get(x)).toBeUndefined();
      expect(await reopened.get(y)).toEqual(ry2);
      expect(await reopened.stats()).toEqual({ entries: 2, bytes: 710 });
    } finally {
      await reopened.close();
    }
  });

  it('creates the parent directory of its file', async () => {
    const file = join(tempDir, 'nested', 'deeper', 'cache.db');
    const store = createSqliteCacheStore({ file, maxBytes: 1_000 });
    await store.set(sized('k:ü', 100, Date.now()));
    expect((await store.stats()).entries).toBe(1);
    await store.close();
  });

  it('keeps its entries across close and reopen', async () => {
    const file = join(tempDir, `reopen-${++files}.db`);
    const first = createSqliteCacheStore({ file, maxBytes: 10_000 });
    const stored = sized('openai:chat:ключ', 200, Date.now());
    await first.set(stored);
    await first.close();
    const second = createSqliteCacheStore({ file, maxBytes: 10_000 });
    expect(await second.get(stored.key)).toEqual(stored);
    await second.close();
  });

  it('keeps large values deflated and reads text rows written before as they are', async () => {
    const file = join(tempDir, `packed-${++files}.db`);
    const at = Date.now();
    const answer = `{"v":2,"status":200}\n${JSON.stringify({ choices: [{ message: { content: 'ünïcödé answer '.repeat(200) } }] })}`;
    const big: CacheRecord = { key: 'ns:big', value: answer, createdAt: at, expiresAt: at + 60_000 };
    const small: CacheRecord = { key: 'ns:small', value: '{"v":2}\n{}', createdAt: at, expiresAt: at + 60_000 };
    const first = createSqliteCacheStore({ file, maxBytes: 1_000_000 });
    await first.set(big);
    await first.set(small);
    await first.close();
    const db = new Database(file);
    const rows = db.prepare('SELECT key, typeof(value) AS t, length(value) AS n FROM cache_entries ORDER BY key').all() as { key: string; t: string; n: number }[];
    expect(rows.map((r) => [r.key, r.t])).toEqual([['ns:big', 'blob'], ['ns:small', 'text']]);
    expect(rows[0]!.n).toBeLessThan(Buffer.byteLength(answer) / 4);
    // A row as an earlier relay wrote it: plain text, whatever its size.
    db.prepare('INSERT INTO cache_entries VALUES (?, ?, ?, ?, ?, ?)').run('ns:old', answer, at, at + 60_000, at, answer.length + 6);
    db.close();
    const second = createSqliteCacheStore({ file, maxBytes: 1_000_000 });
    try {
      expect(await second.get('ns:big')).toEqual(big);
      expect(await second.get('ns:small')).toEqual(small);
      expect(await second.get('ns:old')).toEqual({ ...big, key: 'ns:old' });
      const exported: CacheRecord[] = [];
      for await (const r of second.entries()) exported.push(r);
      expect(exported.map((r) => r.value)).toEqual([answer, small.value, answer]);
    } finally {
      await second.close();
    }
  });

  it('commits a burst of long answers once 256 K characters of them wait, not only in a quiet moment', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const file = join(tempDir, `burst-${++files}.db`);
    const store = createSqliteCacheStore({ file, maxBytes: 10_000_000 });
    const rows = (): number => readFile<{ n: number }>(file, 'SELECT COUNT(*) AS n FROM cache_entries').n;
    try {
      const at = Date.now();
      const done: string[] = [];
      const set = (key: string) => void store.set(sized(key, 100_000, at)).then(() => done.push(key));
      set('k:1');
      set('k:2');
      await Promise.resolve();
      expect(done).toEqual([]); // 200 K characters wait for the quiet moment
      expect(rows()).toBe(0);
      set('k:3'); // 300 K: committed now, the three together
      await vi.advanceTimersByTimeAsync(0);
      expect(done).toEqual(['k:1', 'k:2', 'k:3']);
      expect(rows()).toBe(3);
      set('k:4');
      await vi.advanceTimersByTimeAsync(0);
      expect(done).toHaveLength(3);
      await vi.advanceTimersByTimeAsync(60); // the quiet moment
      expect(done).toEqual(['k:1', 'k:2', 'k:3', 'k:4']);
      expect(rows()).toBe(4);
    } finally {
      vi.useRealTimers();
      await store.close();
    }
  });

  it('restores the running byte total on reopen and keeps enforcing the budget', async () => {
    const file = join(tempDir, `total-${++files}.db`);
    let time = Date.now();
    const now = (): number => time;
    const first = createSqliteCacheStore({ file, maxBytes: 1_000, now });
    for (const key of ['a', 'b', 'c']) {
      await first.set(sized(`k:${key}`, 300, time));
      time += 1;
    }
    await first.close();
    const second = createSqliteCacheStore({ file, maxBytes: 1_000, now });
    expect(await second.stats()).toEqual({ entries: 3, bytes: 900 });
    await second.set(sized('k:d', 300, time));
    expect(await second.stats()).toEqual({ entries: 3, bytes: 900 });
    expect(await second.get('k:a')).toBeUndefined(); // the least recently used one
    await second.close();
  });

  it('gives its page cache back in a quiet moment and answers as before, pending writes included', async () => {
    const file = join(tempDir, `release-${++files}.db`);
    const store = createSqliteCacheStore({ file, maxBytes: 50_000_000 });
    const at = Date.now();
    const committed = Array.from({ length: 300 }, (_, i) => sized(`k:release-${i}`, 8_000, at));
    await Promise.all(committed.map((r) => store.set(r)));
    // a set not yet committed (the store groups writes until a quiet moment) while the memory goes back
    const pending = sized('k:release-pending', 500, at);
    const written = store.set(pending);
    store.releaseMemory!();
    expect(await store.get(pending.key)).toEqual(pending);
    await written;
    for (const r of committed) expect(await store.get(r.key)).toEqual(r);
    expect((await store.stats()).entries).toBe(301);
    await store.close();
    // what it held is in the file: a new connection reads it all
    const reopened = createSqliteCacheStore({ file, maxBytes: 50_000_000 });
    expect(await reopened.get(pending.key)).toEqual(pending);
    expect(await reopened.get(committed[299]!.key)).toEqual(committed[299]);
    reopened.releaseMemory!();
    await reopened.close();
    // closed: nothing to give back, and no error
    expect(() => reopened.releaseMemory!()).not.toThrow();
  });

  it('answers a hot entry from memory, without reading the file again', async () => {
    const file = join(tempDir, `hot-${++files}.db`);
    const store = createSqliteCacheStore({ file, maxBytes: 10_000 });
    const stored = sized('k:hot', 200, Date.now());
    await store.set(stored);
    expect(await store.get(stored.key)).toEqual(stored);
    // Behind the store's back (the relay is the only writer of its data dir, so this never happens there):
    const other = new Database(file);
    other.prepare('DELETE FROM cache_entries').run();
    other.close();
    expect(await store.get(stored.key)).toEqual(stored);
    // A store without the entry in memory reads the file.
    const fresh = createSqliteCacheStore({ file, maxBytes: 10_000 });
    expect(await fresh.get(stored.key)).toBeUndefined();
    await Promise.all([store.close(), fresh.close()]);
  });

  it('never answers from memory what eviction, expiry or delete removed from the file', async () => {
    let time = Date.now();
    const store = createSqliteCacheStore({ file: ':memory:', maxBytes: 1_000, now: () => time });
    const a = sized('k:a', 300, time);
    const b = sized('k:b', 300, time, 50);
    const c = sized('k:c', 300, time);
    for (const r of [a, b, c]) await store.set(r);
    for (const r of [a, b, c]) expect(await store.get(r.key)).toEqual(r); // all three in memory now
    time += 1;
    await store.get(c.key);
    await store.set(sized('k:d', 300, time)); // over budget: the least recently used (a) goes
    expect(await store.get(a.key)).toBeUndefined();
    time += 100;
    expect(await store.get(b.key)).toBeUndefined(); // expired
    expect(await store.delete(c.key)).toBe(true);
    expect(await store.get(c.key)).toBeUndefined();
    expect(await store.stats()).toEqual({ entries: 1, bytes: 300 });
    await store.close();
  });

  it('evicts expired entries before the least recently used ones', async () => {
    let time = Date.now();
    const store = createSqliteCacheStore({ file: ':memory:', maxBytes: 1_000, now: () => time });
    const oldest = sized('k:oldest', 300, time);
    await store.set(oldest);
    time += 1;
    await store.set(sized('k:short-lived', 300, time, 10));
    time += 1;
    await store.set(sized('k:recent', 300, time));
    time += 10;
    await store.set(sized('k:new', 300, time));
    expect(await store.get(oldest.key)).toEqual(oldest);
    expect(await store.stats()).toEqual({ entries: 3, bytes: 900 });
    await store.close();
  });
});

/** A TCP hop between the store and Redis that can be cut and restored, to play "Redis went away". */
function createTcpProxy(target: { host: string; port: number }) {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;
  let frozen = false;
  return {
    get port(): number {
      return port;
    },
    /** Keeps connections open but forwards nothing more: a Redis that hangs. */
    freeze(): void {
      frozen = true;
    },
    async start(): Promise<void> {
      server = net.createServer((inbound) => {
        const outbound = net.connect(target.port, target.host);
        const drop = (): void => {
          inbound.destroy();
          outbound.destroy();
          sockets.delete(inbound);
          sockets.delete(outbound);
        };
        for (const socket of [inbound, outbound]) {
          sockets.add(socket);
          socket.on('error', drop).on('close', drop);
        }
        inbound.on('data', (chunk) => frozen || outbound.write(chunk));
        outbound.on('data', (chunk) => frozen || inbound.write(chunk));
      });
      const listening = server;
      await new Promise<void>((resolve) => listening.listen(port, '127.0.0.1', resolve));
      port = (listening.address() as AddressInfo).port;
    },
    async stop(): Promise<void> {
      for (const socket of sockets) socket.destroy();
      const closing = server;
      if (closing) await new Promise<void>((resolve) => closing.close(() => resolve()));
    },
  };
}

describe('redis cache store', () => {
  it('sets the Redis TTL from expiresAt', async () => {
    const namespace = nextNamespace();
    const store = await openRedis({ namespace });
    const createdAt = Date.now();
    const stored: CacheRecord = { key: 'openai:chat:ttl:ü', value: '{}', createdAt, expiresAt: createdAt + 30_000 };
    await store.set(stored);
    const pttl = await withRedisClient((client) => client.pTTL(`${namespace}::${stored.key}`));
    expect(pttl).toBeGreaterThan(25_000);
    expect(pttl).toBeLessThanOrEqual(30_000);
    await store.close();
  });

  it('keeps a long value deflated (what Redis holds is a fraction of it) and reads it back whole', async () => {
    const namespace = nextNamespace();
    const store = await openRedis({ namespace });
    const createdAt = Date.now();
    // an SSE stream's entry: the head, then 60 events that repeat their envelope, quotes and newlines
    const events = Array.from({ length: 60 }, (_, i) => `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"word ${i} "}}]}\n\n`);
    const long: CacheRecord = { key: 'openai:chat:long:ü', value: `{"v":2,"status":200,"headers":{},"sse":true}\n${events.join('')}data: [DONE]\n\n`, createdAt, expiresAt: createdAt + 60_000 };
    const short: CacheRecord = { key: 'openai:chat:short', value: '{"v":2,"status":200,"headers":{}}\n{"ok":true}', createdAt, expiresAt: createdAt + 60_000 };
    await store.set(long);
    await store.set(short);
    const raw = await withRedisClient(async (client) => ({
      long: JSON.parse((await client.get(`${namespace}::${long.key}`))!),
      short: JSON.parse((await client.get(`${namespace}::${short.key}`))!),
    }));
    expect(Object.keys(raw.long.value).sort()).toEqual(['createdAt', 'expiresAt', 'z']);
    expect(raw.long.value.z.length).toBeLessThan(long.value.length / 5);
    expect(raw.short.value).toEqual({ value: short.value, createdAt, expiresAt: short.expiresAt });
    expect(await store.get(long.key)).toEqual(long);
    expect(await store.get(short.key)).toEqual(short);
    const listed: CacheRecord[] = [];
    for await (const r of store.entries()) listed.push(r);
    expect(listed.sort((a, b) => a.key.localeCompare(b.key))).toEqual([long, short]);
    await store.close();
  });

  it('reads the entries earlier versions wrote (the value as text), and skips a deflated value that does not inflate', async () => {
    const namespace = nextNamespace();
    const store = await openRedis({ namespace });
    const createdAt = Date.now();
    const expiresAt = createdAt + 60_000;
    const older = `{"v":2,"status":200,"headers":{}}\n${'{"choices":[{"message":{"content":"an answer long enough to be deflated today"}}]}'.repeat(30)}`;
    await withRedisClient(async (client) => {
      // keyv's envelope around the entry, as the relay wrote it before values were deflated
      await client.set(`${namespace}::openai:chat:older`, JSON.stringify({ value: { value: older, createdAt, expiresAt }, expires: expiresAt }), { PX: 60_000 });
      await client.set(`${namespace}::openai:chat:broken`, JSON.stringify({ value: { z: 'bm90IGRlZmxhdGU=', createdAt, expiresAt }, expires: expiresAt }), { PX: 60_000 });
    });
    expect(await store.get('openai:chat:older')).toEqual({ key: 'openai:chat:older', value: older, createdAt, expiresAt });
    expect(await store.get('openai:chat:broken')).toBeUndefined();
    const listed: string[] = [];
    for await (const r of store.entries()) listed.push(r.key);
    expect(listed).toEqual(['openai:chat:older']);
    await store.close();
  });

  it('fails with StoreUnavailableError within ~3 s when nothing listens, without unhandled rejections', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      const started = performance.now();
      const error = await createRedisCacheStore({ url: 'redis://127.0.0.1:1' }).catch((err: unknown) => err);
      expect(performance.now() - started).toBeLessThan(3_000);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).store).toBe('cache');
      expect((error as Error).message).toContain('127.0.0.1:1');
      // Give late events (a settling connect(), socket errors) the chance to surface.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('rejects promptly while Redis is away and recovers by itself when it is back', async () => {
    const target = new URL(REDIS_URL);
    const proxy = createTcpProxy({ host: target.hostname, port: Number(target.port || 6379) });
    await proxy.start();
    const store = await openRedis({
      url: `redis://127.0.0.1:${proxy.port}`,
      namespace: nextNamespace(),
      commandTimeoutMs: 1_000,
      maxReconnectDelayMs: 100,
    });
    try {
      const createdAt = Date.now();
      const stored: CacheRecord = { key: 'openai:chat:away', value: '{"a":1}', createdAt, expiresAt: createdAt + 60_000 };
      await store.set(stored);
      await proxy.stop();
      // (a get after the failed set: what it could not write is not served from memory either)
      for (const call of [() => store.get(stored.key), () => store.set(stored), () => store.get(stored.key), () => store.ping()]) {
        const started = performance.now();
        await expect(call()).rejects.toBeInstanceOf(StoreUnavailableError);
        expect(performance.now() - started).toBeLessThan(1_500);
      }
      await proxy.start();
      await vi.waitFor(() => store.ping(), { timeout: 5_000, interval: 100 });
      expect(await store.get(stored.key)).toEqual(stored);
    } finally {
      await store.close();
      await proxy.stop();
    }
  });

  it('rejects at commandTimeoutMs when Redis accepts but never answers', async () => {
    const target = new URL(REDIS_URL);
    const proxy = createTcpProxy({ host: target.hostname, port: Number(target.port || 6379) });
    await proxy.start();
    const store = await openRedis({
      url: `redis://127.0.0.1:${proxy.port}`,
      namespace: nextNamespace(),
      commandTimeoutMs: 300,
    });
    try {
      proxy.freeze();
      const started = performance.now();
      await expect(store.get('openai:chat:hung')).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(performance.now() - started).toBeLessThan(1_000);
    } finally {
      await store.close();
      await proxy.stop();
    }
  });
});
