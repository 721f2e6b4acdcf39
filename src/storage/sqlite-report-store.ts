// The embedded report store: one SQLite file in the data dir. The indexed columns answer the list filters;
// the whole report is kept as JSON text, so fields this version does not know survive a round trip.
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { StoreUnavailableError } from '../errors.js';
import { makePrivateDir, preparePrivateFile, sqliteCompanions } from './private-files.js';
import { createSqliteWriter } from './sqlite-writer.js';
import { buildListSql, pageFromRows, reportColumns } from './report-filters.js';
import { type StatsDialect, type StatsRow, buildStatsSql, statsResult } from './report-stats-sql.js';
import type { ReportStore, StoredReport } from './report-store.js';

export interface SqliteReportStoreOptions {
  file: string;
}

/** How long a write waits for another connection's lock (another relay process on the same file). */
const BUSY_TIMEOUT_MS = 5000;

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS reports (
    id TEXT PRIMARY KEY,
    request_ms INTEGER NOT NULL,
    environment TEXT,
    prompt_id TEXT,
    client TEXT,
    model TEXT,
    status INTEGER,
    cache_hit INTEGER,
    duration_ms REAL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL,
    cost_saved_usd REAL,
    outcome TEXT,
    data TEXT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS reports_request_ms_id ON reports (request_ms DESC, id DESC);
  CREATE INDEX IF NOT EXISTS reports_environment ON reports (environment);
  CREATE INDEX IF NOT EXISTS reports_model ON reports (model);
`;

/** Columns added after the table's first release, and how rows written before are filled (see postgres). */
const ADDED_COLUMNS: ReadonlyArray<[name: string, type: string, backfill: string]> = [
  ['duration_ms', 'REAL', "json_extract(data, '$.durationMs')"],
  ['input_tokens', 'INTEGER NOT NULL DEFAULT 0', "COALESCE(CAST(json_extract(data, '$.usage.inputTokens') AS INTEGER), 0)"],
  ['output_tokens', 'INTEGER NOT NULL DEFAULT 0', "COALESCE(CAST(json_extract(data, '$.usage.outputTokens') AS INTEGER), 0)"],
  ['cost_usd', 'REAL', "json_extract(data, '$.costUsd')"],
  ['cost_saved_usd', 'REAL', "json_extract(data, '$.costSavedUsd')"],
  ['outcome', 'TEXT', "CASE WHEN json_type(data, '$.proxy.outcome') = 'text' THEN json_extract(data, '$.proxy.outcome') END"],
];

function addMissingColumns(db: Database.Database): void {
  const have = new Set((db.pragma('table_info(reports)') as { name: string }[]).map((c) => c.name));
  const missing = ADDED_COLUMNS.filter(([name]) => !have.has(name));
  if (missing.length === 0) return;
  db.transaction(() => {
    for (const [name, type] of missing) db.exec(`ALTER TABLE reports ADD COLUMN ${name} ${type}`);
    db.exec(`UPDATE reports SET ${missing.map(([name, , fill]) => `${name} = ${fill}`).join(', ')}`);
  })();
}

const dialect: StatsDialect = {
  placeholder: () => '?',
  cacheHit: (value) => (value ? 1 : 0),
  propertyEquals(name, value, bind) {
    // PROPERTY_NAME admits no `"` or `\`, so quoting the name is enough to keep dots and dashes literal.
    // Strings compare by their value; numbers and booleans by their JSON text (`42`, `1.5`, `true`), which
    // is the string form the client sent them as; null, objects and arrays never match.
    const path = `$.properties."${name}"`;
    return (
      `(CASE WHEN json_type(data, ${bind(path)}) = 'text' THEN json_extract(data, ${bind(path)}) ` +
      `WHEN json_type(data, ${bind(path)}) IN ('integer', 'real', 'true', 'false') ` +
      `THEN data -> ${bind(path)} END) = ${bind(value)}`
    );
  },
  hitTrue: 'cache_hit = 1',
  sum: (column) => `total(${column})`,
  utcDate: (epochSeconds) => `strftime('%Y-%m-%d', ${epochSeconds}, 'unixepoch')`,
  // SQLite compares TEXT with BINARY (memcmp of UTF-8) by default.
  keyOrder: 'k',
  // No percentile_cont here (the percentile extension is optional): rank with window functions instead.
  percentiles: 'window',
};

interface ListRow {
  request_ms: number;
  id: string;
  data: string;
}

export function createSqliteReportStore(opts: SqliteReportStoreOptions): ReportStore {
  let db: Database.Database;
  try {
    makePrivateDir(dirname(opts.file));
    preparePrivateFile(opts.file, sqliteCompanions(opts.file));
    db = new Database(opts.file);
    // WAL with synchronous=FULL: a committed batch is on disk when insertMany resolves, and the caller
    // acknowledges reports (or drops them from its outbox) only after that.
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    db.exec(SCHEMA);
    addMissingColumns(db);
  } catch (err) {
    throw failure(`open ${opts.file}`, err);
  }

  // Inserts go through a worker thread (their fsync must not block requests); reads stay here (WAL lets
  // this connection read while the writer commits).
  const writer = createSqliteWriter({
    file: opts.file,
    busyTimeoutMs: BUSY_TIMEOUT_MS,
    insertSql: `INSERT INTO reports (id, request_ms, environment, prompt_id, client, model, status, cache_hit,
                          duration_ms, input_tokens, output_tokens, cost_usd, cost_saved_usd, outcome, data)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
  });
  const selectOne = db.prepare<[string], { data: string }>('SELECT data FROM reports WHERE id = ?');
  const countAll = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM reports');
  const selectOk = db.prepare('SELECT 1');
  function row(report: StoredReport): unknown[] {
    const c = reportColumns(report);
    return [
      c.id,
      c.requestMs,
      c.environment,
      c.promptId,
      c.client,
      c.model,
      c.status,
      c.cacheHit === null ? null : c.cacheHit ? 1 : 0,
      c.durationMs,
      c.inputTokens,
      c.outputTokens,
      c.costUsd,
      c.costSavedUsd,
      c.outcome,
      JSON.stringify(report),
    ];
  }
  let closed = false;

  return {
    kind: 'sqlite',

    async insertMany(reports) {
      if (reports.length === 0) return;
      if (closed) throw failure('insert reports', new Error('the store is closed'));
      try {
        await writer.insert(reports.map(row));
      } catch (err) {
        throw failure('insert reports', err);
      }
    },

    async get(id) {
      try {
        const row = selectOne.get(id);
        return row ? (JSON.parse(row.data) as StoredReport) : undefined;
      } catch (err) {
        throw failure('read a report', err);
      }
    },

    async list(query) {
      // Built outside the try: a bad cursor or filter is the caller's error, not the store's.
      const sql = buildListSql(query, dialect);
      try {
        // Filter combinations vary per call, so this statement is prepared each time (microseconds).
        const rows = db
          .prepare<unknown[], ListRow>(
            `SELECT request_ms, id, data FROM reports ${sql.where}
             ORDER BY request_ms DESC, id DESC LIMIT ${sql.fetch}`,
          )
          .all(...sql.params);
        return pageFromRows(
          rows.map((row) => ({
            requestMs: row.request_ms,
            id: row.id,
            report: JSON.parse(row.data) as StoredReport,
          })),
          query.limit,
        );
      } catch (err) {
        throw failure('list reports', err);
      }
    },

    async stats(filter, groupBy) {
      // Built outside the try: a bad filter or groupBy is the caller's error, not the store's.
      const sql = buildStatsSql('reports', filter, groupBy, dialect);
      try {
        // One statement: totals and groups read the same snapshot.
        const rows = db.prepare<unknown[], StatsRow>(sql.sql).all(...sql.params);
        return statsResult(rows, groupBy);
      } catch (err) {
        throw failure('compute stats', err);
      }
    },

    async count() {
      try {
        return countAll.get()?.n ?? 0;
      } catch (err) {
        throw failure('count reports', err);
      }
    },

    async ping() {
      try {
        selectOk.get();
      } catch (err) {
        throw failure('answer a ping', err);
      }
    },

    async close() {
      if (closed) return;
      closed = true;
      await writer.close();
      if (db.open) db.close();
    },
  };
}

function failure(action: string, err: unknown): StoreUnavailableError {
  const reason = err instanceof Error ? err.message : String(err);
  return new StoreUnavailableError('reports', `SQLite report store could not ${action}: ${reason}`, {
    cause: err,
  });
}
