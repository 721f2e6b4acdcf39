// A reports table written by an earlier relay (without the stats columns) is upgraded at start-up, and
// its rows count in the stats (the proxied stream that broke among the errors).
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresReportStore } from '../../src/storage/postgres-report-store.js';
import type { ReportStore, StoredReport } from '../../src/storage/report-store.js';
import { createReportPruner } from '../../src/storage/report-pruner.js';
import { createSqliteReportStore } from '../../src/storage/sqlite-report-store.js';
import { Database } from '../../src/storage/sqlite-driver.js';
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

/** A report as the relay before the body store kept it: bodies inline in the row's JSON. */
const INLINE_ROW: StoredReport = {
  id: 'inline-1',
  receivedAt: '2026-01-10T00:00:00.000Z',
  metadata: { environment: 'prod', client: 'old-relay' },
  request: { timestamp: '2026-01-10T00:00:00.000Z', body: { model: 'gpt-4o', messages: [{ role: 'user', content: 'héllo' }] } },
  response: { timestamp: '2026-01-10T00:00:01.000Z', body: { id: 'c1', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' } }] } },
  properties: { team: 'a', n: 2 },
  durationMs: 1000,
  status: 200,
  model: 'gpt-4o',
  provider: 'openai',
  usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 },
  costUsd: 0.1,
  requestBytes: 80,
  responseBytes: 90,
  requestSha256: 'a'.repeat(64),
  responseSha256: 'b'.repeat(64),
  proxy: { method: 'POST', path: '/v1/chat/completions', cacheStatus: 'MISS', outcome: 'complete' },
};

/** An older store opens, reads, filters, takes new reports beside the old ones, and prunes them too. */
async function checkUpgraded(store: ReportStore): Promise<void> {
  expect(await store.get('inline-1')).toEqual(INLINE_ROW);
  expect((await store.list({ limit: 10, properties: { n: '2' } })).items.map((r) => r.id)).toEqual(['inline-1']);
  const fresh = { ...INLINE_ROW, id: 'fresh-1', receivedAt: '2026-03-01T00:00:00.000Z' };
  await store.insertMany([fresh]);
  expect(await store.get('fresh-1')).toEqual(fresh);
  // Body retention strips the inline bodies too (received 2026-01-10, 40 days before the clock).
  const pruner = createReportPruner({
    store,
    reportRetentionMs: 0,
    bodyRetentionMs: 30 * 86_400_000,
    maxBytes: 0,
    measure: async () => 0,
    now: () => Date.parse('2026-02-19T00:00:00.000Z'),
  });
  await pruner.step();
  const { request, response, ...rest } = INLINE_ROW;
  expect(await store.get('inline-1')).toEqual({
    ...rest,
    request: { timestamp: request.timestamp },
    response: { timestamp: response.timestamp },
    bodiesExpired: true,
  });
  expect(await store.get('fresh-1')).toEqual(fresh);
}

describe('a store written before the body store', () => {
  it('sqlite: opens and reads it, and keeps working on it', async () => {
    const file = join(await tempDir(), 'reports.sqlite');
    const old = new Database(file);
    old.pragma('journal_mode = WAL');
    old.exec(`CREATE TABLE reports (id TEXT PRIMARY KEY, request_ms INTEGER NOT NULL, environment TEXT, prompt_id TEXT,
      client TEXT, model TEXT, status INTEGER, cache_hit INTEGER, duration_ms REAL, input_tokens INTEGER NOT NULL DEFAULT 0,
      output_tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL, cost_saved_usd REAL, outcome TEXT, data TEXT NOT NULL);
      CREATE INDEX reports_request_ms_id ON reports (request_ms DESC, id DESC);`);
    old
      .prepare('INSERT INTO reports VALUES (?, ?, ?, NULL, ?, ?, 200, NULL, 1000, 1, 1, 0.1, NULL, ?, ?)')
      .run('inline-1', Date.parse('2026-01-10'), 'prod', 'old-relay', 'gpt-4o', 'complete', JSON.stringify(INLINE_ROW));
    old.close();
    const store = createSqliteReportStore({ file });
    try {
      await checkUpgraded(store);
    } finally {
      await store.close();
    }
  });

  describe('postgres', () => {
    const schema = `t_prebody_${process.pid}_${Date.now()}`;
    afterAll(async () => {
      const c = new pg.Client({ connectionString: DATABASE_URL });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await c.end();
    });

    it('opens and reads it, and keeps working on it', async () => {
      await requirePostgres();
      const c = new pg.Client({ connectionString: DATABASE_URL });
      await c.connect();
      await c.query(`CREATE SCHEMA "${schema}"`);
      await c.query(`CREATE TABLE "${schema}".reports (id TEXT COLLATE "C" PRIMARY KEY, request_ms BIGINT NOT NULL, environment TEXT,
        prompt_id TEXT, client TEXT, model TEXT, status INTEGER, cache_hit BOOLEAN, duration_ms DOUBLE PRECISION,
        input_tokens BIGINT NOT NULL DEFAULT 0, output_tokens BIGINT NOT NULL DEFAULT 0, cost_usd DOUBLE PRECISION,
        cost_saved_usd DOUBLE PRECISION, outcome TEXT, data JSONB NOT NULL)`);
      await c.query(
        `INSERT INTO "${schema}".reports VALUES ('inline-1', $1, 'prod', NULL, 'old-relay', 'gpt-4o', 200, NULL, 1000, 1, 1, 0.1, NULL, 'complete', $2)`,
        [Date.parse('2026-01-10'), INLINE_ROW],
      );
      await c.end();
      const store = await createPostgresReportStore({ connectionString: DATABASE_URL, schema });
      try {
        await checkUpgraded(store);
      } finally {
        await store.close();
      }
    });
  });
});
