// A relay started on the data dir of an earlier version rewrites its SQLite files into this version's layout
// before it listens, says so in its log first (the start pauses for seconds on a large file), and then
// serves what the files held. A second start has nothing to rewrite and says nothing.
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteReportStore } from '../../src/storage/sqlite-report-store.js';
import { Database } from '../../src/storage/sqlite-driver.js';
import { makeReport } from '../contract/report-fixtures.js';
import { get, startRelay, tempDir } from '../helpers/relay.js';

const dirs: string[] = [];
afterAll(async () => {
  const { rm } = await import('node:fs/promises');
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

const rewrites = (logs: string[]): Record<string, unknown>[] =>
  logs
    .flatMap((chunk) => chunk.split('\n').filter(Boolean))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => String(line.msg).includes("rewritten into this version's layout"));

describe('a data dir of an earlier relay', () => {
  it('is rewritten once, with a warning before, and its reports are served', async () => {
    const dataDir = await tempDir('llm-relay-upgrade-');
    dirs.push(dataDir);
    const file = join(dataDir, 'reports.sqlite');
    const report = makeReport('old-report', 0, {
      request: { timestamp: '2026-01-01T00:00:00.000Z', body: { model: 'gpt-4o', messages: [{ role: 'user', content: 'a question long enough to be a blob of its own' }] } },
    });
    const store = createSqliteReportStore({ file });
    await store.insertMany([report]);
    await store.close();
    // The layouts the earlier relay wrote: blobs keyed by their hash, cache entries by their key.
    const db = new Database(file);
    db.exec(`
      CREATE TABLE bodies_old (hash BLOB PRIMARY KEY, last_ms INTEGER NOT NULL, data BLOB NOT NULL);
      INSERT INTO bodies_old SELECT hash, last_ms, data FROM bodies;
      DROP TABLE bodies; DROP TABLE body_hashes; DROP TABLE body_index;
      ALTER TABLE bodies_old RENAME TO bodies;
    `);
    db.close();
    const cache = new Database(join(dataDir, 'cache.sqlite'));
    cache.exec(`CREATE TABLE cache_entries (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL, last_access INTEGER NOT NULL, size INTEGER NOT NULL)`);
    cache.close();

    const relay = await startRelay({ dataDir, cacheUrl: 'sqlite' });
    try {
      const notices = rewrites(relay.logs);
      expect(notices.map((n) => n.level)).toEqual([40, 40]);
      expect(notices.map((n) => n.msg)).toEqual([
        `the entries of ${join(dataDir, 'cache.sqlite')} are rewritten into this version's layout, once: the relay starts when it is done (a few seconds for hundreds of MB)`,
        `the body blobs of ${file} are rewritten into this version's layout, once: the relay starts when it is done (a few seconds for hundreds of MB)`,
      ]);
      const got = await get(`${relay.url}/api/reporting/v2/requests/old-report`);
      expect(got.status).toBe(200);
      expect(got.body).toEqual(report);
    } finally {
      await relay.close();
    }
    const again = await startRelay({ dataDir, cacheUrl: 'sqlite' });
    try {
      expect(rewrites(again.logs)).toEqual([]);
      expect((await get(`${again.url}/api/reporting/v2/requests/old-report`)).body).toEqual(report);
    } finally {
      await again.close();
    }
  });
});
