// The team report store: PostgreSQL through a `pg` pool, so several relay instances share one history.
// Same columns and list semantics as the SQLite store; the whole report is kept as JSONB.
import pg from 'pg';
import { StoreUnavailableError } from '../errors.js';
import { buildListSql, pageFromRows, reportColumns } from './report-filters.js';
import { type StatsDialect, type StatsRow, buildStatsSql, statsResult } from './report-stats-sql.js';
import type { ReportStore, StoredReport } from './report-store.js';

export interface PostgresReportStoreOptions {
  connectionString: string;
  /** default `public` */
  schema?: string;
  /** default 10 */
  poolSize?: number;
  /** how long opening a connection may take, at start and later; default 3000 */
  connectTimeoutMs?: number;
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

interface ListRow {
  request_ms: string;
  id: string;
  data: StoredReport;
}

export async function createPostgresReportStore(opts: PostgresReportStoreOptions): Promise<ReportStore> {
  const schema = opts.schema ?? 'public';
  if (!SCHEMA_NAME.test(schema)) {
    throw new TypeError(`PostgreSQL schema name ${JSON.stringify(schema)} must match ${SCHEMA_NAME.source}`);
  }
  const table = `"${schema}".reports`;
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
    await prepareSchema(client, schema, table);
    client.off('error', ignore);
    client.release();
  } catch (err) {
    client.off('error', ignore);
    client.release(err instanceof Error ? err : true);
    await pool.end().catch(() => {});
    throw fail(`prepare ${table}`, err);
  }

  let closed = false;
  return {
    kind: 'postgres',

    async insertMany(reports) {
      if (reports.length === 0) return;
      // Rows in id order: concurrent batches that share ids then lock them in the same order and cannot
      // deadlock. The sort is stable, so the first of two equal ids in a batch is still the one kept.
      const rows = reports
        .map((report) => ({ report, c: reportColumns(report) }))
        .sort((x, y) => (x.c.id < y.c.id ? -1 : x.c.id > y.c.id ? 1 : 0));
      const cols = rows.map((row) => row.c);
      try {
        // One statement is one transaction; unnest keeps it at fifteen parameters whatever the batch size.
        await pool.query(
          `INSERT INTO ${table} (id, request_ms, environment, prompt_id, client, model, status, cache_hit,
                                 duration_ms, input_tokens, output_tokens, cost_usd, cost_saved_usd, outcome, data)
           SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
                                $7::integer[], $8::boolean[], $9::float8[], $10::bigint[], $11::bigint[],
                                $12::float8[], $13::float8[], $14::text[], $15::jsonb[])
           ON CONFLICT (id) DO NOTHING`,
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
            rows.map((row) => pgJson(JSON.stringify(row.report))),
          ],
        );
      } catch (err) {
        throw fail('insert reports', err);
      }
    },

    async get(id) {
      try {
        const res = await pool.query<{ data: StoredReport }>(`SELECT data FROM ${table} WHERE id = $1`, [
          pgText(id),
        ]);
        return res.rows[0]?.data;
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
          `SELECT request_ms, id, data FROM ${table} ${sql.where}
           ORDER BY request_ms DESC, id DESC LIMIT ${sql.fetch}`,
          params,
        );
        // BIGINT arrives as a string; request times are far inside the safe integer range.
        return pageFromRows(
          res.rows.map((row) => ({ requestMs: Number(row.request_ms), id: row.id, report: row.data })),
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

    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}

async function prepareSchema(client: pg.PoolClient, schema: string, table: string): Promise<void> {
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
        data JSONB NOT NULL
      )`);
      await client.query(`CREATE INDEX reports_request_ms_id ON ${table} (request_ms DESC, id DESC)`);
      await client.query(`CREATE INDEX reports_environment ON ${table} (environment)`);
      await client.query(`CREATE INDEX reports_model ON ${table} (model)`);
    } else {
      await addMissingColumns(client, schema, table);
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
