// Cache hits of one origin are the same report again and again: the same request, the same answer, the same
// derived usage and cost. Only five fields differ from one to the next: its id, when it arrived and ended
// (receivedAt, request.timestamp, response.timestamp) and how long it took. The report pipeline derives a
// hit's report once, then makes the next ones as variants of it (a copy with those fields set), and a store
// that keeps a report in a packed form packs a variant from its base's template instead of walking the whole
// report again (report-row-codec.ts packTemplate, body-store.ts). A variant is a complete report: whoever
// does not ask for its base sees no difference.
import type { StoredReport } from './report-store.js';

/** The fields in which a variant differs from its base, as paths into the report. */
export const VARIANT_PATHS: readonly (readonly string[])[] = [['id'], ['receivedAt'], ['request', 'timestamp'], ['response', 'timestamp'], ['durationMs']];

export interface VariantFields {
  id: string;
  receivedAt: string;
  requestTimestamp: string;
  responseTimestamp: string;
  durationMs: number | null;
}

const bases = new WeakMap<StoredReport, StoredReport>();

/** Whether a report can be the base of variants: every variant field present, the rest left as it is. */
export function canVary(report: StoredReport): boolean {
  return (
    typeof report.id === 'string' &&
    typeof report.receivedAt === 'string' &&
    typeof report.request?.timestamp === 'string' &&
    typeof report.response?.timestamp === 'string' &&
    'durationMs' in report
  );
}

/** A copy of `base` with the variant fields set (its key order kept), remembered as a variant of it. */
export function variant(base: StoredReport, fields: VariantFields): StoredReport {
  // A spread of one base again and again takes V8's fast clone of its shape (85 ns here, Object.assign 1 µs);
  // keys set after it keep the places they have in the base.
  const report: StoredReport = {
    ...base,
    request: { ...base.request, timestamp: fields.requestTimestamp },
    response: { ...base.response, timestamp: fields.responseTimestamp },
    id: fields.id,
    receivedAt: fields.receivedAt,
    durationMs: fields.durationMs,
  };
  bases.set(report, bases.get(base) ?? base);
  return report;
}

/** The report this one is a variant of (never itself a variant), if it is one. */
export function baseOf(report: StoredReport): StoredReport | undefined {
  return bases.get(report);
}
