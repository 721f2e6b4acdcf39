// The report worker's side of a batch: each record becomes its stored report (report-pipeline.ts) and goes
// to the group-commit writer (report-writer.ts: the store, or the outbox while the store is down). A
// direct-API report is answered once its batch is durable: with the stored report's JSON (the 201's body),
// or with the reason it was not taken. Proxied calls' reports are acknowledged to nobody: they are written
// with the next commit, without an fsync of their own.
import { RELAY_ERR_REPORTS_UNAVAILABLE } from '../errors.js';
import { type RecordBatch, decodeBatch } from './exchange-record.js';
import type { ReportPipeline } from './report-pipeline.js';
import type { ReportWriter } from './report-writer.js';
import type { ProxyFacts } from './exchange-record.js';
import type { StoredReport } from '../storage/report-store.js';

/** How a direct-API report of a batch ended. */
export type ApiOutcome = { ok: true; text: string } | { ok: false; statusCode: number; code: string; message: string };

export interface ReportSink {
  /** Resolves with the outcome of the batch's API reports, in order, once each is durable or failed. */
  take(batch: RecordBatch): Promise<ApiOutcome[]>;
  /** Resolves when everything taken before is written (or failed). */
  flush(): Promise<void>;
}

export interface ReportSinkOptions {
  pipeline: ReportPipeline;
  writer: ReportWriter;
  /** a report that could not be built (a bug): it is counted and logged, never thrown at the batch */
  onBroken(err: unknown, id: string): void;
  /** a traced exchange's report is built: its spans can be (src/tracing/span-export.ts); must not throw */
  onTraced?(facts: ProxyFacts, report: StoredReport): void;
}

export function createReportSink(opts: ReportSinkOptions): ReportSink {
  const { pipeline, writer } = opts;
  return {
    take(batch) {
      const { proxy, api } = decodeBatch(batch);
      for (const record of proxy) {
        let report;
        try {
          report = pipeline.proxy(record);
        } catch (err) {
          opts.onBroken(err, record.facts.id);
          continue;
        }
        // Failures are counted by the writer (dropped) and reported to the outbox's logger.
        writer.add(report);
        if (record.facts.trace) opts.onTraced?.(record.facts, report);
      }
      return Promise.all(
        api.map(async (record): Promise<ApiOutcome> => {
          let report;
          try {
            report = pipeline.api(record);
          } catch (err) {
            opts.onBroken(err, record.id);
            return { ok: false, statusCode: 500, code: 'RELAY_ERR_INTERNAL', message: 'Internal error' };
          }
          // The 201's body, and the journal's line.
          const text = JSON.stringify(report);
          try {
            await writer.write(report, true, text);
          } catch (err) {
            const e = new RELAY_ERR_REPORTS_UNAVAILABLE(err instanceof Error ? err.message : String(err));
            return { ok: false, statusCode: e.statusCode, code: e.code, message: e.message };
          }
          return { ok: true, text };
        }),
      );
    },
    flush: () => writer.flush(),
  };
}
