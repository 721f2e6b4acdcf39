// Fresh report stores of both kinds for tests that run the same checks on each: a new SQLite file, or a
// new PostgreSQL schema of this process's own (dropped by dropSchemas), so parallel runs never collide.
import { join } from 'node:path';
import pg from 'pg';
import { childrenOf, unpackBlob } from '../../src/storage/body-codec.js';
import { createPostgresReportStore } from '../../src/storage/postgres-report-store.js';
import type { ReportStore } from '../../src/storage/report-store.js';
import { createSqliteReportStore } from '../../src/storage/sqlite-report-store.js';
import { tempDir } from './relay.js';
import { DATABASE_URL, requirePostgres } from './servers.js';

export interface StoreUnderTest {
  store: ReportStore;
  /** every row of a table, as SQL sees it */
  rows(sql: string): Promise<Record<string, unknown>[]>;
}

export type StoreKind = 'sqlite' | 'postgres';

const schemas: string[] = [];
let n = 0;

/** SQL on a SQLite file, from a connection of its own (beside a relay that has it open, or after it died). */
export async function sqliteRows(file: string, sql: string): Promise<Record<string, unknown>[]> {
  const { Database } = await import('../../src/storage/sqlite-driver.js');
  const db = new Database(file);
  try {
    return db.prepare(sql).all() as Record<string, unknown>[];
  } finally {
    db.close();
  }
}

export async function openStore(kind: StoreKind, now?: () => number, opts: { blobsOnly?: boolean } = {}): Promise<StoreUnderTest> {
  if (kind === 'sqlite') {
    const file = join(await tempDir('llm-relay-bodies-'), 'reports.sqlite');
    // (`blobsOnly`: no body kept in its row however short, as PostgreSQL does, for tests that count blobs)
    const store = createSqliteReportStore({ file, ...(now ? { now } : {}), ...(opts.blobsOnly ? { bodyInlineBelow: 0 } : {}) });
    return { store, rows: (sql) => sqliteRows(file, sql) };
  }
  await requirePostgres();
  const schema = `t_bodies_${process.pid}_${Date.now()}_${++n}`;
  schemas.push(schema);
  const store = await createPostgresReportStore({ connectionString: DATABASE_URL, schema, ...(now ? { now } : {}) });
  return {
    store,
    rows: (sql) =>
      onDatabase(DATABASE_URL, async (c) => {
        await c.query(`SET search_path TO "${schema}"`);
        return (await c.query(sql)).rows as Record<string, unknown>[];
      }),
  };
}

/** SQL on a PostgreSQL database, from a client of its own. */
export async function onDatabase<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Every row `sql` reads from the PostgreSQL database at `url`. */
export function databaseRows(url: string, sql: string): Promise<Record<string, unknown>[]> {
  return onDatabase(url, async (c) => (await c.query(sql)).rows as Record<string, unknown>[]);
}

const databases: string[] = [];

/**
 * The URL of a new PostgreSQL database of this process's own (dropped by dropDatabases): for a relay process,
 * whose report store takes the database's public schema.
 */
export async function freshDatabase(prefix: string): Promise<string> {
  await requirePostgres();
  const name = `${prefix}_${process.pid}_${Date.now()}_${++n}`;
  await onDatabase(DATABASE_URL, (c) => c.query(`CREATE DATABASE "${name}"`));
  databases.push(name);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  return url.href;
}

export async function dropDatabases(): Promise<void> {
  if (databases.length === 0) return;
  await onDatabase(DATABASE_URL, async (c) => {
    for (const db of databases.splice(0)) await c.query(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`);
  });
}

export async function dropSchemas(): Promise<void> {
  if (schemas.length === 0) return;
  await onDatabase(DATABASE_URL, async (c) => {
    for (const schema of schemas.splice(0)) await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });
}

/**
 * Blobs that a report with bodies names (directly, or through a skeleton) but the store does not hold.
 * Empty in a sound store, whatever happened to it.
 */
export async function missingBlobs(s: Pick<StoreUnderTest, 'rows'>): Promise<string[]> {
  const bodies = new Map<string, Buffer>();
  for (const row of await s.rows('SELECT hash, data FROM bodies')) bodies.set(Buffer.from(row.hash as Uint8Array).toString('hex'), unpackBlob(row.data as Buffer));
  const missing: string[] = [];
  const need = (hash: Buffer): void => {
    const hex = hash.toString('hex');
    const bytes = bodies.get(hex);
    if (!bytes) {
      missing.push(hex);
      return;
    }
    for (const child of childrenOf(bytes)) need(child);
  };
  // (a body kept in its row is text there and names no blob)
  for (const row of await s.rows('SELECT request_blob, response_blob FROM reports')) {
    for (const kept of [row.request_blob, row.response_blob]) if (kept && typeof kept !== 'string') need(Buffer.from(kept as Uint8Array));
  }
  return missing;
}
