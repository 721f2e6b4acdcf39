// A reports table written by an earlier relay (without the stats columns) is upgraded at start-up, and
// its rows count in the stats (the proxied stream that broke among the errors).
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresReportStore } from '../../src/storage/postgres-report-store.js';
import { createSqliteReportStore } from '../../src/storage/sqlite-report-store.js';
import { tempDir } from '../helpers/relay.js';
import { DATABASE_URL, requirePostgres } from '../helpers/servers.js';

const OLD_ROW = {
  id: 'old-1',
  receivedAt: '2024-01-01T00:00:00.000Z',
  request: { timestamp: '2024-01-01T00:00:00.000Z' },
  response: { timestamp: '2024-01-01T00:00:00.250Z' },
  durationMs: 250,
  status: 200,
  model: 'gpt-4o',
  provider: 'openai',
  usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
  costUsd: 0.5,
  requestBytes: 0,
  responseBytes: 0,
  proxy: { method: 'POST', path: '/v1/chat/completions', cacheStatus: 'MISS', outcome: 'stream-error' },
};

const expectedTotals = {
  requests: 1,
  cacheHits: 0,
  hitRatio: 0,
  inputTokens: 10,
  outputTokens: 5,
  costUsd: 0.5,
  costSavedUsd: 0,
  errors: 1,
  latencyMs: { p50: 250, p95: 250, p99: 250 },
};

describe('report store upgrade', () => {
  it('sqlite: adds and fills the missing columns', async () => {
    const file = join(await tempDir(), 'reports.sqlite');
    const old = new Database(file);
    old.exec(`CREATE TABLE reports (id TEXT PRIMARY KEY, request_ms INTEGER NOT NULL, environment TEXT, prompt_id TEXT,
      client TEXT, model TEXT, status INTEGER, cache_hit INTEGER, data TEXT NOT NULL)`);
    old.prepare('INSERT INTO reports VALUES (?, ?, NULL, NULL, NULL, ?, 200, NULL, ?)').run('old-1', Date.parse('2024-01-01'), 'gpt-4o', JSON.stringify(OLD_ROW));
    old.close();
    const store = createSqliteReportStore({ file });
    try {
      expect((await store.stats({})).totals).toEqual(expectedTotals);
      expect(await store.get('old-1')).toEqual(OLD_ROW);
    } finally {
      await store.close();
    }
  });

  describe('postgres', () => {
    const schema = `t_upgrade_${process.pid}_${Date.now()}`;
    afterAll(async () => {
      const c = new pg.Client({ connectionString: DATABASE_URL });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await c.end();
    });

    it('adds and fills the missing columns', async () => {
      await requirePostgres();
      const c = new pg.Client({ connectionString: DATABASE_URL });
      await c.connect();
      await c.query(`CREATE SCHEMA "${schema}"`);
      await c.query(`CREATE TABLE "${schema}".reports (id TEXT COLLATE "C" PRIMARY KEY, request_ms BIGINT NOT NULL, environment TEXT,
        prompt_id TEXT, client TEXT, model TEXT, status INTEGER, cache_hit BOOLEAN, data JSONB NOT NULL)`);
      await c.query(`INSERT INTO "${schema}".reports VALUES ('old-1', $1, NULL, NULL, NULL, 'gpt-4o', 200, NULL, $2)`, [Date.parse('2024-01-01'), OLD_ROW]);
      await c.end();
      const store = await createPostgresReportStore({ connectionString: DATABASE_URL, schema });
      try {
        expect((await store.stats({})).totals).toEqual(expectedTotals);
      } finally {
        await store.close();
      }
    });
  });
});
