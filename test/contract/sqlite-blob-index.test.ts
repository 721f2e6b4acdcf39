// The SQLite report store's blobs are found through a map of the table's tail and a hash index written in
// bulk (src/storage/sqlite-blob-index.ts). With a small merge threshold: every report reads back deep-equal
// from the writing connection and from a reading one, across merges; a blob stored already is never stored
// again; a batch that rolls back leaves nothing that names the wrong row; the sweep takes the index's
// entries with the blobs; a file of an earlier relay (its hash as PRIMARY KEY) is rewritten once and reads
// the same. Real SQLite; no body is kept in its row (bodyInlineBelow 0), so every body here is blobs.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ReportStore, StoredReport } from '../../src/storage/report-store.js';
import { createSqliteReportStore } from '../../src/storage/sqlite-report-store.js';
import { Database } from '../../src/storage/sqlite-driver.js';
import { blobs, count, dangling, through, unindexed } from '../helpers/blob-index-checks.js';
import { missingBlobs, sqliteRows } from '../helpers/report-stores.js';
import { tempDir } from '../helpers/relay.js';
import { makeReport } from './report-fixtures.js';

const DAY = 86_400_000;
const D = Date.parse('2025-01-01T00:00:00.000Z');
const SYSTEM = { role: 'system', content: 'Shared by every conversation. '.repeat(20) };

/** A report with a shared system prompt and a user message and answer of its own (four blobs of its own). */
function reportAt(id: string, days = 0, own = `the question of ${id}, long enough for a blob of its own`): StoredReport {
  const at = new Date(D + days * DAY).toISOString();
  return makeReport(id, 0, {
    receivedAt: at,
    request: { timestamp: at, body: { model: 'gpt-4o', messages: [SYSTEM, { role: 'user', content: own }] } },
    response: { timestamp: at, body: { id: `c-${id}`, choices: [{ index: 0, message: { role: 'assistant', content: `answer to ${own}` } }] } },
  });
}

async function file(): Promise<string> {
  return join(await tempDir('llm-relay-blob-index-'), 'reports.sqlite');
}

async function expectAll(store: ReportStore, sent: StoredReport[]): Promise<void> {
  for (const report of sent) expect(await store.get(report.id)).toEqual(report);
  const listed = (await store.list({ limit: 1000 })).items;
  expect(listed).toHaveLength(sent.length);
  for (const report of listed) expect(report).toEqual(sent.find((r) => r.id === report.id));
}

/** A connection opened now (its map built from the file) reads every report as sent; no blob is missing. */
async function expectFromAFreshConnection(f: string, sent: StoredReport[]): Promise<void> {
  const late = createSqliteReportStore({ file: f, bodyInlineBelow: 0 });
  try {
    for (const report of sent) expect(await late.get(report.id)).toEqual(report);
  } finally {
    await late.close();
  }
  expect(await missingBlobs({ rows: (sql) => sqliteRows(f, sql) })).toEqual([]);
}

describe('sqlite blob index', () => {
  it('finds every blob from the writing and a reading connection, across merges, and stores none twice', async () => {
    const f = await file();
    const writer = createSqliteReportStore({ file: f, bodyInlineBelow: 0, blobMergeAt: 5 });
    const reader = createSqliteReportStore({ file: f, bodyInlineBelow: 0, blobMergeAt: 5 });
    try {
      const sent: StoredReport[] = [];
      for (let i = 0; i < 12; i += 2) {
        const batch = [reportAt(`r${i}`), reportAt(`r${i + 1}`)];
        sent.push(...batch);
        await writer.insertMany(batch);
        // the reader looks between the writer's batches: its map follows the tail and the merges
        await expectAll(reader, sent);
      }
      // 12 reports of 4 blobs each, and the system prompt they share
      expect(await blobs(f)).toBe(12 * 4 + 1);
      // merged more than once; every merged blob indexed, once, naming its own row
      const merged = await through(f);
      expect(merged).toBeGreaterThanOrEqual(40);
      expect(await count(f, 'SELECT count(*) AS n FROM body_hashes')).toBe(merged);
      expect(await dangling(f)).toBe(0);
      expect(await unindexed(f)).toBe(0);
      await expectAll(writer, sent);

      // A writer that remembers nothing finds bodies stored already, merged ones (r0's) and ones in the tail
      // (r11's), and stores none of them again: of each report below only its answer's skeleton is new.
      await writer.close();
      const fresh = createSqliteReportStore({ file: f, bodyInlineBelow: 0, blobMergeAt: 5 });
      const again = [reportAt('again-old', 0, 'the question of r0, long enough for a blob of its own'), reportAt('again-new', 0, 'the question of r11, long enough for a blob of its own')];
      try {
        await fresh.insertMany(again);
      } finally {
        await fresh.close();
      }
      expect(await blobs(f)).toBe(12 * 4 + 1 + 2);
      sent.push(...again);
      await expectAll(reader, sent);
      await expectFromAFreshConnection(f, sent);
    } finally {
      await reader.close();
      await writer.close();
    }
  });

  it('a batch that rolls back leaves nothing naming the wrong row', async () => {
    const f = await file();
    const store = createSqliteReportStore({ file: f, bodyInlineBelow: 0, blobMergeAt: 1000 });
    try {
      await store.insertMany([reportAt('first')]);
      // The next blob insert fails: the batch's report and the blobs it inserted before it roll back.
      let db = new Database(f);
      // (the first report's blobs are ids 1-5; the next report's own four would be 6-9)
      db.exec("CREATE TRIGGER boom AFTER INSERT ON bodies WHEN NEW.id >= 8 BEGIN SELECT RAISE(ABORT, 'boom'); END");
      db.close();
      const lost = reportAt('lost');
      await expect(store.insertMany([lost])).rejects.toThrow(/boom/);
      db = new Database(f);
      db.exec('DROP TRIGGER boom');
      db.close();
      expect(await blobs(f)).toBe(5);
      // Another report takes the ids the rolled-back blobs had; then the lost one's bodies come again.
      const other = reportAt('other');
      await store.insertMany([other]);
      await store.insertMany([lost]);
      await expectAll(store, [reportAt('first'), other, lost]);
      expect(await blobs(f)).toBe(3 * 4 + 1);
      expect(await missingBlobs({ rows: (sql) => sqliteRows(f, sql) })).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('the sweep takes the index entries with the blobs', async () => {
    const f = await file();
    let clock = D;
    const store = createSqliteReportStore({ file: f, bodyInlineBelow: 0, blobMergeAt: 3, now: () => clock });
    try {
      const keep: StoredReport[] = [];
      for (const [id, days] of [['a', 0], ['b', 1], ['c', 2], ['d', 40], ['e', 41]] as const) {
        clock = D + days * DAY;
        const report = reportAt(id, days);
        if (days > 30) keep.push(report);
        await store.insertMany([report]);
      }
      expect(await through(f)).toBeGreaterThan(0);
      clock = D + 45 * DAY;
      // bodies older than 30 days expire, two rows a step; their blobs are swept
      const step = { now: clock, reportsBefore: D - 90 * DAY, bodiesBefore: clock - 30 * DAY, trimOldest: 0, rows: 2 };
      for (let i = 0; (await store.prune!(step)).more; i++) if (i > 100) throw new Error('pruning never ended');
      // the three old reports' own blobs are gone, from the table and from the index
      expect(await blobs(f)).toBe(2 * 4 + 1);
      expect(await dangling(f)).toBe(0);
      for (const report of keep) expect(await store.get(report.id)).toEqual(report);
      expect((await store.get('a'))?.bodiesExpired).toBe(true);
      // a body of a swept blob comes back as a new one
      const back = reportAt('back', 45, 'the question of a, long enough for a blob of its own');
      await store.insertMany([back]);
      expect(await store.get('back')).toEqual(back);
    } finally {
      await store.close();
    }
  });

  it('a merge that takes several batches keeps every blob findable, with a sweep in the middle of it', async () => {
    const f = await file();
    let clock = D;
    // a merge from 3 blobs in the tail, one blob a batch: each merge spans several batches
    const writer = createSqliteReportStore({ file: f, bodyInlineBelow: 0, blobMergeAt: 3, blobMergeSlice: 1, now: () => clock });
    const reader = createSqliteReportStore({ file: f, bodyInlineBelow: 0 });
    try {
      const kept: StoredReport[] = [];
      for (const [id, days] of [['a', 0], ['b', 1], ['c', 2]] as const) {
        clock = D + days * DAY;
        await writer.insertMany([reportAt(id, days)]);
      }
      const mergedBefore = await through(f);
      // Under way: some of the tail indexed, `through` not yet moved past it. The old reports lose their bodies
      // and their blobs are swept, some in the index already, some only in the merge's list.
      expect(await count(f, 'SELECT count(*) AS n FROM body_hashes')).toBeGreaterThan(0);
      clock = D + 45 * DAY;
      const step = { now: clock, reportsBefore: D - 90 * DAY, bodiesBefore: clock - 30 * DAY, trimOldest: 0, rows: 10 };
      for (let i = 0; (await writer.prune!(step)).more; i++) if (i > 100) throw new Error('pruning never ended');
      // (the shared system prompt too: no report has bodies any more)
      expect(await blobs(f)).toBe(0);
      // a's question comes back (new rows for blobs the merge's list names by their old ids), and more reports
      // carry the merge to its end and start the next ones
      for (let i = 0; i < 8; i++) {
        const report = reportAt(i === 0 ? 'back' : `n${i}`, 45, i === 0 ? 'the question of a, long enough for a blob of its own' : undefined);
        kept.push(report);
        await writer.insertMany([report]);
        // (the old reports stay, without their bodies)
        for (const r of kept) expect(await reader.get(r.id)).toEqual(r);
        expect(await dangling(f)).toBe(0);
        expect(await unindexed(f)).toBe(0);
      }
      expect(await through(f)).toBeGreaterThan(mergedBefore);
      await expectFromAFreshConnection(f, kept);
    } finally {
      await reader.close();
      await writer.close();
    }
  });

  it('rewrites a file of an earlier relay (its hash as PRIMARY KEY) once, and reads it the same', async () => {
    const f = await file();
    const sent = [reportAt('x1'), reportAt('x2'), reportAt('x3')];
    const first = createSqliteReportStore({ file: f, bodyInlineBelow: 0 });
    await first.insertMany(sent);
    await first.close();
    // The layout an earlier relay wrote: the same rows in `bodies (hash BLOB PRIMARY KEY, last_ms, data)`.
    let db = new Database(f);
    db.exec(`
      CREATE TABLE bodies_old (hash BLOB PRIMARY KEY, last_ms INTEGER NOT NULL, data BLOB NOT NULL);
      INSERT INTO bodies_old SELECT hash, last_ms, data FROM bodies ORDER BY hash;
      DROP TABLE bodies; DROP TABLE body_hashes; DROP TABLE body_index;
      ALTER TABLE bodies_old RENAME TO bodies;
    `);
    db.close();
    const notices: string[] = [];
    const store = createSqliteReportStore({ file: f, bodyInlineBelow: 0, blobMergeAt: 4, onUpgrade: (what) => notices.push(what) });
    try {
      expect(notices).toEqual([`the body blobs of ${f} are rewritten into this version's layout, once`]);
      await expectAll(store, sent);
      expect(await blobs(f)).toBe(3 * 4 + 1);
      expect(await through(f)).toBe(3 * 4 + 1);
      expect(await count(f, 'SELECT count(*) AS n FROM body_hashes')).toBe(3 * 4 + 1);
      expect(await dangling(f)).toBe(0);
      // it keeps working: a body it has is found in the index, a new one goes into the tail
      const more = reportAt('x4', 0, 'the question of x1, long enough for a blob of its own');
      await store.insertMany([more]);
      expect(await blobs(f)).toBe(3 * 4 + 1 + 1);
      await expectAll(store, [...sent, more]);
    } finally {
      await store.close();
    }
    // opened again: nothing to rewrite
    await createSqliteReportStore({ file: f, bodyInlineBelow: 0, onUpgrade: (what) => notices.push(what) }).close();
    expect(notices).toHaveLength(1);
    db = new Database(f);
    const columns = (db.pragma('table_info(bodies)') as { name: string }[]).map((c) => c.name);
    db.close();
    expect(columns).toEqual(['id', 'hash', 'last_ms', 'data']);
  });
});
