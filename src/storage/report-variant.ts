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

/**
 * A variant's own values. Its times are epoch ms, written as `Date#toISOString` writes them: receivedAt and
 * response.timestamp from `receivedMs` (a hit ends when its answer is written), request.timestamp from
 * `requestMs`. A store keeps them as these numbers, so it never reads the texts back (VariantOf).
 */
export interface VariantFields {
  id: string;
  requestMs: number;
  receivedMs: number;
  durationMs: number | null;
}

/** What a variant was made of: its base, and its own values (times as the integer ms of their texts). */
export interface VariantOf {
  base: StoredReport;
  fields: VariantFields;
  /** the texts written for receivedMs and requestMs */
  receivedAt: string;
  requestTimestamp: string;
}

const variants = new WeakMap<StoredReport, VariantOf>();

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
  const receivedMs = dateMs(fields.receivedMs);
  const requestMs = dateMs(fields.requestMs);
  const receivedAt = isoTime(receivedMs);
  const requestTimestamp = isoTime(requestMs);
  // A spread of one base again and again takes V8's fast clone of its shape (~0.1 µs; a base in dictionary
  // mode, as deriveReport's Object.assign leaves a report, takes microseconds: the pipeline keeps a spread
  // copy); keys set after it keep the places they have in the base.
  const report: StoredReport = {
    ...base,
    request: { ...base.request, timestamp: requestTimestamp },
    response: { ...base.response, timestamp: receivedAt },
    id: fields.id,
    receivedAt,
    durationMs: fields.durationMs,
  };
  const own: VariantFields = { id: fields.id, requestMs, receivedMs, durationMs: fields.durationMs };
  variants.set(report, { base: variants.get(base)?.base ?? base, fields: own, receivedAt, requestTimestamp });
  return report;
}

/** The ms a Date keeps of a time: a fraction cut, -0 as 0 (its texts are those of this number). */
export function dateMs(t: number): number {
  return Number.isInteger(t) && t !== 0 ? t : new Date(t).getTime();
}

// The text of the second the last times fell in: hits come many a second, and Date#toISOString takes
// ~0.2-0.8 µs here where appending the milliseconds to it takes a tenth of that.
let second = Number.NaN;
let secondText = '';

/** `new Date(ms).toISOString()` for an integer ms (throwing as it does for a time out of range). */
export function isoTime(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s !== second) {
    const text = new Date(s * 1000).toISOString();
    // (years before 0 or after 9999 are written with a sign and six digits: left to Date)
    if (text.length !== 24) return new Date(ms).toISOString();
    second = s;
    secondText = text.slice(0, 20);
  }
  const frac = ms - s * 1000;
  return `${secondText}${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}Z`;
}

/**
 * A variant's own values at VARIANT_PATHS, in that order, from what it was made of (never read back from its
 * texts); its times as `time` makes them of their ms and text.
 */
export function variantValues<T>(of: VariantOf, time: (ms: number, text: string) => T): (string | number | null | T)[] {
  const received = time(of.fields.receivedMs, of.receivedAt);
  return [of.fields.id, received, time(of.fields.requestMs, of.requestTimestamp), received, of.fields.durationMs];
}

/** What this report is a variant of (its base never itself a variant), if it is one. */
export function variantOf(report: StoredReport): VariantOf | undefined {
  return variants.get(report);
}
