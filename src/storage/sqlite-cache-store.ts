// The embedded default cache: one SQLite file in the data dir, bounded by a byte budget with LRU eviction.
// better-sqlite3 is synchronous; the port is async so that core sees every adapter the same way, and each
// call here is one or two small indexed statements, so blocking the event loop for them is cheap. Reads
// do not write: their recency is batched (see pendingTouches). Rows are found by an index in memory, not by
// one in the file (see RowIndex).
import { dirname } from 'node:path';
import { LRUCache } from 'lru-cache';
import { StoreUnavailableError } from '../errors.js';
import { createQuietTimer } from '../quiet-timer.js';
import type { CacheRecord, CacheStore, CacheStoreStats } from './cache-store.js';
import { DEFLATE_FROM, deflateRaw, inflateRaw } from './raw-deflate.js';
import { scratchUtf8 } from '../scratch-buffer.js';
import { makePrivateDir, preparePrivateFile, sqliteCompanions } from './private-files.js';
import { Database } from './sqlite-driver.js';

export interface SqliteCacheStoreOptions {
  /** Path of the database file (its directory is created if missing), or ':memory:'. */
  file: string;
  /** Budget for the bytes of key + value (UTF-8); least recently used entries are evicted beyond it. */
  maxBytes: number;
  /** How long a statement waits for a lock held by another connection before failing. */
  busyTimeoutMs?: number;
  /** Rows read per query by entries(); values can be up to ~1 MB each, so keep pages small. */
  entriesPageSize?: number;
  now?: () => number;
  /**
   * Only `entries` and `stats` will be used (`cache export`, which may read a data dir a relay holds): the file
   * is not upgraded and no index is built; the other calls reject.
   */
  exportOnly?: boolean;
  /** told before a file of an earlier relay is rewritten into this layout (once; seconds for a large file) */
  onUpgrade?: (what: string) => void;
}

const DEFAULT_BUSY_TIMEOUT_MS = 5_000;
/** Reads record their recency in memory and write it in one transaction this often (and before evicting). */
const TOUCH_FLUSH_MS = 1_000;
const DEFAULT_ENTRIES_PAGE_SIZE = 32;
/** Victims fetched per eviction query; most sets evict one or two entries, so a small batch is plenty. */
const EVICTION_BATCH = 32;
/** Bytes of recently read or written records also kept in memory, so a hot entry is not read from the file. */
const HOT_BYTES = 32 * 1024 * 1024;
/** A window with this many sets commits at once. */
const SET_BATCH_MAX = 256;
/**
 * …or with this many characters of values: what waits for the quiet moment is bounded in bytes, not only
 * in entries (256 long streams' answers ending together would otherwise wait there, up to 50 ms, all at once).
 */
const SET_BATCH_CHARS = 256 * 1024;

interface Row {
  id: number;
  key: string;
  /** text as stored by set(), or a BLOB: its UTF-8 deflated (see packValue) */
  value: string | Buffer;
  created_at: number;
  expires_at: number;
}

/**
 * The entries, in the order they were written (rowid), with no index on the key: keys are hashes, so such an
 * index takes every new entry at a random leaf, and each commit wrote one such page (4 KiB to the WAL, and
 * again at the checkpoint) for nearly every entry in it. The store finds rows through RowIndex instead. The
 * two time indexes only ever grow at their end.
 */
const COLUMNS = `(
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    last_access INTEGER NOT NULL,
    size INTEGER NOT NULL
  )`;
const TIME_INDEXES = `
  CREATE INDEX IF NOT EXISTS cache_entries_last_access ON cache_entries (last_access);
  CREATE INDEX IF NOT EXISTS cache_entries_expires_at ON cache_entries (expires_at);
`;
const SCHEMA = `CREATE TABLE IF NOT EXISTS cache_entries ${COLUMNS};${TIME_INDEXES}`;

/**
 * Files written before had `key TEXT PRIMARY KEY`: their rows move to a table without it, in one transaction
 * (a crash leaves the file as it was), once, by the first store that opens the file.
 */
function upgradeTable(db: Database, starting?: () => void): void {
  const table = db.prepare<[], string>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'cache_entries'").pluck().get();
  if (table === undefined || !/PRIMARY\s+KEY/i.test(table)) return;
  starting?.();
  db.transaction(() => {
    db.exec(`CREATE TABLE cache_entries_next ${COLUMNS}`);
    db.exec(
      `INSERT INTO cache_entries_next (key, value, created_at, expires_at, last_access, size)
       SELECT key, value, created_at, expires_at, last_access, size FROM cache_entries ORDER BY rowid`,
    );
    db.exec('DROP TABLE cache_entries');
    db.exec('ALTER TABLE cache_entries_next RENAME TO cache_entries');
    db.exec(TIME_INDEXES);
  })();
}

/** A 30-bit hash of a key (FNV-1a over its UTF-16 code units): small enough to be a V8 small integer. */
export function keyHash(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h & 0x3fffffff;
}

/**
 * Which rows may hold a key: its rowid by the key's hash (keyHash), built from the file at open (one pass over
 * the keys) and kept in step with every write, which all go through this store (the relay is the only writer
 * of its data dir). A hash two keys share lists both rows; a row read through it is used only when its key is
 * the one asked for, so a collision costs a read, never a wrong answer. ~30-40 bytes of memory an entry.
 */
class RowIndex {
  private readonly one = new Map<number, number>();
  /** hashes with more than one row (collisions: a few hundred in a million keys) */
  private readonly more = new Map<number, number[]>();

  /** The rows that may hold this key (most often none or one). */
  rows(key: string): readonly number[] | number | undefined {
    const hash = keyHash(key);
    return (this.more.size > 0 ? this.more.get(hash) : undefined) ?? this.one.get(hash);
  }

  add(key: string, rowid: number): void {
    const hash = keyHash(key);
    const list = this.more.get(hash);
    if (list) list.push(rowid);
    else {
      const first = this.one.get(hash);
      if (first === undefined) this.one.set(hash, rowid);
      else {
        this.one.delete(hash);
        this.more.set(hash, [first, rowid]);
      }
    }
  }

  clear(): void {
    this.one.clear();
    this.more.clear();
  }

  remove(key: string, rowid: number): void {
    const hash = keyHash(key);
    const list = this.more.get(hash);
    if (!list) {
      if (this.one.get(hash) === rowid) this.one.delete(hash);
      return;
    }
    const at = list.indexOf(rowid);
    if (at >= 0) list.splice(at, 1);
    if (list.length === 1) {
      this.more.delete(hash);
      this.one.set(hash, list[0]!);
    }
  }
}

function unavailable(err: unknown): StoreUnavailableError {
  if (err instanceof StoreUnavailableError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new StoreUnavailableError('cache', `sqlite cache store: ${message}`, { cause: err });
}

function entrySize(key: string, value: string): number {
  return Buffer.byteLength(key, 'utf8') + Buffer.byteLength(value, 'utf8');
}

/**
 * The stored form of a value: the text itself, or a BLOB of its deflated UTF-8 when that is smaller. The
 * column's type tells them apart, so files written before (all text) read as they are, and a row stays
 * readable with the sqlite3 shell (`SELECT CAST(value AS TEXT)` for text, zlib for a BLOB).
 */
function packValue(value: string): string | Buffer {
  // (an answer's JSON shrinks to a third)
  if (value.length < DEFLATE_FROM) return value;
  // (its UTF-8 in the thread's scratch bytes: only the deflated copy is kept)
  const bytes = scratchUtf8(value);
  const packed = deflateRaw(bytes);
  return packed.length < bytes.length * 0.9 ? packed : value;
}

function unpackValue(value: string | Buffer): string {
  return typeof value === 'string' ? value : inflateRaw(value).toString('utf8');
}

function toRecord(row: Row): CacheRecord {
  return { key: row.key, value: unpackValue(row.value), createdAt: row.created_at, expiresAt: row.expires_at };
}

function openDatabase(file: string, busyTimeoutMs: number, upgrade: false | (() => void)): Database {
  if (file !== ':memory:') {
    makePrivateDir(dirname(file));
    preparePrivateFile(file, sqliteCompanions(file));
  }
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    // A cache may lose its last writes on power loss; NORMAL skips the fsync per commit that FULL pays.
    db.pragma('synchronous = NORMAL');
    db.pragma(`busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
    if (upgrade) upgradeTable(db, upgrade);
    db.exec(SCHEMA);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

export function createSqliteCacheStore(opts: SqliteCacheStoreOptions): CacheStore {
  const { file, maxBytes } = opts;
  if (!(maxBytes > 0)) throw new RangeError(`maxBytes must be positive, got ${maxBytes}`);
  const now = opts.now ?? Date.now;
  const pageSize = opts.entriesPageSize ?? DEFAULT_ENTRIES_PAGE_SIZE;

  let db: Database;
  try {
    db = openDatabase(
      file,
      opts.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS,
      !opts.exportOnly && (() => opts.onUpgrade?.(`the entries of ${file} are rewritten into this version's layout, once`)),
    );
  } catch (err) {
    throw unavailable(err);
  }

  const selectRow = db.prepare<[number], Row>(
    'SELECT rowid AS id, key, value, created_at, expires_at FROM cache_entries WHERE rowid = ?',
  );
  const selectKeySize = db.prepare<[number], { id: number; key: string; size: number }>(
    'SELECT rowid AS id, key, size FROM cache_entries WHERE rowid = ?',
  );
  const selectKeys = db.prepare<[], [number, string]>('SELECT rowid, key FROM cache_entries').raw();
  const touch = db.prepare<[number, number, string]>('UPDATE cache_entries SET last_access = ? WHERE rowid = ? AND key = ?');
  const insert = db.prepare<[string, string | Buffer, number, number, number, number]>(
    'INSERT INTO cache_entries (key, value, created_at, expires_at, last_access, size) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const update = db.prepare<[string | Buffer, number, number, number, number, number]>(
    'UPDATE cache_entries SET value = ?, created_at = ?, expires_at = ?, last_access = ?, size = ? WHERE rowid = ?',
  );
  const deleteRow = db.prepare<[number], number>('DELETE FROM cache_entries WHERE rowid = ? RETURNING size').pluck();
  const deleteIfExpired = db
    .prepare<[number, number], number>('DELETE FROM cache_entries WHERE rowid = ? AND expires_at <= ? RETURNING size')
    .pluck();
  const deleteExpired = db.prepare<[number], { id: number; key: string; size: number }>(
    'DELETE FROM cache_entries WHERE expires_at <= ? RETURNING rowid AS id, key, size',
  );
  const selectOldest = db.prepare<[number, number], { id: number; key: string; size: number }>(
    'SELECT rowid AS id, key, size FROM cache_entries WHERE rowid <> ? ORDER BY last_access LIMIT ?',
  );
  const countAll = db.prepare<[], number>('SELECT COUNT(*) FROM cache_entries').pluck();
  const sumSizes = db.prepare<[], number>('SELECT COALESCE(SUM(size), 0) FROM cache_entries').pluck();
  // Paged by rowid rather than one open iterator: better-sqlite3 refuses other statements on the
  // connection while an iterator is open, and the consumer of entries() may use the store meanwhile.
  const selectPage = db.prepare<[number, number, number], Row>(
    `SELECT rowid AS id, key, value, created_at, expires_at FROM cache_entries
     WHERE rowid > ? AND expires_at > ? ORDER BY rowid LIMIT ?`,
  );
  const selectPing = db.prepare<[], number>('SELECT 1').pluck();

  // Kept in memory so a set does not sum the table. Correct as long as this process is the only writer,
  // which is how the relay uses its data dir.
  let totalBytes = sumSizes.get() ?? 0;

  // The same assumption lets recently used records live in memory as well: every change to the table goes
  // through this store, which keeps the copy in step, so a hot entry is served without a query.
  const hot = new LRUCache<string, CacheRecord>({
    maxSize: HOT_BYTES,
    sizeCalculation: (r) => Math.max(1, r.key.length + r.value.length),
  });

  // …and rows to be found without an index in the file (RowIndex), built here, at open, from one pass over
  // the keys (~2 µs an entry), so that a relay's first calls do not wait for it.
  const rowIndex = new RowIndex();
  function indexRows(): void {
    rowIndex.clear();
    for (const [id, key] of selectKeys.iterate()) rowIndex.add(key, id);
  }
  try {
    if (!opts.exportOnly) indexRows();
  } catch (err) {
    db.close();
    throw unavailable(err);
  }

  /** The row of this key, read with `read` (which selects the row's id and key with whatever else it needs). */
  function findRow<R extends { id: number; key: string }>(key: string, read: (rowid: number) => R | undefined): R | undefined {
    const found = rowIndex.rows(key);
    if (found === undefined) return undefined;
    if (typeof found === 'number') {
      const row = read(found);
      return row?.key === key ? row : undefined;
    }
    for (const rowid of found) {
      const row = read(rowid);
      if (row?.key === key) return row;
    }
    return undefined;
  }

  /** Deletes a row found by its key or chosen by rowid: the file, the index and the hot copy. */
  function dropRow(key: string, rowid: number): number {
    const size = deleteRow.get(rowid) ?? 0;
    rowIndex.remove(key, rowid);
    hot.delete(key);
    return size;
  }

  /** Deletes expired entries, then the least recently used ones (never the row `keep`), until within budget. */
  function evict(keep: number, at: number, bytes: number): number {
    for (const gone of deleteExpired.all(at)) {
      rowIndex.remove(gone.key, gone.id);
      hot.delete(gone.key);
      bytes -= gone.size;
    }
    while (bytes > maxBytes) {
      const victims = selectOldest.all(keep, EVICTION_BATCH);
      if (victims.length === 0) break;
      for (const victim of victims) {
        if (bytes <= maxBytes) break;
        bytes -= dropRow(victim.key, victim.id);
      }
    }
    return bytes;
  }

  // The running total follows each record stored; if storeAll's transaction rolls back, commitSets puts
  // the total (and the hot records) back as they were, so a failed commit cannot leave them wrong.
  // A hit must not pay for a write transaction: recency is kept in memory and written in batches. The
  // eviction order sees every read, because pending touches are written before victims are chosen.
  const pendingTouches = new Map<string, number>();
  let touchTimer: NodeJS.Timeout | undefined;
  const writeTouches = db.transaction(() => {
    for (const [key, at] of pendingTouches) {
      const found = rowIndex.rows(key);
      if (found === undefined) continue;
      for (const rowid of typeof found === 'number' ? [found] : found) touch.run(at, rowid, key);
    }
    pendingTouches.clear();
  });
  function flushTouches(): void {
    if (touchTimer) {
      clearTimeout(touchTimer);
      touchTimer = undefined;
    }
    if (pendingTouches.size > 0 && db.open) writeTouches();
  }

  // The two steps of storeAll's transaction, plain functions: as nested transactions they would add a
  // SAVEPOINT and a RELEASE per record. Each returns the new total for storeOne to keep.
  const removeEntry = (key: string): number => {
    const row = findRow(key, (rowid) => selectKeySize.get(rowid));
    return row ? totalBytes - dropRow(key, row.id) : totalBytes;
  };
  const setEntry = (record: CacheRecord, size: number, at: number): number => {
    pendingTouches.delete(record.key);
    const value = packValue(record.value);
    // A new key (a miss's answer, the usual case) is one insert at the table's end; a key stored before is
    // updated in place.
    const before = findRow(record.key, (rowid) => selectKeySize.get(rowid));
    let previous = 0;
    let rowid: number;
    if (before === undefined) {
      rowid = Number(insert.run(record.key, value, record.createdAt, record.expiresAt, at, size).lastInsertRowid);
      rowIndex.add(record.key, rowid);
    } else {
      previous = before.size;
      rowid = before.id;
      update.run(value, record.createdAt, record.expiresAt, at, size, rowid);
    }
    // Not kept in memory here: the hot copies are of entries read (hits); a burst of new answers (a thousand
    // long streams) would otherwise push them out and hold every new answer twice.
    const bytes = totalBytes - previous + size;
    if (bytes <= maxBytes) return bytes;
    flushTouches();
    return evict(rowid, at, bytes);
  };

  /**
   * Replaced, not cleared, at each commit: V8's Map#clear leaves the old hash table pointing at every record
   * it held (for iterators still on it), and once V8 has moved that table to its old generation, those
   * records, each an answer's whole text, stay alive until a full collection (measured: ~6 KB a streamed miss
   * moved to the old generation, see docs/benchmarks.md).
   */
  let pendingSets = new Map<string, CacheRecord>();
  /** characters of the pending sets' values */
  let pendingChars = 0;
  let setWaiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  // Sets are committed together, in a quiet moment (see quiet-timer.ts); reads see them at once meanwhile.
  const quiet = createQuietTimer(commitSets);

  function storeOne(record: CacheRecord, at: number): void {
    const size = entrySize(record.key, record.value);
    // An already expired record, or one that can never fit, is not stored; it still replaces (removes)
    // the previous entry, which would otherwise be served although the caller superseded it.
    hot.delete(record.key);
    if (record.expiresAt <= at || size > maxBytes) totalBytes = removeEntry(record.key);
    else totalBytes = setEntry(record, size, at);
  }
  const storeAll = db.transaction((records: CacheRecord[], at: number) => {
    for (const record of records) storeOne(record, at);
  });

  function commitSets(): void {
    quiet.cancel();
    const records = [...pendingSets.values()];
    const waiters = setWaiters;
    pendingSets = new Map();
    pendingChars = 0;
    setWaiters = [];
    const before = totalBytes;
    try {
      storeAll(records, now());
      for (const w of waiters) w.resolve();
    } catch (err) {
      totalBytes = before; // the transaction rolled back: nothing of it may stay in memory either
      for (const r of records) hot.delete(r.key);
      try {
        indexRows(); // the rows it inserted or evicted are as they were
      } catch {
        // the file fails reads too: the index keeps what it had, and every read through it checks the key
      }
      const e = unavailable(err);
      for (const w of waiters) w.reject(e);
    }
  }

  function remember(record: CacheRecord): void {
    if (record.key.length + record.value.length <= hot.maxSize) hot.set(record.key, record);
  }

  function touched(key: string, at: number): void {
    pendingTouches.set(key, at);
    if (!touchTimer) {
      touchTimer = setTimeout(() => run(flushTouches).catch(() => undefined), TOUCH_FLUSH_MS);
      touchTimer.unref();
    }
  }

  async function run<T>(fn: () => T): Promise<T> {
    try {
      // A call after close fails as SQLite would, also one that the indexes in memory could answer.
      if (!db.open) throw new TypeError('The database connection is not open');
      return fn();
    } catch (err) {
      throw unavailable(err);
    }
  }

  /** run, for the calls that find rows by key (not on a store opened for export only) */
  async function byKey<T>(fn: () => T): Promise<T> {
    try {
      if (opts.exportOnly) throw new TypeError('this cache store was opened for export only');
      if (!db.open) throw new TypeError('The database connection is not open');
      return fn();
    } catch (err) {
      throw unavailable(err);
    }
  }

  return {
    kind: 'sqlite',
    readsInProcess: true,
    // set() puts the record among the pending sets before it returns; get() reads those first
    setsSeenAtOnce: true,

    get: (key) =>
      byKey(() => {
        const queued = pendingSets.get(key);
        if (queued) return queued.expiresAt > now() ? { ...queued } : undefined;
        const at = now();
        const known = hot.get(key);
        if (known && known.expiresAt > at) {
          touched(key, at);
          return { ...known };
        }
        hot.delete(key);
        const row = findRow(key, (rowid) => selectRow.get(rowid));
        if (row === undefined) return undefined;
        if (row.expires_at <= at) {
          const size = deleteIfExpired.get(row.id, at);
          if (size !== undefined) {
            totalBytes -= size;
            rowIndex.remove(key, row.id);
          }
          return undefined;
        }
        touched(key, at);
        const record = toRecord(row);
        remember(record);
        return { ...record };
      }),

    set(record) {
      if (opts.exportOnly) return byKey(() => undefined);
      // Writes are grouped: the sets of a burst commit in one transaction (a commit is what a set costs:
      // its WAL frames and locks; the rows are small). Reads see the pending ones meanwhile.
      return new Promise<void>((resolve, reject) => {
        pendingChars += record.value.length - (pendingSets.get(record.key)?.value.length ?? 0);
        pendingSets.set(record.key, record);
        setWaiters.push({ resolve, reject });
        if (pendingSets.size >= SET_BATCH_MAX || pendingChars >= SET_BATCH_CHARS) commitSets();
        else quiet.poke();
      });
    },

    delete: (key) =>
      byKey(() => {
        pendingChars -= pendingSets.get(key)?.value.length ?? 0;
        const queued = pendingSets.delete(key);
        hot.delete(key);
        const row = findRow(key, (rowid) => selectKeySize.get(rowid));
        if (row === undefined) return queued;
        totalBytes -= dropRow(key, row.id);
        return true;
      }),

    async *entries(): AsyncIterable<CacheRecord> {
      let after = 0;
      for (;;) {
        const rows = await run(() => selectPage.all(after, now(), pageSize));
        for (const row of rows) yield toRecord(row);
        const last = rows.at(-1);
        if (last === undefined || rows.length < pageSize) return;
        after = last.id;
      }
    },

    stats: () => run((): CacheStoreStats => ({ entries: countAll.get() ?? 0, bytes: totalBytes })),

    ping: () =>
      run(() => {
        selectPing.get();
      }),

    releaseMemory() {
      // The connection's page cache (up to 2 MB, SQLite's default) stays allocated once a burst filled it;
      // an idle relay gives it back, and the next reads take their pages from the OS's file cache again.
      try {
        if (db.open) db.pragma('shrink_memory');
      } catch {
        // best effort: a busy or failing database keeps its cache
      }
    },

    async close() {
      if (!db.open) return; // closing again does nothing
      try {
        if (setWaiters.length > 0) commitSets();
        flushTouches();
        hot.clear();
        db.close();
      } catch (err) {
        throw unavailable(err);
      }
    },
  };
}
