// How the SQLite report store finds a body blob by its hash without an index entry written per blob.
//
// Hashes are random: an index on them (the table's PRIMARY KEY, as it was) takes each new blob to a random
// leaf, so every commit wrote a page of that index for nearly every new blob — measured in the store alone,
// 12-24 µs of a report with two new bodies (the page in the WAL, its checksum, its write again at the
// checkpoint). Now `bodies` only grows at its end (its id is AUTOINCREMENT: never reused), and the hash
// index, `body_hashes`, is written in bulk: the blobs after `body_index.through` (the tail) are found
// through a map in memory, and once the tail holds MERGE_AT blobs they go into `body_hashes` in hash order,
// which writes each leaf once for all the blobs that land on it. The merge goes MERGE_SLICE blobs with each
// batch the writer commits (in a large file a whole merge would hold the worker for a tenth of a second and
// more, and the direct API's 201s with it), and `through` moves once the last slice is in.
//
// Each connection keeps its own map of the tail and brings it up to date from the file before it looks
// (one query that finds nothing new, most of the time): the report worker's connection writes, the event
// loop's only reads. Invariant, for what a connection has looked at: a blob with id ≤ through is in
// `body_hashes` (a merge moves `through` in the transaction that writes the entries), and a blob with
// through < id ≤ seen is in the map. Ids are never reused, so a map entry can only be stale by naming a
// row the sweep deleted, and then the row is simply not found.
import type BetterSqlite3 from 'better-sqlite3';
import type { Database } from './sqlite-driver.js';

type Statement<P extends unknown[], R> = BetterSqlite3.Statement<P, R>;

/** Blobs in the tail before a merge into the hash index starts: a map of ~2 MB (a merge takes a few batches more). */
export const MERGE_AT = 16_384;
/** Blobs a batch merges into the hash index while a merge is under way. */
export const MERGE_SLICE = 2048;

/** The tables, for a new file (and what an old one is rewritten into: see upgradeBodies). */
export const BLOB_TABLES = `
  CREATE TABLE IF NOT EXISTS bodies (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    hash BLOB NOT NULL,
    last_ms INTEGER NOT NULL,
    data BLOB NOT NULL
  );
  CREATE TABLE IF NOT EXISTS body_hashes (hash BLOB PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS body_index (one INTEGER PRIMARY KEY CHECK (one = 1), through INTEGER NOT NULL);
  INSERT OR IGNORE INTO body_index (one, through) VALUES (1, 0);
`;

/**
 * A file of an earlier relay keeps its blobs in `bodies (hash BLOB PRIMARY KEY, …)`: rewritten once into the
 * layout above, every blob indexed (one transaction; the first relay that opens the file does it: ~1 s for
 * 300,000 blobs here). `starting` is told before the rewrite starts.
 */
export function upgradeBodies(db: Database, starting?: () => void): void {
  const columns = (): string[] => (db.pragma('table_info(bodies)') as { name: string }[]).map((c) => c.name);
  if (columns().includes('id')) return;
  db.transaction(() => {
    // (looked at again inside the transaction: the other thread's connection may have done it meanwhile)
    if (columns().includes('id')) return;
    starting?.();
    db.exec('ALTER TABLE bodies RENAME TO bodies_before');
    db.exec(BLOB_TABLES);
    db.exec(`
      INSERT INTO bodies (hash, last_ms, data) SELECT hash, last_ms, data FROM bodies_before ORDER BY rowid;
      DROP TABLE bodies_before;
      INSERT INTO body_hashes (hash, id) SELECT hash, id FROM bodies ORDER BY hash;
      UPDATE body_index SET through = (SELECT coalesce(max(id), 0) FROM bodies);
    `);
  }).immediate();
}

export interface BlobIndex {
  /** Brings the map of the tail up to date with the file. */
  refresh(): void;
  /** The id of the blob with this hash, or undefined (call refresh first). */
  idOf(hash: Buffer, hex: string): number | undefined;
  /** A blob this connection inserted. */
  added(hex: string, id: number): void;
  /**
   * Inside the writing transaction: once the tail is MERGE_AT long, merges the next slice of it into the hash
   * index (a merge takes a few batches).
   */
  mergeIfDue(): void;
  /** What the map says may not be what the file holds (a transaction rolled back): read it again. */
  reset(): void;
}

export function createBlobIndex(db: Database, mergeAt = MERGE_AT, mergeSlice = MERGE_SLICE): BlobIndex {
  const selectThrough: Statement<[], { through: number }> = db.prepare('SELECT through FROM body_index WHERE one = 1');
  const selectTail: Statement<[number], { id: number; hash: Buffer }> = db.prepare('SELECT id, hash FROM bodies WHERE id > ? ORDER BY id');
  const selectIndexed: Statement<[Buffer], { id: number }> = db.prepare('SELECT id FROM body_hashes WHERE hash = ?');
  // (a blob the sweep took since the merge started is not indexed: only a row that is still there)
  const indexOne = db.prepare('INSERT OR IGNORE INTO body_hashes (hash, id) SELECT hash, id FROM bodies WHERE id = ? AND hash = ?');
  const setThrough = db.prepare('UPDATE body_index SET through = ? WHERE one = 1 AND through < ?');

  const tail = new Map<string, number>();
  let through = 0;
  let seen = 0;
  /** the merge under way: the tail up to `upTo` in hash order, merged up to `at` */
  let merging: { upTo: number; blobs: [hex: string, id: number][]; at: number } | undefined;

  return {
    refresh() {
      const now = selectThrough.get()?.through ?? 0;
      if (now > through) {
        for (const [hex, id] of tail) if (id <= now) tail.delete(hex);
        through = now;
        if (seen < now) seen = now;
      }
      for (const row of selectTail.iterate(seen)) {
        tail.set(row.hash.toString('hex'), row.id);
        seen = row.id;
      }
    },

    idOf(hash, hex) {
      return tail.get(hex) ?? selectIndexed.get(hash)?.id;
    },

    added(hex, id) {
      tail.set(hex, id);
      if (id > seen) seen = id;
    },

    mergeIfDue() {
      if (!merging) {
        if (tail.size < mergeAt) return;
        // Every blob of the tail up to `seen` is in the map (refresh), each hash once: in hash order.
        const blobs = [...tail].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
        merging = { upTo: seen, blobs, at: 0 };
      }
      const m = merging;
      const end = Math.min(m.at + mergeSlice, m.blobs.length);
      for (let i = m.at; i < end; i++) indexOne.run(m.blobs[i]![1], Buffer.from(m.blobs[i]![0], 'hex'));
      m.at = end;
      if (end < m.blobs.length) return;
      setThrough.run(m.upTo, m.upTo);
      merging = undefined;
      // (the transaction may still roll back: its caller resets all this then)
      through = m.upTo;
      for (const [hex, id] of tail) if (id <= through) tail.delete(hex);
    },

    reset() {
      tail.clear();
      through = 0;
      seen = 0;
      merging = undefined;
    },
  };
}
