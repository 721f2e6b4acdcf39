// Runs the report store contract against SQLite (a temp file) and a real PostgreSQL, each test in a fresh
// store: a new file, or a new schema dropped at the end. PostgreSQL is required, never skipped.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import { createPostgresReportStore } from '../../src/storage/postgres-report-store.js';
import type { StoredReport } from '../../src/storage/report-store.js';
import { createSqliteReportStore } from '../../src/storage/sqlite-report-store.js';
import { reportStoreSuite } from './report-store-suite.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const START_HINT =
  'Start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start ' +
  '(or point DATABASE_URL at a reachable server)';

function redacted(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'DATABASE_URL';
  }
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'llm-relay-reports-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

let fileNo = 0;
// A subdirectory that does not exist yet: the store creates its parent directory.
const sqliteFile = (): string => join(dir, `store-${++fileNo}`, 'reports.db');

function sampleReport(id: string): StoredReport {
  const at = '2025-03-01T12:00:00.000Z';
  return {
    id,
    receivedAt: at,
    request: { timestamp: at, body: { q: 'é' } },
    response: { timestamp: at },
    durationMs: 5,
    status: 200,
    model: 'gpt-4o',
    provider: 'openai',
    usage: null,
    costUsd: null,
    requestBytes: 10,
    responseBytes: 0,
  };
}

describe('sqlite', () => {
  reportStoreSuite('sqlite', async () => createSqliteReportStore({ file: sqliteFile() }));

  it('keeps reports across close and reopen', async () => {
    const file = sqliteFile();
    const first = createSqliteReportStore({ file });
    await first.insertMany([sampleReport('kept')]);
    await first.close();
    const again = createSqliteReportStore({ file });
    try {
      expect(await again.get('kept')).toEqual(sampleReport('kept'));
      expect(await again.count()).toBe(1);
    } finally {
      await again.close();
    }
  });
});

describe('postgres', () => {
  const schemas: string[] = [];
  let schemaNo = 0;
  const freshSchema = (): string => {
    const schema = `t_${process.pid}_${Date.now()}_${++schemaNo}`;
    schemas.push(schema);
    return schema;
  };

  const withClient = async <T>(fn: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 3000 });
    try {
      await client.connect();
    } catch (err) {
      await client.end().catch(() => {});
      throw new Error(`PostgreSQL at ${redacted(DATABASE_URL)} is not reachable (${String(err)}). ${START_HINT}`);
    }
    try {
      return await fn(client);
    } finally {
      await client.end();
    }
  };

  // Each test that needs PostgreSQL fails (never skips) when it is down, with the command that starts it.
  const makeStore = async (schema = freshSchema()) => {
    try {
      return await createPostgresReportStore({ connectionString: DATABASE_URL, schema });
    } catch (err) {
      throw new Error(`${(err as Error).message}. ${START_HINT}`, { cause: err });
    }
  };

  afterAll(async () => {
    if (schemas.length === 0) return;
    await withClient(async (client) => {
      for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    }).catch((err: unknown) => {
      // Unreachable: every test needing it has already failed with the start command, and nothing was created.
      if (!String(err).includes(START_HINT)) throw err;
    });
  });

  reportStoreSuite('postgres', () => makeStore());

  it('lets several relay instances start on the same new schema at once', async () => {
    const schema = freshSchema();
    const stores = await Promise.all([1, 2, 3, 4].map(() => makeStore(schema)));
    try {
      await stores[0]?.insertMany([sampleReport('shared')]);
      for (const store of stores) expect(await store.get('shared')).toEqual(sampleReport('shared'));
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('survives PostgreSQL dropping its connections and answers again', async () => {
    const schema = freshSchema();
    const store = await makeStore(schema);
    try {
      // count() leaves this store's connection idle with a query naming the schema, so only it is dropped.
      await store.count();
      const killed = await withClient((client) =>
        client.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE pid <> pg_backend_pid() AND query LIKE $1`,
          [`%"${schema}"%`],
        ),
      );
      expect(killed.rowCount).toBeGreaterThan(0);
      // Give the pool time to see the dropped connection (an 'error' event that must not crash us).
      await new Promise((resolve) => setTimeout(resolve, 200));
      await expect(store.ping()).resolves.toBeUndefined();
      expect(await store.count()).toBe(0);
    } finally {
      await store.close();
    }
  });

  it('rejects quickly with StoreUnavailableError when nothing listens, naming host:port', async () => {
    const started = Date.now();
    const err = await createPostgresReportStore({ connectionString: 'postgres://postgres@127.0.0.1:1/test' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as StoreUnavailableError).store).toBe('reports');
    expect((err as Error).message).toContain('PostgreSQL at 127.0.0.1:1 is unreachable');
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('never puts the password of the connection string in the error', async () => {
    const err = await createPostgresReportStore({
      connectionString: 'postgres://u:secretpw@127.0.0.1:1/x',
      connectTimeoutMs: 1000,
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as Error).message).toContain('127.0.0.1:1');
    expect((err as Error).message).not.toContain('secretpw');
    expect(String((err as Error).stack)).not.toContain('secretpw');
  });

  it('refuses a schema name that is not a plain identifier', async () => {
    await expect(
      createPostgresReportStore({ connectionString: DATABASE_URL, schema: 'x"; DROP TABLE y; --' }),
    ).rejects.toThrow(/schema name/);
  });
});
