// The embedded report store: one SQLite file in the data dir. The indexed columns answer the list filters;
// the report is kept as JSON text (so fields this version does not know survive a round trip) without its
// bodies, which live once each in the content-addressed `bodies` table (body-store.ts), found by hash
// through a map of the table's tail and an index written in bulk (sqlite-blob-index.ts).
// The write side runs on the report worker (insertMany, prune): a batch is one synchronous transaction
// there, its fsync blocking only that thread. The event loop's instance only reads (WAL lets it read while
// the worker commits).
import { dirname } from 'node:path';
import { LRUCache } from 'lru-cache';
import { StoreUnavailableError } from '../errors.js';
import { type Hash, keptRaw, packBlob, unpackBlob } from './body-codec.js';
import { type BlobMap, type BodyRow, type PlannedReport, createBodyKeeper, restoreReports, sweepBefore } from './body-store.js';
import { makePrivateDir, preparePrivateFile, sqliteCompanions } from './private-files.js';
import { buildListSql, finiteOrNull, pageFromRows, reportColumns } from './report-filters.js';
import { KnownTime, packReport, packTemplate, packVariant, unpackReport } from './report-row-codec.js';
import { type StatsDialect, type StatsRow, buildStatsSql, statsResult } from './report-stats-sql.js';
import type { PruneResult, ReportStore, StoredReport } from './report-store.js';
import { VARIANT_PATHS, variantValues } from './report-variant.js';
import { BLOB_TABLES, createBlobIndex, upgradeBodies } from './sqlite-blob-index.js';
import { Database } from './sqlite-driver.js';

export interface SqliteReportStoreOptions {
  file: string;
  /** the clock of body writes (tests move it) */
  now?: () => number;
  /**
   * Whether the first retention step starts a sweep pass (default true: a pass a crash cut short). False
   * when the last store on this file in this process closed after its pass was over (the report worker
   * started again after an idle stop): then no blob can have become unused meanwhile.
   */
  sweepOnOpen?: boolean;
  /** blobs in the tail before it is merged into the hash index (sqlite-blob-index.ts; tests make it small) */
  blobMergeAt?: number;
  /** blobs a batch merges while a merge is under way (sqlite-blob-index.ts; tests make it small) */
  blobMergeSlice?: number;
  /** told before a file of an earlier relay is rewritten into this layout (once; seconds for a large file) */
  onUpgrade?: (what: string) => void;
  /** bodies shorter than this are kept in their rows (INLINE_BELOW; tests of the blobs set 0) */
  bodyInlineBelow?: number;
}

/** Where a variant's own values go among insertReport's placeholders (columnsOf). */
const AT = { id: 0, requestMs: 1, durationMs: 8, receivedMs: 14, data: 18 } as const;

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
    received_ms INTEGER,
    request_blob BLOB,
    response_blob BLOB,
    bodies_expired INTEGER NOT NULL DEFAULT 0,
    properties TEXT,
    data TEXT NOT NULL
  );
`;

/**
 * Every index is written with every report. The list's filters (environment, model, …) walk the
 * (request_ms, id) index newest first and stop at a page; stats read every row they count anyway. Blobs
 * have no index on last_ms: the sweep walks the table by rowid, a bounded stretch per step, and only after
 * reports lost their bodies (see prune). Files of older relays had these indexes: they are dropped.
 */
const DROPPED_INDEXES = `
  DROP INDEX IF EXISTS reports_environment;
  DROP INDEX IF EXISTS reports_model;
  DROP INDEX IF EXISTS bodies_last_ms;
`;

/**
 * The list's order (request_ms, id), newest first. Ascending, which SQLite reads backwards as cheaply: new
 * reports then land at the end of the index, where SQLite appends to a full page instead of splitting pages
 * at its start (a descending one ends half empty and costs more per insert). Files of older relays keep
 * their descending index (rebuilding it could take minutes at start).
 */
const LIST_INDEX = `
  CREATE INDEX IF NOT EXISTS reports_request_ms_id_asc ON reports (request_ms, id);
`;

/** Indexes on columns an upgrade adds: created after addMissingColumns. */
const RETENTION_INDEXES = `
  CREATE INDEX IF NOT EXISTS reports_received_ms ON reports (received_ms);
  CREATE INDEX IF NOT EXISTS reports_with_bodies ON reports (received_ms) WHERE bodies_expired = 0;
`;

/**
 * Columns added after the table's first release, and how rows written before are filled (see postgres).
 * The backfills read `data` as JSON text, which rows from before the body store are; a column added later
 * must fill rows whose `data` is packed (report-row-codec.ts) from the other columns or in code instead.
 */
const ADDED_COLUMNS: ReadonlyArray<[name: string, type: string, backfill: string]> = [
  ['duration_ms', 'REAL', "json_extract(data, '$.durationMs')"],
  ['input_tokens', 'INTEGER NOT NULL DEFAULT 0', "COALESCE(CAST(json_extract(data, '$.usage.inputTokens') AS INTEGER), 0)"],
  ['output_tokens', 'INTEGER NOT NULL DEFAULT 0', "COALESCE(CAST(json_extract(data, '$.usage.outputTokens') AS INTEGER), 0)"],
  ['cost_usd', 'REAL', "json_extract(data, '$.costUsd')"],
  ['cost_saved_usd', 'REAL', "json_extract(data, '$.costSavedUsd')"],
  ['outcome', 'TEXT', "CASE WHEN json_type(data, '$.proxy.outcome') = 'text' THEN json_extract(data, '$.proxy.outcome') END"],
  // A report from before the body store keeps its bodies inline in `data` (no blob, nothing to expire but
  // the row): its age counts from receivedAt.
  ['received_ms', 'INTEGER', "COALESCE(CAST(round((julianday(json_extract(data, '$.receivedAt')) - 2440587.5) * 86400000) AS INTEGER), request_ms)"],
  ['request_blob', 'BLOB', 'NULL'],
  ['response_blob', 'BLOB', 'NULL'],
  ['bodies_expired', 'INTEGER NOT NULL DEFAULT 0', '0'],
  ['properties', 'TEXT', "CASE WHEN json_type(data, '$.properties') = 'object' THEN json_extract(data, '$.properties') END"],
];

function addMissingColumns(db: Database): void {
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
    // The report JSON itself is packed (report-row-codec.ts): properties have a column of their own.
    const path = `$."${name}"`;
    return (
      `(CASE WHEN json_type(properties, ${bind(path)}) = 'text' THEN json_extract(properties, ${bind(path)}) ` +
      `WHEN json_type(properties, ${bind(path)}) IN ('integer', 'real', 'true', 'false') ` +
      `THEN properties -> ${bind(path)} END) = ${bind(value)}`
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

interface ReadRow {
  data: string | Buffer;
  /** a body's root hash, or (text) the body itself (INLINE_BELOW) */
  request_blob: Buffer | string | null;
  response_blob: Buffer | string | null;
  bodies_expired: number;
}

interface ListRow extends ReadRow {
  request_ms: number;
  id: string;
}

const READ_COLUMNS = 'data, request_blob, response_blob, bodies_expired';

function bodyRow(row: ReadRow): BodyRow {
  return { data: unpackReport(row.data), request: row.request_blob, response: row.response_blob, expired: row.bodies_expired === 1 };
}

/** Unpacked blobs kept by the reading side: the system prompt and a conversation's history are read again and again. */
const READ_CACHE_BYTES = 8 * 1024 * 1024;
/**
 * A body whose JSON text is shorter than this many characters is kept in its report's row, as text in the
 * body's column (a hash is a BLOB there), not as a blob: a blob costs its sha256, a row in \`bodies\`, an entry
 * in the hash index (~130 bytes and two B-tree writes) and a look-up on every use, which a body this short
 * seldom repays by being sent again. Below it sit short chats and most direct-API reports of a single turn;
 * a conversation's growing history and an answer with its usage are longer. A cache hit's report repeats the
 * text in its own row (at most twice this per hit, where a blob would be named by a 32-byte hash).
 */
const INLINE_BELOW = 256;
/** The connection's page cache, in KiB. */
const PAGE_CACHE_KIB = 16 * 1024;
/** Pages given back to the file system per prune step (4 KiB each). */
const VACUUM_PAGES = 2048;

export function createSqliteReportStore(opts: SqliteReportStoreOptions): ReportStore {
  const now = opts.now ?? Date.now;
  let db: Database;
  try {
    makePrivateDir(dirname(opts.file));
    preparePrivateFile(opts.file, sqliteCompanions(opts.file));
    db = new Database(opts.file);
    // Set while the file is still empty (it cannot be changed later without a VACUUM): pruning then gives
    // pages back to the file system a few at a time (incremental_vacuum) instead of only to a free list.
    db.pragma('auto_vacuum = INCREMENTAL');
    // WAL with synchronous=FULL: a committed batch is on disk when insertMany resolves, and the caller
    // acknowledges reports (or drops them from its outbox) only after that.
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    // A burst's WAL is cut back after its checkpoint rather than kept at its largest.
    db.pragma('journal_size_limit = 1048576');
    db.exec(SCHEMA);
    // (an earlier relay's `bodies`, with its hash as PRIMARY KEY, is left by BLOB_TABLES and rewritten here)
    db.exec(BLOB_TABLES);
    upgradeBodies(db, () => opts.onUpgrade?.(`the body blobs of ${opts.file} are rewritten into this version's layout, once`));
    const listIndexed = (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'reports_request_ms_id'").get() as unknown) !== undefined;
    if (!listIndexed) db.exec(LIST_INDEX);
    addMissingColumns(db);
    db.exec(RETENTION_INDEXES);
    db.exec(DROPPED_INDEXES);
    // The writer's page cache: a batch looks up the hashes of its new blobs in the hash index, and a merge
    // writes into it (random places in a large tree); SQLite's default 2 MB would make most of those read
    // their page again. Pages are cached only as they are used.
    db.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
  } catch (err) {
    throw failure(`open ${opts.file}`, err);
  }

  const insertReport = db.prepare(
    `INSERT INTO reports (id, request_ms, environment, prompt_id, client, model, status, cache_hit, duration_ms,
                          input_tokens, output_tokens, cost_usd, cost_saved_usd, outcome, received_ms,
                          request_blob, response_blob, properties, data)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
  );
  // (by id, and the hash checked too: a row is never taken for another blob's, whatever the map says)
  const touchBody = db.prepare('UPDATE bodies SET last_ms = max(last_ms, ?) WHERE id = ? AND hash = ?');
  const insertBody = db.prepare('INSERT INTO bodies (hash, last_ms, data) VALUES (?, ?, ?)');
  const blobIndex = createBlobIndex(db, opts.blobMergeAt, opts.blobMergeSlice);
  const selectOne = db.prepare<[string], ReadRow>(`SELECT ${READ_COLUMNS} FROM reports WHERE id = ?`);
  const selectBlob = db.prepare<[number, Buffer], { data: Buffer }>('SELECT data FROM bodies WHERE id = ? AND hash = ?');
  const countAll = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM reports');
  const selectOk = db.prepare('SELECT 1');
  const deleteOld = db.prepare(
    'DELETE FROM reports WHERE rowid IN (SELECT rowid FROM reports WHERE received_ms < ? ORDER BY received_ms LIMIT ?)',
  );
  const deleteOldest = db.prepare(
    'DELETE FROM reports WHERE rowid IN (SELECT rowid FROM reports ORDER BY received_ms LIMIT ?)',
  );
  const expireBodies = db.prepare(
    `UPDATE reports SET bodies_expired = 1, request_blob = NULL, response_blob = NULL WHERE rowid IN
       (SELECT rowid FROM reports WHERE bodies_expired = 0 AND received_ms < ? ORDER BY received_ms LIMIT ?)`,
  );
  const oldestWithBodies = db.prepare<[], { t: number | null }>(
    'SELECT min(received_ms) AS t FROM reports WHERE bodies_expired = 0',
  );
  // (a rowid table: WITHOUT ROWID packs these rows worse and puts the hash in every index entry, measured)
  const sweepWindow = db.prepare<[number, number], { last: number | null; n: number }>(
    'SELECT max(rowid) AS last, count(*) AS n FROM (SELECT rowid FROM bodies WHERE rowid > ? ORDER BY rowid LIMIT ?)',
  );
  // (the hash index's entries first, found through the rows they name)
  const sweepHashes = db.prepare(
    'DELETE FROM body_hashes WHERE hash IN (SELECT hash FROM bodies WHERE id > ? AND id <= ? AND last_ms < ?)',
  );
  const sweep = db.prepare('DELETE FROM bodies WHERE id > ? AND id <= ? AND last_ms < ?');
  // A cache hit's report is a variant of the one before it (report-variant.ts): packed from its template.
  // Its own values are packed from the numbers it was made of, not read back from its texts.
  const bodies = createBodyKeeper(
    packReport,
    {
      template: (base) => packTemplate(base, VARIANT_PATHS),
      encode: (template, report, of) => packVariant(template, report, variantValues(of, knownTime)),
    },
    opts.bodyInlineBelow ?? INLINE_BELOW,
  );
  const baseRows = new WeakMap<StoredReport, unknown[]>();
  const readCache = new LRUCache<string, Buffer>({ maxSize: READ_CACHE_BYTES, sizeCalculation: (b) => Math.max(1, b.length) });

  function row(p: PlannedReport): unknown[] {
    if (p.variant) {
      // Only the variant fields differ from the base's row: its id and times (report-variant.ts).
      const { base, fields } = p.variant;
      let baseRow = baseRows.get(base);
      if (!baseRow) baseRows.set(base, (baseRow = columnsOf(base, p)));
      const r = baseRow.slice();
      r[AT.id] = fields.id;
      r[AT.requestMs] = fields.requestMs;
      r[AT.durationMs] = finiteOrNull(fields.durationMs);
      r[AT.receivedMs] = p.receivedMs;
      r[AT.data] = p.data;
      return r;
    }
    return columnsOf(p.report, p);
  }

  /** The values of insertReport's placeholders, in its order (AT names the ones a variant sets). */
  function columnsOf(report: StoredReport, p: PlannedReport): unknown[] {
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
      p.receivedMs,
      p.request,
      p.response,
      propertiesColumn(report.properties),
      p.data,
    ];
  }

  const insertBatch = db.transaction((planned: PlannedReport[], now: number) => {
    const inserted = planned.filter((p) => insertReport.run(row(p)).changes === 1);
    const writes = bodies.writes(inserted, now);
    if (writes.length > 0) blobIndex.refresh();
    for (const w of writes) {
      // A blob stored already gets its last_ms raised; a new one goes at the end of the table, and into the
      // map of the tail (sqlite-blob-index.ts).
      const hex = (w.blob.hex ??= w.blob.hash.toString('hex'));
      const id = blobIndex.idOf(w.blob.hash, hex);
      if (id !== undefined && touchBody.run(w.ms, id, w.blob.hash).changes === 1) continue;
      const info = insertBody.run(w.blob.hash, w.ms, packBlob(w.blob.bytes, keptRaw(w.blob.bytes)));
      blobIndex.added(hex, Number(info.lastInsertRowid));
    }
    blobIndex.mergeIfDue();
    return writes;
  });

  // The sweep: a pass over the blobs, a stretch of rowids per step, starts once reports were deleted or
  // lost their bodies (blobs can only become unused then), and once after the store opens (a pass a crash
  // cut short). Reports that lose their bodies during a pass call for another one after it. Between passes
  // it costs nothing.
  let sweepFrom: number | undefined = opts.sweepOnOpen === false ? undefined : 0;
  let sweepAgain = false;
  const pruneStep = db.transaction((at: number, reportsBefore: number, bodiesBefore: number, trimOldest: number, rows: number) => {
    const result: PruneResult = { reports: 0, expired: 0, bodies: 0, more: false };
    result.reports += deleteOld.run(reportsBefore, rows).changes;
    result.expired = expireBodies.run(bodiesBefore, rows).changes;
    const dirty = (): void => {
      if (sweepFrom === undefined) sweepFrom = 0;
      else sweepAgain = true;
    };
    if (result.reports + result.expired > 0) dirty();
    if (sweepFrom !== undefined) {
      const before = sweepBefore(oldestWithBodies.get()?.t ?? null, at);
      const window = sweepWindow.get(sweepFrom, rows * 8)!;
      if (window.last !== null) {
        sweepHashes.run(sweepFrom, window.last, before);
        result.bodies = sweep.run(sweepFrom, window.last, before).changes;
      }
      // A short window reached the end of the table: the pass is over.
      sweepFrom = window.n < rows * 8 || window.last === null ? undefined : window.last;
      if (sweepFrom === undefined && sweepAgain) {
        sweepFrom = 0;
        sweepAgain = false;
      }
    }
    // Over the size budget, what the last deletions freed is swept before more reports go.
    if (trimOldest > 0 && sweepFrom === undefined) {
      const trimmed = deleteOldest.run(Math.min(trimOldest, rows)).changes;
      result.reports += trimmed;
      if (trimmed > 0) dirty();
    }
    result.more = result.reports >= rows || result.expired >= rows || sweepFrom !== undefined;
    return result;
  });

  // A batch someone waits on (a 201, the outbox handing reports over) commits with an fsync of the WAL; one
  // of proxied calls' reports only (acknowledged to nobody) commits without: in WAL mode it still survives a
  // crash of the relay, and the next durable commit's fsync covers it against a crash of the machine too.
  let synchronous = 'FULL';
  function syncMode(mode: 'FULL' | 'NORMAL'): void {
    if (mode === synchronous) return;
    db.pragma(`synchronous = ${mode}`);
    synchronous = mode;
  }

  function fetchBlobs(hashes: Hash[]): BlobMap {
    const out: BlobMap = new Map();
    let fresh = false;
    for (const hash of hashes) {
      const hex = hash.toString('hex');
      let bytes = readCache.get(hex);
      if (!bytes) {
        if (!fresh) {
          blobIndex.refresh();
          fresh = true;
        }
        const id = blobIndex.idOf(hash, hex);
        const found = id === undefined ? undefined : selectBlob.get(id, hash);
        if (!found) continue;
        bytes = unpackBlob(found.data);
        readCache.set(hex, bytes);
      }
      out.set(hex, bytes);
    }
    return out;
  }

  let closed = false;

  return {
    kind: 'sqlite',

    async insertMany(reports, opts) {
      if (reports.length === 0) return;
      if (closed) throw failure('insert reports', new Error('the store is closed'));
      try {
        syncMode(opts?.durable === false ? 'NORMAL' : 'FULL');
        const writes = insertBatch(reports.map((r) => bodies.plan(r)), now());
        bodies.committed(writes);
      } catch (err) {
        // (the map of the tail may name rows the rollback took back)
        blobIndex.reset();
        throw failure('insert reports', err);
      }
    },

    async get(id) {
      try {
        const found = selectOne.get(id);
        return found ? (await restoreReports([bodyRow(found)], fetchBlobs))[0] : undefined;
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
            `SELECT request_ms, id, ${READ_COLUMNS} FROM reports ${sql.where}
             ORDER BY request_ms DESC, id DESC LIMIT ${sql.fetch}`,
          )
          .all(...sql.params);
        const reports = await restoreReports(rows.map(bodyRow), fetchBlobs);
        return pageFromRows(
          rows.map((row, i) => ({ requestMs: row.request_ms, id: row.id, report: reports[i]! })),
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

    async prune(step) {
      if (closed) throw failure('prune reports', new Error('the store is closed'));
      try {
        const result = pruneStep(step.now, step.reportsBefore, step.bodiesBefore, step.trimOldest, step.rows);
        if (result.bodies > 0) bodies.forget();
        // Pages freed by the deletes go back to the file system a bounded number at a time.
        if (result.reports + result.expired + result.bodies > 0) db.pragma(`incremental_vacuum(${VACUUM_PAGES})`);
        return result;
      } catch (err) {
        throw failure('prune reports', err);
      }
    },

    async sizeBytes() {
      try {
        const pages = db.pragma('page_count', { simple: true }) as number;
        const free = db.pragma('freelist_count', { simple: true }) as number;
        const size = db.pragma('page_size', { simple: true }) as number;
        return (pages - free) * size;
      } catch (err) {
        throw failure('measure its size', err);
      }
    },

    async close() {
      if (closed) return;
      closed = true;
      if (!db.open) return;
      // The last connection to close checkpoints and removes the WAL; a truncating checkpoint first leaves
      // nothing behind even if another connection (the other thread's) stays open.
      try {
        db.pragma('wal_checkpoint(TRUNCATE)');
      } catch {
        // another connection is busy: it checkpoints when it closes
      }
      db.close();
    },
  };
}

const knownTime = (ms: number, text: string): KnownTime => new KnownTime(ms, text);

function propertiesColumn(properties: unknown): string | null {
  return typeof properties === 'object' && properties !== null && !Array.isArray(properties) && Object.keys(properties).length > 0
    ? JSON.stringify(properties)
    : null;
}

function failure(action: string, err: unknown): StoreUnavailableError {
  const reason = err instanceof Error ? err.message : String(err);
  return new StoreUnavailableError('reports', `SQLite report store could not ${action}: ${reason}`, {
    cause: err,
  });
}
