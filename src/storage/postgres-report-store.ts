// The team report store: PostgreSQL through a `pg` pool, so several relay instances share one history.
// Same columns and list semantics as the SQLite store; the report is kept as JSONB without its bodies,
// which live once each in the content-addressed `bodies` table (body-store.ts) as exact bytes.
import pg from 'pg';
import { StoreUnavailableError } from '../errors.js';
import { type Hash, packBlob, unpackBlob } from './body-codec.js';
import { type BlobMap, type BodyRow, type PlannedReport, createBodyKeeper, restoreReports, sweepBefore } from './body-store.js';
import { buildListSql, pageFromRows, reportColumns } from './report-filters.js';
import { type StatsDialect, type StatsRow, buildStatsSql, statsResult } from './report-stats-sql.js';
import type { PruneResult, ReportStore } from './report-store.js';

export interface PostgresReportStoreOptions {
  connectionString: string;
  /** default `public` */
  schema?: string;
  /** default 10 */
  poolSize?: number;
  /** how long opening a connection may take, at start and later; default 3000 */
  connectTimeoutMs?: number;
  /** the clock of body writes (tests move it) */
  now?: () => number;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

const dialect: StatsDialect = {
  placeholder: (n) => `$${n}`,
  cacheHit: (value) => value,
  propertyEquals(name, value, bind) {
    // The name is a parameter, never SQL. `->>` gives a string's value and the text of a number or boolean;
    // null, objects and arrays are excluded so both stores match the same reports.
    const key = bind(name);
    return (
      `(jsonb_typeof(data->'properties'->${key}::text) IN ('string', 'number', 'boolean') ` +
      `AND data->'properties'->>${key}::text = ${bind(value)}::text)`
    );
  },
  hitTrue: 'cache_hit',
  // sum(bigint) is numeric, which cannot overflow; pg hands it over as text.
  sum: (column) => `sum(${column})`,
  utcDate: (epochSeconds) => `to_char(to_timestamp(${epochSeconds}) AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  // Bytewise, like SQLite, whatever the database's locale.
  keyOrder: 'k COLLATE "C"',
  percentiles: 'native',
};

interface ReadRow {
  data: object;
  request_blob: Buffer | null;
  response_blob: Buffer | null;
  bodies_expired: boolean;
}

interface ListRow extends ReadRow {
  request_ms: string;
  id: string;
}

const READ_COLUMNS = 'data, request_blob, response_blob, bodies_expired';

function bodyRow(row: ReadRow): BodyRow {
  return { data: row.data, request: row.request_blob, response: row.response_blob, expired: row.bodies_expired };
}

export async function createPostgresReportStore(opts: PostgresReportStoreOptions): Promise<ReportStore> {
  const schema = opts.schema ?? 'public';
  if (!SCHEMA_NAME.test(schema)) {
    throw new TypeError(`PostgreSQL schema name ${JSON.stringify(schema)} must match ${SCHEMA_NAME.source}`);
  }
  const table = `"${schema}".reports`;
  const bodiesTable = `"${schema}".bodies`;
  const now = opts.now ?? Date.now;
  // (no body kept inline: BYTEA columns hold the roots' hashes only, so every plan names blobs)
  const bodies = createBodyKeeper();
  const target = describeTarget(opts.connectionString);
  const fail = (action: string, err: unknown): StoreUnavailableError => {
    const message = `PostgreSQL report store could not ${action}: ${reasonOf(err)}`;
    return new StoreUnavailableError('reports', target.scrub(message), { cause: err });
  };

  const pool = new pg.Pool({
    connectionString: opts.connectionString,
    max: opts.poolSize ?? 10,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 3000,
    application_name: 'llm-relay',
  });
  // An idle connection that PostgreSQL drops (restart, failover, network) is reported here; unhandled it
  // would crash the process. The pool has already discarded that connection, and the next query opens a
  // new one or fails with StoreUnavailableError, which is where the outage is handled.
  pool.on('error', () => {});

  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    await pool.end().catch(() => {});
    throw new StoreUnavailableError(
      'reports',
      target.scrub(`PostgreSQL at ${target.address} is unreachable: ${reasonOf(err)}`),
      { cause: err },
    );
  }
  // A client taken from the pool has no 'error' listener of its own until it goes back: a connection that
  // drops between two of the statements below would otherwise throw from its 'error' event and take the
  // process (or the report worker) down. The failing statement rejects and is handled below.
  const ignore = (): void => {};
  client.on('error', ignore);
  try {
    await prepareSchema(client, schema, table, bodiesTable);
    client.off('error', ignore);
    client.release();
  } catch (err) {
    client.off('error', ignore);
    client.release(err instanceof Error ? err : true);
    await pool.end().catch(() => {});
    throw fail(`prepare ${table}`, err);
  }

  async function fetchBlobs(hashes: Hash[]): Promise<BlobMap> {
    const res = await pool.query<{ hash: Buffer; data: Buffer }>(
      `SELECT hash, data FROM ${bodiesTable} WHERE hash = ANY($1::bytea[])`,
      [hashes],
    );
    return new Map(res.rows.map((r) => [r.hash.toString('hex'), unpackBlob(r.data)]));
  }

  let closed = false;
  return {
    kind: 'postgres',

    async insertMany(reports) {
      if (reports.length === 0) return;
      // Rows in id order: concurrent batches that share ids then lock them in the same order and cannot
      // deadlock. The sort is stable, so the first of two equal ids in a batch is still the one kept.
      const planned = reports
        .map((report) => ({ p: bodies.plan(report), c: reportColumns(report) }))
        .sort((x, y) => (x.c.id < y.c.id ? -1 : x.c.id > y.c.id ? 1 : 0));
      const cols = planned.map((row) => row.c);
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (err) {
        throw fail('insert reports', err);
      }
      // See prepareSchema: a connection that drops mid-transaction must fail the statement, not the process.
      const ignore = (): void => {};
      client.on('error', ignore);
      try {
        await client.query('BEGIN');
        // unnest keeps the statement at a fixed number of parameters whatever the batch size.
        const res = await client.query<{ id: string }>(
          `INSERT INTO ${table} (id, request_ms, environment, prompt_id, client, model, status, cache_hit,
                                 duration_ms, input_tokens, output_tokens, cost_usd, cost_saved_usd, outcome,
                                 received_ms, request_blob, response_blob, data)
           SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
                                $7::integer[], $8::boolean[], $9::float8[], $10::bigint[], $11::bigint[],
                                $12::float8[], $13::float8[], $14::text[], $15::bigint[], $16::bytea[],
                                $17::bytea[], $18::jsonb[])
           ON CONFLICT (id) DO NOTHING RETURNING id`,
          [
            cols.map((c) => pgText(c.id)),
            cols.map((c) => c.requestMs),
            cols.map((c) => pgTextOrNull(c.environment)),
            cols.map((c) => pgTextOrNull(c.promptId)),
            cols.map((c) => pgTextOrNull(c.client)),
            cols.map((c) => pgTextOrNull(c.model)),
            cols.map((c) => c.status),
            cols.map((c) => c.cacheHit),
            cols.map((c) => c.durationMs),
            cols.map((c) => c.inputTokens),
            cols.map((c) => c.outputTokens),
            cols.map((c) => c.costUsd),
            cols.map((c) => c.costSavedUsd),
            cols.map((c) => pgTextOrNull(c.outcome)),
            planned.map((row) => row.p.receivedMs),
            planned.map((row) => row.p.request),
            planned.map((row) => row.p.response),
            planned.map((row) => pgJson(row.p.data as string)),
          ],
        );
        const taken = new Set(res.rows.map((r) => r.id));
        const inserted: PlannedReport[] = [];
        for (const row of planned) {
          const id = pgText(row.c.id);
          if (taken.delete(id)) inserted.push(row.p);
        }
        const writes = bodies.writes(inserted, now()).sort((a, b) => Buffer.compare(a.blob.hash, b.blob.hash));
        if (writes.length > 0) {
          // Blobs already stored only get a newer last_ms; the rest are compressed and inserted. In hash
          // order, like the reports, so concurrent batches lock them in the same order.
          const touched = await client.query<{ hash: Buffer }>(
            `UPDATE ${bodiesTable} AS b SET last_ms = GREATEST(b.last_ms, u.ms)
             FROM unnest($1::bytea[], $2::bigint[]) AS u(hash, ms) WHERE b.hash = u.hash RETURNING b.hash`,
            [writes.map((w) => w.blob.hash), writes.map((w) => w.ms)],
          );
          const there = new Set(touched.rows.map((r) => r.hash.toString('hex')));
          const missing = writes.filter((w) => !there.has(w.blob.hash.toString('hex')));
          if (missing.length > 0) {
            await client.query(
              `INSERT INTO ${bodiesTable} (hash, last_ms, data)
               SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bytea[])
               ON CONFLICT (hash) DO UPDATE SET last_ms = GREATEST(${bodiesTable}.last_ms, EXCLUDED.last_ms)`,
              [missing.map((w) => w.blob.hash), missing.map((w) => w.ms), missing.map((w) => packBlob(w.blob.bytes))],
            );
          }
        }
        await client.query('COMMIT');
        bodies.committed(writes);
        client.off('error', ignore);
        client.release();
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        client.off('error', ignore);
        client.release(err instanceof Error ? err : true);
        throw fail('insert reports', err);
      }
    },

    async get(id) {
      try {
        const res = await pool.query<ReadRow>(`SELECT ${READ_COLUMNS} FROM ${table} WHERE id = $1`, [pgText(id)]);
        const row = res.rows[0];
        return row ? (await restoreReports([bodyRow(row)], fetchBlobs))[0] : undefined;
      } catch (err) {
        throw fail('read a report', err);
      }
    },

    async list(query) {
      // Built outside the try: a bad cursor or filter is the caller's error, not the store's.
      const sql = buildListSql(query, dialect);
      const params = sql.params.map((p) => (typeof p === 'string' ? pgText(p) : p));
      try {
        const res = await pool.query<ListRow>(
          `SELECT request_ms, id, ${READ_COLUMNS} FROM ${table} ${sql.where}
           ORDER BY request_ms DESC, id DESC LIMIT ${sql.fetch}`,
          params,
        );
        const reports = await restoreReports(res.rows.map(bodyRow), fetchBlobs);
        // BIGINT arrives as a string; request times are far inside the safe integer range.
        return pageFromRows(
          res.rows.map((row, i) => ({ requestMs: Number(row.request_ms), id: row.id, report: reports[i]! })),
          query.limit,
        );
      } catch (err) {
        throw fail('list reports', err);
      }
    },

    async stats(filter, groupBy) {
      // Built outside the try: a bad filter or groupBy is the caller's error, not the store's.
      const sql = buildStatsSql(table, filter, groupBy, dialect);
      const params = sql.params.map((p) => (typeof p === 'string' ? pgText(p) : p));
      try {
        // One statement sees one snapshot, so totals and groups agree under concurrent writes.
        const res = await pool.query<StatsRow>(sql.sql, params);
        return statsResult(res.rows, groupBy);
      } catch (err) {
        throw fail('compute stats', err);
      }
    },

    async count() {
      try {
        const res = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`);
        return Number(res.rows[0]?.n ?? 0);
      } catch (err) {
        throw fail('count reports', err);
      }
    },

    async ping() {
      try {
        await pool.query('SELECT 1');
      } catch (err) {
        throw fail('answer a ping', err);
      }
    },

    async prune(step) {
      const result: PruneResult = { reports: 0, expired: 0, bodies: 0, more: false };
      const { rows } = step;
      try {
        // Batched deletes, each its own short transaction: a step never holds locks for long beside
        // traffic, and the sweep reads only committed rows, so stopping between two statements is safe.
        const old = await pool.query(
          `DELETE FROM ${table} WHERE id IN
             (SELECT id FROM ${table} WHERE received_ms < $1 ORDER BY received_ms LIMIT $2)`,
          [step.reportsBefore, rows],
        );
        result.reports += old.rowCount ?? 0;
        if (step.trimOldest > 0) {
          const trimmed = await pool.query(
            `DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} ORDER BY received_ms LIMIT $1)`,
            [Math.min(step.trimOldest, rows)],
          );
          result.reports += trimmed.rowCount ?? 0;
        }
        const expired = await pool.query(
          `UPDATE ${table} SET bodies_expired = true, request_blob = NULL, response_blob = NULL WHERE id IN
             (SELECT id FROM ${table} WHERE NOT bodies_expired AND received_ms < $1 ORDER BY received_ms LIMIT $2)`,
          [step.bodiesBefore, rows],
        );
        result.expired = expired.rowCount ?? 0;
        const oldest = await pool.query<{ t: string | null }>(
          `SELECT min(received_ms) AS t FROM ${table} WHERE NOT bodies_expired`,
        );
        const t = oldest.rows[0]?.t;
        const before = sweepBefore(t == null ? null : Number(t), step.now);
        // The outer last_ms test is evaluated again on a row that a concurrent batch has just touched
        // (READ COMMITTED re-checks a locked row): a blob that batch still uses is not deleted.
        const swept = await pool.query(
          `DELETE FROM ${bodiesTable} WHERE hash IN
             (SELECT hash FROM ${bodiesTable} WHERE last_ms < $1 LIMIT $2) AND last_ms < $1`,
          [before, rows * 8],
        );
        result.bodies = swept.rowCount ?? 0;
      } catch (err) {
        throw fail('prune reports', err);
      }
      if (result.bodies > 0) bodies.forget();
      result.more = result.reports >= rows || result.expired >= rows || result.bodies >= rows * 8;
      return result;
    },

    async sizeBytes() {
      try {
        // What the rows hold, not the relation's size: PostgreSQL keeps a table's pages after a DELETE (for
        // reuse), so the file size would never fall under the budget and every report would go.
        const res = await pool.query<{ n: string | null }>(
          `SELECT (SELECT coalesce(sum(pg_column_size(r.*)), 0) FROM ${table} r)
                + (SELECT coalesce(sum(pg_column_size(b.*)), 0) FROM ${bodiesTable} b) AS n`,
        );
        return Number(res.rows[0]?.n ?? 0);
      } catch (err) {
        throw fail('measure its size', err);
      }
    },

    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}

async function prepareSchema(client: pg.PoolClient, schema: string, table: string, bodiesTable: string): Promise<void> {
  await client.query('BEGIN');
  try {
    // Relay instances starting together would race on CREATE … IF NOT EXISTS (a unique violation in the
    // catalog); the lock makes them take turns. Existing objects are left alone, so a role without CREATE
    // rights can use a table prepared by an administrator.
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`llm-relay:reports:${schema}`]);
    const exists = await client.query<{ t: string | null }>('SELECT to_regclass($1) AS t', [table]);
    if (exists.rows[0]?.t == null) {
      const ns = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
      if (ns.rowCount === 0) await client.query(`CREATE SCHEMA "${schema}"`);
      // id sorts bytewise (COLLATE "C") so keyset pages walk the same order as in SQLite, whatever the
      // database's locale.
      await client.query(`CREATE TABLE ${table} (
        id TEXT COLLATE "C" PRIMARY KEY,
        request_ms BIGINT NOT NULL,
        environment TEXT,
        prompt_id TEXT,
        client TEXT,
        model TEXT,
        status INTEGER,
        cache_hit BOOLEAN,
        duration_ms DOUBLE PRECISION,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        cost_usd DOUBLE PRECISION,
        cost_saved_usd DOUBLE PRECISION,
        outcome TEXT,
        received_ms BIGINT,
        request_blob BYTEA,
        response_blob BYTEA,
        bodies_expired BOOLEAN NOT NULL DEFAULT false,
        data JSONB NOT NULL
      )`);
      await client.query(`CREATE INDEX reports_request_ms_id ON ${table} (request_ms DESC, id DESC)`);
      await client.query(`CREATE INDEX reports_environment ON ${table} (environment)`);
      await client.query(`CREATE INDEX reports_model ON ${table} (model)`);
    } else {
      await addMissingColumns(client, schema, table);
    }
    // The body store and the retention indexes, new in an older schema too.
    if ((await client.query<{ t: string | null }>('SELECT to_regclass($1) AS t', [bodiesTable])).rows[0]?.t == null) {
      await client.query(`CREATE TABLE ${bodiesTable} (hash BYTEA PRIMARY KEY, last_ms BIGINT NOT NULL, data BYTEA NOT NULL)`);
      await client.query(`CREATE INDEX bodies_last_ms ON ${bodiesTable} (last_ms)`);
      await client.query(`CREATE INDEX reports_received_ms ON ${table} (received_ms)`);
      await client.query(`CREATE INDEX reports_with_bodies ON ${table} (received_ms) WHERE NOT bodies_expired`);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

/**
 * Columns added after the first release of the table, with how to fill them from `data` for rows written
 * before. A table from an older relay gains them at start-up (only when missing, so a role without ALTER
 * rights still works with an up-to-date table).
 */
const ADDED_COLUMNS: ReadonlyArray<[name: string, type: string, backfill: string]> = [
  ['duration_ms', 'DOUBLE PRECISION', "(data->>'durationMs')::double precision"],
  ['input_tokens', 'BIGINT NOT NULL DEFAULT 0', "COALESCE((data->'usage'->>'inputTokens')::numeric::bigint, 0)"],
  ['output_tokens', 'BIGINT NOT NULL DEFAULT 0', "COALESCE((data->'usage'->>'outputTokens')::numeric::bigint, 0)"],
  ['cost_usd', 'DOUBLE PRECISION', "(data->>'costUsd')::double precision"],
  ['cost_saved_usd', 'DOUBLE PRECISION', "(data->>'costSavedUsd')::double precision"],
  ['outcome', 'TEXT', "CASE WHEN jsonb_typeof(data->'proxy'->'outcome') = 'string' THEN data->'proxy'->>'outcome' END"],
  // Rows from before the body store keep their bodies inline in `data`; their age counts from receivedAt.
  [
    'received_ms',
    'BIGINT',
    "COALESCE(CASE WHEN data->>'receivedAt' ~ '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?Z$' " +
      "THEN (extract(epoch FROM (data->>'receivedAt')::timestamptz) * 1000)::bigint END, request_ms)",
  ],
  ['request_blob', 'BYTEA', 'NULL'],
  ['response_blob', 'BYTEA', 'NULL'],
  ['bodies_expired', 'BOOLEAN NOT NULL DEFAULT false', 'false'],
];

async function addMissingColumns(client: pg.PoolClient, schema: string, table: string): Promise<void> {
  const present = await client.query<{ column_name: string }>(
    "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'reports'",
    [schema],
  );
  const have = new Set(present.rows.map((r) => r.column_name));
  const missing = ADDED_COLUMNS.filter(([name]) => !have.has(name));
  for (const [name, type] of missing) await client.query(`ALTER TABLE ${table} ADD COLUMN ${name} ${type}`);
  if (missing.length > 0)
    await client.query(`UPDATE ${table} SET ${missing.map(([name, , fill]) => `${name} = ${fill}`).join(', ')}`);
}

/** host:port for messages, and a scrubber that keeps the password out of every message. */
function describeTarget(connectionString: string): { address: string; scrub: (msg: string) => string } {
  let address = 'the configured address';
  const secrets: string[] = [];
  try {
    const url = new URL(connectionString);
    const host = url.hostname || url.searchParams.get('host') || 'localhost';
    address = `${host}:${url.port || url.searchParams.get('port') || '5432'}`;
    if (url.password) secrets.push(url.password, decodeURIComponent(url.password));
  } catch {
    // Not a URL (a key=value string): the address stays generic and pg's own messages carry no password.
  }
  return {
    address,
    scrub: (msg) => secrets.reduce((m, s) => m.split(s).join('***'), msg),
  };
}

function reasonOf(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) {
    return err.errors.map((e: unknown) => (e instanceof Error ? e.message : String(e))).join('; ');
  }
  return err instanceof Error ? err.message || err.name : String(err);
}

// PostgreSQL text cannot hold U+0000 and JSONB rejects `\u0000` and lone surrogates, so one such character
// in a body would make the whole batch fail forever (and stall the outbox). They become U+FFFD instead.
function pgText(s: string): string {
  return s.includes('\u0000') ? s.replaceAll('\u0000', '\ufffd') : s;
}

function pgTextOrNull(s: string | null): string | null {
  return s === null ? null : pgText(s);
}

/** JSON text from JSON.stringify, whose only `\u` escapes are control characters and lone surrogates. */
function pgJson(json: string): string {
  if (!json.includes('\\u')) return json;
  // Matching whole escape sequences keeps `\\u0000` (an escaped backslash, then text) untouched.
  return json.replace(/\\(?:u0000|ud[89a-f][0-9a-f]{2}|.)/g, (m) => (m.length === 6 ? '\\ufffd' : m));
}
