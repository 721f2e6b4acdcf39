// The report worker thread: everything about an exchange that its answer does not need happens here, off
// the event loop — parsing the request and the answer, assembling streams, usage and cost, the body store,
// the insert and its fsync. It takes batches from report-thread.ts, answers each once written, and owns the
// write side of the report store and the outbox. Its store opens on first use and again after a failure,
// so a store that is down at start only sends reports to the outbox until it is back.
import { parentPort, workerData } from 'node:worker_threads';
import type { ProxyFacts } from './core/exchange-record.js';
import { createReportPipeline } from './core/report-pipeline.js';
import { createReportSink } from './core/report-sink.js';
import { createReportWriter } from './core/report-writer.js';
import { loadPriceTable } from './core/pricing.js';
import type { FromWorker, ReportThreadSettings, ToWorker } from './report-thread.js';
import { openOutboxFile } from './storage/outbox-file.js';
import { openReportJournal } from './storage/report-journal.js';
import { createReportPruner, directoryBytes } from './storage/report-pruner.js';
import type { ReportStore, StoredReport } from './storage/report-store.js';
import type { SpanExport } from './tracing/span-export.js';

const settings = workerData as ReportThreadSettings;
const port = parentPort!;

function send(msg: FromWorker): void {
  port.postMessage(msg);
}

function logged(err: unknown): Record<string, unknown> {
  return err instanceof Error ? { err: { type: err.name, message: err.message, stack: err.stack } } : { err: String(err) };
}

async function openStore(): Promise<ReportStore> {
  if (settings.reportsUrl === 'sqlite') {
    const { createSqliteReportStore } = await import('./storage/sqlite-report-store.js');
    // (a worker started again after an idle stop: the last one's retention had nothing left to do)
    return createSqliteReportStore({ file: settings.sqliteFile, sweepOnOpen: settings.resumed !== true });
  }
  const { createPostgresReportStore } = await import('./storage/postgres-report-store.js');
  return createPostgresReportStore({ connectionString: settings.reportsUrl });
}

/** The store, opened when first needed and again after it failed to open. */
function lazyStore(): ReportStore & { closeIfOpen(): Promise<void> } {
  let opened: Promise<ReportStore> | undefined;
  const store = (): Promise<ReportStore> => {
    opened ??= openStore().catch((err: unknown) => {
      opened = undefined;
      throw err;
    });
    return opened;
  };
  return {
    kind: settings.reportsUrl === 'sqlite' ? 'sqlite' : 'postgres',
    insertMany: async (reports, opts) => (await store()).insertMany(reports, opts),
    get: async (id) => (await store()).get(id),
    list: async (q) => (await store()).list(q),
    count: async () => (await store()).count(),
    stats: async (f, g) => (await store()).stats(f, g),
    ping: async () => (await store()).ping(),
    prune: async (step) => (await store()).prune!(step),
    sizeBytes: async () => (await store()).sizeBytes!(),
    close: async () => (await store()).close(),
    async closeIfOpen() {
      if (opened) await (await opened.catch(() => undefined))?.close();
    },
  };
}

// Tracing (only when an OTLP endpoint is set; nothing of OpenTelemetry is loaded otherwise): spans are built
// from each traced exchange's report and exported from this thread. Its modules load with the first traced
// report, not before the worker takes its first batch: a worker started for direct-API reports, whose clients
// wait for their 201, does not wait for ~50 ms of OpenTelemetry modules. The spans of reports built while they
// load wait for them, within the export queue's bound (beyond it they are dropped and counted, as there).
let spans: SpanExport | undefined;
let spansLoading: Promise<SpanExport | undefined> | undefined;
const spansWaiting: [ProxyFacts, StoredReport][] = [];
/** the spans of the exchanges waiting, and of those dropped while waiting */
let spansWaitingCount = 0;
let spansDroppedWaiting = 0;
/** an exchange's spans: its own, and its upstream call's when it went upstream (exchange-spans.ts) */
const spanCount = (facts: ProxyFacts): number => (facts.trace?.upstream ? 2 : 1);
let lastSpanError = 0;

function loadSpans(): Promise<SpanExport | undefined> {
  spansLoading ??= import('./tracing/span-export.js')
    .then(({ createSpanExport }) =>
      createSpanExport(settings.tracing, {
        version: settings.defaults.clientVersion,
        onCounters: () => send({ t: 'counters', counters: counters() }),
        onFailure: (err) =>
          send({ t: 'log', level: 'warn', obj: { err: { type: err?.name ?? 'Error', message: err?.message ?? 'export failed' }, endpoint: settings.tracing.url }, msg: 'trace export failed: spans are counted in llm_relay_trace_spans_failed_total (logged once a minute)' }),
        ...(settings.upstreamProxy ? { proxy: settings.upstreamProxy } : {}),
      }),
    )
    .then(
      (loaded) => {
        spans = loaded;
        spansWaitingCount = 0;
        for (const [facts, report] of spansWaiting.splice(0)) submitSpans(facts, report);
        return loaded;
      },
      (err: unknown) => {
        // (settings were checked at start: this is a bug or a broken install; reports go on without spans)
        spansDroppedWaiting += spansWaitingCount;
        spansWaitingCount = 0;
        spansWaiting.length = 0;
        send({ t: 'log', level: 'error', obj: logged(err), msg: 'tracing could not start on the report worker: spans are dropped' });
        return undefined;
      },
    );
  return spansLoading;
}

function submitSpans(facts: ProxyFacts, report: StoredReport): void {
  try {
    spans!.submit(facts, report);
  } catch (err) {
    // a span that cannot be built never costs the report; once a minute in the log
    if (Date.now() - lastSpanError < 60_000) return;
    lastSpanError = Date.now();
    send({ t: 'log', level: 'error', obj: { ...logged(err), reportId: facts.id }, msg: 'span not built' });
  }
}

function traced(facts: ProxyFacts, report: StoredReport): void {
  if (spans) return submitSpans(facts, report);
  const n = spanCount(facts);
  if (spansWaitingCount + n <= settings.tracing.maxQueueSize) {
    spansWaiting.push([facts, report]);
    spansWaitingCount += n;
  } else spansDroppedWaiting += n;
  void loadSpans();
}

const store = lazyStore();
// (a function declaration: the writer calls it from a delivery that may start as soon as it is created)
function counters() {
  const c = { pending: writer.pending, written: writer.written, dropped: writer.dropped, outboxDepth: writer.outboxDepth };
  if (!settings.tracing.enabled) return c;
  const spanCounters = spans ? { ...spans.counters } : { exported: 0, failed: 0, dropped: 0 };
  spanCounters.dropped += spansDroppedWaiting;
  return Object.assign(c, { spans: spanCounters });
}
const outbox = await openOutboxFile(settings.outboxFile);
// SQLite acknowledges reports through the journal (report-journal.ts); PostgreSQL commits them itself, on
// its server, so the journal would only add a sync here.
const opened = settings.reportsUrl === 'sqlite' ? openReportJournal(settings.journalFile) : undefined;
/**
 * SQLite inserts on this thread: a batch of hundreds held every 201 behind it for ~17 ms (the direct API's p99
 * under 50 clients twice adeeb7e's). In slices of this many, with a turn between them, the journal's groups are
 * acknowledged while a batch that holds journaled reports is written (docs/benchmarks.md). PostgreSQL's
 * inserts wait on its server, not on this thread.
 */
const SQLITE_SLICE = 64;
let lastStoreError = 0;
const writer = createReportWriter({
  store,
  outbox,
  ...(opened ? { journal: opened.journal, replay: opened.left } : {}),
  flushMs: settings.flushMs,
  lazyMs: settings.writeDelayMs,
  batchMax: settings.batchMax,
  ...(settings.reportsUrl === 'sqlite' ? { slice: SQLITE_SLICE } : {}),
  retryMs: settings.outboxRetryMs,
  onStoreError: (err) => {
    // Once a second at most: a store outage under load would otherwise flood the log.
    if (Date.now() - lastStoreError < 1000) return;
    lastStoreError = Date.now();
    send({ t: 'log', level: 'warn', obj: { ...logged(err), outboxDepth: outbox.depth }, msg: 'report store failed: reports go to the outbox' });
  },
  // The event loop learns of outbox deliveries as they happen (for /readyz and /metrics), not only with the
  // next batch's answer.
  onDelivered: () => send({ t: 'counters', counters: counters() }),
  onQuarantined: (count) =>
    send({ t: 'log', level: 'error', obj: { count }, msg: 'the report store refused reports it should take: kept aside in outbox.rejected.ndjson' }),
});
const sink = createReportSink({
  pipeline: createReportPipeline({
    prices: loadPriceTable(settings.pricesFile),
    maxBodyBytes: settings.maxBodyBytes,
    maxJsonDepth: settings.maxJsonDepth,
    defaults: settings.defaults,
  }),
  writer,
  onBroken: (err, id) => send({ t: 'log', level: 'error', obj: { ...logged(err), reportId: id }, msg: 'report not written' }),
  ...(settings.tracing.enabled ? { onTraced: traced } : {}),
});

// The SQLite report file counts by the pages its rows hold (sizeBytes): the file itself shrinks only at the
// next checkpoint, and the budget would otherwise take more reports than it needs to.
const sqliteFiles = new Set(settings.reportsUrl === 'sqlite' ? [settings.sqliteFile, `${settings.sqliteFile}-wal`, `${settings.sqliteFile}-shm`] : []);
let lastPruneError = 0;
let pruneMore: boolean | undefined;
const pruner = createReportPruner({
  store,
  reportRetentionMs: settings.reportRetentionMs,
  bodyRetentionMs: settings.bodyRetentionMs,
  maxBytes: settings.dataMaxBytes,
  measure: async () => directoryBytes(settings.dataDir, sqliteFiles) + (await store.sizeBytes!()),
  onError: (err) => {
    // A store outage is the writer's to report; once a minute is enough here.
    if (Date.now() - lastPruneError < 60_000) return;
    lastPruneError = Date.now();
    send({ t: 'log', level: 'warn', obj: logged(err), msg: 'a retention step failed; it is tried again' });
  },
  // The event loop stops an idle worker, but not one with a retention backlog (report-thread.ts): it hears
  // after the first step and whenever that changes.
  onStep: (result) => {
    if (result.more === pruneMore) return;
    pruneMore = result.more;
    send({ t: 'pruning', more: pruneMore, counters: counters() });
  },
});
pruner.start();

port.on('message', (msg: ToWorker) => {
  if (msg.t === 'batch') {
    sink.take(msg.batch).then(
      (outcomes) => send({ t: 'done', n: msg.n, outcomes, counters: counters() }),
      (err: unknown) => {
        send({ t: 'log', level: 'error', obj: logged(err), msg: 'a batch of reports failed' });
        send({ t: 'done', n: msg.n, counters: counters() });
      },
    );
  } else if (msg.t === 'flush') {
    sink.flush().finally(() => send({ t: 'done', n: msg.n, counters: counters() }));
  } else {
    void (async () => {
      await pruner.stop();
      await sink.flush().catch(() => undefined);
      // At the relay's stop the last spans go out before the answer; at an idle stop, after it: the files
      // are closed by then, so the next worker can start while this one still waits on the endpoint.
      if (msg.t === 'close') await (await spansLoading)?.shutdown();
      await writer.close();
      await Promise.allSettled([store.closeIfOpen(), outbox.close()]);
      opened?.journal.close();
      send({ t: 'done', n: msg.n, counters: counters() });
      const loaded = msg.t === 'idle-close' ? await spansLoading : undefined;
      if (loaded) {
        await loaded.shutdown();
        send({ t: 'spans-done', counters: counters() });
      }
      port.close();
    })();
  }
});
