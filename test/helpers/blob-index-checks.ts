// What a SQLite report file's blob index (src/storage/sqlite-blob-index.ts) must hold whatever happened to it,
// read from a connection of the test's own: for the blob index's contract tests and the merge crash test.
import { sqliteRows } from './report-stores.js';

export const count = async (f: string, sql: string): Promise<number> => Number((await sqliteRows(f, sql))[0]!.n);
export const blobs = (f: string): Promise<number> => count(f, 'SELECT count(*) AS n FROM bodies');
/** index entries that name no row, or a row of another hash */
export const dangling = (f: string): Promise<number> =>
  count(f, 'SELECT count(*) AS n FROM body_hashes h LEFT JOIN bodies b ON b.id = h.id AND b.hash = h.hash WHERE b.id IS NULL');
/** the last blob id the finished merges cover */
export const through = (f: string): Promise<number> => count(f, 'SELECT through AS n FROM body_index');
/** blobs up to `through` that the hash index does not name (none, whatever happened) */
export const unindexed = (f: string): Promise<number> =>
  count(
    f,
    'SELECT count(*) AS n FROM bodies b WHERE b.id <= (SELECT through FROM body_index) AND NOT EXISTS (SELECT 1 FROM body_hashes h WHERE h.hash = b.hash AND h.id = b.id)',
  );
/** index entries past `through`: a merge under way */
export const mergedAhead = (f: string): Promise<number> => count(f, 'SELECT count(*) AS n FROM body_hashes WHERE id > (SELECT through FROM body_index)');
