// The one report service, on the event loop: both the direct API and the proxy record through here, and
// reads go to the report store from here. Recording is a hand-over: records are batched and sent to the
// report worker (report-sink.ts on its thread), which derives, stores and commits them. A proxied call's
// record waits for a quiet moment (3 ms after the last answer of a burst, at most 50 ms); a direct-API
// report goes at the end of the current turn of the event loop, and its promise resolves once it is
// durable, with the stored report's JSON.
import { RELAY_ERR_REPORTS_UNAVAILABLE, StoreUnavailableError } from '../errors.js';
import { createQuietTimer } from '../quiet-timer.js';
import type { ReportFilter, ReportPage, ReportQuery, ReportStore, StatsGroupBy, StatsResult, StoredReport } from '../storage/report-store.js';
import { type ApiRecord, type OutgoingProxyRecord, type RecordBatch, encodeBatch, wireLength } from './exchange-record.js';
import type { ApiOutcome } from './report-sink.js';

/** What the writer side says about itself, for /metrics and /readyz. */
export interface WriterCounters {
  /** reports handed over and not yet written */
  pending: number;
  /** reports the store has taken (directly or from the outbox) */
  written: number;
  /** reports neither the store nor the outbox took */
  dropped: number;
  /** reports waiting in the outbox */
  outboxDepth: number;
  /** with tracing on: spans exported, in failed exports, and dropped (queue full), by the report worker */
  spans?: { exported: number; failed: number; dropped: number };
}

/** The report worker, as the event loop sees it (report-thread.ts; in tests it may run in process). */
export interface ReportPort {
  /** Hands a batch over (its buffer is transferred); resolves with its API reports' outcomes. */
  send(batch: RecordBatch): Promise<ApiOutcome[]>;
  /** Resolves when everything sent before is written (or failed). */
  flush(): Promise<void>;
  close(): Promise<void>;
  readonly counters: WriterCounters;
  /** true while no worker thread runs: the next batch starts one (report-thread.ts; absent in process) */
  readonly asleep?: boolean;
}

export interface ReportServiceOptions {
  port: ReportPort;
  /** the store reads go to (the worker writes to the same one) */
  store: ReportStore;
  /** most records in one batch */
  batchMax: number;
  /** proxied calls whose upstream answers are still open (Exchange.openCalls): how the service tells a burst (see BURST_OPEN) */
  openCalls?: () => number;
  /**
   * Called when a burst's records have waited for its end (see BURST_OPEN) and the event loop is quiet, just
   * before they start the stopped worker: the relay gives back the burst's memory there (app.ts).
   */
  onBurstEnd?: () => void;
}

/**
 * Most body bytes in one batch: a burst of long streams ending together (a thousand at once) crosses in
 * slices of this size, so neither thread ever holds the whole burst twice.
 */
const BATCH_BYTES = 1024 * 1024;
/**
 * Most body bytes of proxied calls' records handed over and not yet taken by the worker: the rest of a
 * burst waits here, as the records it already is, rather than as copies queued up for the worker thread
 * (where each batch would also be parsed while the ones before it are written).
 */
const IN_FLIGHT_BYTES = 2 * 1024 * 1024;

/**
 * A burst's end, with the worker stopped (RELAY_REPORT_WORKER_IDLE_MS): proxied calls' records that come while
 * at least BURST_OPEN calls are still open (a thousand streams ending together) do not start the worker at
 * once. They wait until no more have come for BURST_QUIET_MS and fewer than BURST_OPEN calls are open (the
 * burst is over), for at most BURST_MAX_MS and BURST_MAX_RECORDS. If at least BURST_RECORDS waited and the
 * burst ended, `onBurstEnd` first gives back what it left on the event loop. The worker's ~30 MB (its
 * isolate, young generation, the token tables, the batches it derives) then come after the burst's memory is
 * gone, not on top of it: 1,000 streams ending together peaked at ~160-165 MB with the worker started by
 * the first records, ~130-140 this way (docs/benchmarks.md). A direct-API report, a read or a flush ends the
 * wait at once; a running worker, or a relay with few calls open, hands every batch over as it comes.
 */
const BURST_OPEN = 64;
const BURST_RECORDS = 64;
const BURST_QUIET_MS = 200;
const BURST_MAX_MS = 2_000;
/** (steady traffic rather than a burst's end: then the worker starts, with no give-back) */
const BURST_MAX_RECORDS = 2_000;

export interface ReportService {
  /** Hands a proxied exchange's record over; its report is written a moment later. */
  recordProxy(record: OutgoingProxyRecord): void;
  /** A direct-API report (its validated JSON text): resolves with the stored report's JSON once durable. */
  recordApi(record: ApiRecord): Promise<string>;
  get(id: string): Promise<StoredReport | undefined>;
  list(query: ReportQuery): Promise<ReportPage>;
  stats(filter: ReportFilter, groupBy?: StatsGroupBy): Promise<StatsResult>;
  /** Hands everything over and waits until it is written. */
  flush(): Promise<void>;
  /** flush, then stop the worker */
  close(): Promise<void>;
  readonly counters: WriterCounters;
}

interface WaitingApi {
  record: ApiRecord;
  resolve(text: string): void;
  reject(err: unknown): void;
}

export function createReportService(opts: ReportServiceOptions): ReportService {
  const { port } = opts;
  let proxy: OutgoingProxyRecord[] = [];
  let proxyBytes = 0;
  let api: WaitingApi[] = [];
  let immediate: NodeJS.Immediate | undefined;
  let inFlight = 0;
  /** body bytes of the batches the worker has not answered yet */
  let inFlightBytes = 0;
  let closed = false;
  /** records went to the worker since the last flush: a read writes them first (the worker may hold them back a moment) */
  let unsettled = true;
  /** the flush a read started, until the worker answers: reads that come meanwhile wait for it too */
  let settling: Promise<void> | undefined;

  /** Reads see every report recorded before them. */
  async function settled<T>(read: () => Promise<T>): Promise<T> {
    if (unsettled || proxy.length > 0 || api.length > 0) {
      unsettled = false;
      send(true);
      const flushed = port.flush();
      settling = flushed;
      const done = (): void => {
        if (settling === flushed) settling = undefined;
      };
      flushed.then(done, done);
    }
    // A read that finds nothing new to hand over may still come while an earlier read's flush is under way
    // (the dashboard asks five at once): it waits for that flush, or it would read the store before the
    // reports the flush writes.
    if (settling) await settling;
    return unavailableAs503(read());
  }

  /**
   * Hands what waits over, in batches of at most BATCH_BYTES of bodies (and batchMax records). Proxied
   * calls' records wait while IN_FLIGHT_BYTES are with the worker (they go as it answers); direct-API
   * reports, whose clients wait, go at once, and `all` (a flush, a read) sends everything. With the worker
   * stopped, a burst's records first wait for its end (BURST_OPEN; `burstOver` when it has come).
   */
  function send(all = false, burstOver = false): void {
    quiet.cancel();
    if (immediate) {
      clearImmediate(immediate);
      immediate = undefined;
    }
    if (all || burstOver || api.length > 0) endBurstWait();
    else if (waitsForBurstEnd()) return;
    while (proxy.length > 0 || api.length > 0) {
      if (!all && api.length === 0 && inFlightBytes >= IN_FLIGHT_BYTES) return;
      let records = proxy;
      if (proxyBytes > BATCH_BYTES || proxy.length > opts.batchMax) {
        // a backlog (records that waited for room): one batch's worth of it
        let n = 0;
        let bytes = 0;
        while (n < proxy.length && n < opts.batchMax && (n === 0 || bytes < BATCH_BYTES)) bytes += bodyBytes(proxy[n++]!);
        records = proxy.slice(0, n);
        proxy = proxy.slice(n);
        proxyBytes -= bytes;
      } else {
        proxy = [];
        proxyBytes = 0;
      }
      const waiting = api;
      api = [];
      hand(records, waiting);
    }
  }

  function hand(records: OutgoingProxyRecord[], waiting: WaitingApi[]): void {
    const batch = encodeBatch(records, waiting.map((w) => w.record));
    const bytes = batch.bytes.byteLength;
    inFlight += records.length + waiting.length;
    inFlightBytes += bytes;
    unsettled = true;
    const settle = (): void => {
      inFlight -= records.length + waiting.length;
      inFlightBytes -= bytes;
      // what waited for room goes now
      if (proxy.length > 0 && inFlightBytes < IN_FLIGHT_BYTES) send();
    };
    port.send(batch).then(
      (outcomes) => {
        settle();
        waiting.forEach((w, i) => {
          const outcome = outcomes[i];
          if (outcome?.ok) w.resolve(outcome.text);
          else if (outcome) w.reject(Object.assign(new Error(outcome.message), { statusCode: outcome.statusCode, code: outcome.code }));
          else w.reject(new RELAY_ERR_REPORTS_UNAVAILABLE('the report worker gave no answer'));
        });
      },
      (err: unknown) => {
        settle();
        const e = new RELAY_ERR_REPORTS_UNAVAILABLE(err instanceof Error ? err.message : String(err), { cause: err });
        for (const w of waiting) w.reject(e);
      },
    );
  }
  const quiet = createQuietTimer(() => send());

  /** since when proxied records wait for their burst's end (BURST_OPEN), or undefined */
  let burstSince: number | undefined;
  const openCalls = (): number => opts.openCalls?.() ?? 0;
  const burstEnd = createQuietTimer(
    (quietly) => {
      const over = openCalls() < BURST_OPEN;
      // quiet, but the calls still open will end later (their records are the rest of the burst)
      if (quietly && !over && performance.now() - burstSince! < BURST_MAX_MS) return burstEnd.poke();
      burstSince = undefined;
      if (quietly && over && proxy.length >= BURST_RECORDS) opts.onBurstEnd?.();
      send(false, true);
    },
    { quietMs: BURST_QUIET_MS, maxDelayMs: BURST_MAX_MS },
  );
  /** Whether what waits now waits on for its burst's end (each call is a sign the burst goes on). */
  function waitsForBurstEnd(): boolean {
    if (burstSince === undefined) {
      if (port.asleep !== true || openCalls() < BURST_OPEN) return false;
      burstSince = performance.now();
    }
    if (proxy.length >= BURST_MAX_RECORDS || performance.now() - burstSince >= BURST_MAX_MS) {
      endBurstWait();
      return false;
    }
    burstEnd.poke();
    return true;
  }
  function endBurstWait(): void {
    if (burstSince === undefined) return;
    burstSince = undefined;
    burstEnd.cancel();
  }

  return {
    recordProxy(record) {
      if (closed) return;
      proxy.push(record);
      proxyBytes += bodyBytes(record);
      if (proxy.length >= opts.batchMax || proxyBytes >= BATCH_BYTES) send();
      else if (!immediate) quiet.poke();
    },
    recordApi(record) {
      return new Promise<string>((resolve, reject) => {
        if (closed) {
          reject(new RELAY_ERR_REPORTS_UNAVAILABLE('the relay is shutting down'));
          return;
        }
        api.push({ record, resolve, reject });
        // The client waits for this one: it goes at the end of this turn, with whatever else is waiting.
        if (api.length + proxy.length >= opts.batchMax) send();
        else immediate ??= setImmediate(send);
      });
    },
    get: (id) => settled(() => opts.store.get(id)),
    list: (query) => settled(() => opts.store.list(query)),
    stats: (filter, groupBy) => settled(() => opts.store.stats(filter, groupBy)),
    async flush() {
      send(true);
      await port.flush();
    },
    async close() {
      await this.flush();
      closed = true;
      await port.close();
    },
    get counters() {
      const c = port.counters;
      return { ...c, pending: c.pending + inFlight + proxy.length + api.length };
    },
  };
}

function bodyBytes(record: OutgoingProxyRecord): number {
  return (record.request?.length ?? 0) + wireLength(record.response);
}

async function unavailableAs503<T>(op: Promise<T>): Promise<T> {
  try {
    return await op;
  } catch (err) {
    if (err instanceof StoreUnavailableError) throw new RELAY_ERR_REPORTS_UNAVAILABLE(err.message, { cause: err });
    throw err;
  }
}
