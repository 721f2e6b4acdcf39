// A hit's report after the first of its kind is a variant of it (report-variant.ts): its own id and times,
// written as Date writes them, and remembered as numbers for the stores.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { StoredReport } from '../../../src/storage/report-store.js';
import { VARIANT_PATHS, isoTime, variant, variantOf, variantValues } from '../../../src/storage/report-variant.js';

const base = {
  id: 'base',
  receivedAt: '2026-01-01T00:00:01.000Z',
  request: { timestamp: '2026-01-01T00:00:00.000Z', body: { q: 1 } },
  response: { timestamp: '2026-01-01T00:00:01.000Z', status: 200, body: { a: 2 } },
  durationMs: 1000,
  model: 'm',
} as unknown as StoredReport;

describe('a variant of a report', () => {
  it('writes any time as Date#toISOString does, one after another in and across seconds (property)', () => {
    // from before year 0 to after 9999, and times a few ms apart (the texts of one second reused)
    const ms = fc.integer({ min: -70_000_000_000_000, max: 300_000_000_000_000 });
    fc.assert(
      fc.property(fc.array(fc.oneof(ms, fc.integer({ min: 1_800_000_000_000, max: 1_800_000_003_000 })), { minLength: 1, maxLength: 30 }), (times) => {
        for (const t of times) expect(isoTime(t)).toBe(new Date(t).toISOString());
      }),
      { numRuns: 500 },
    );
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
    expect(() => isoTime(8.64e15 + 1)).toThrow(RangeError);
  });

  it('is the base with its own id and times, and keeps them as the numbers of its texts', () => {
    const v = variant(base, { id: 'v', requestMs: 1_800_000_000_123.9, receivedMs: 1_800_000_000_999.5, durationMs: 876 });
    expect(v).toEqual({
      ...base,
      id: 'v',
      receivedAt: '2027-01-15T08:00:00.999Z',
      request: { ...base.request, timestamp: '2027-01-15T08:00:00.123Z' },
      response: { ...base.response, timestamp: '2027-01-15T08:00:00.999Z' },
      durationMs: 876,
    });
    expect(JSON.stringify(Object.keys(v))).toBe(JSON.stringify(Object.keys(base)));
    const of = variantOf(v)!;
    expect(of.base).toBe(base);
    expect(of.fields).toEqual({ id: 'v', requestMs: Date.parse(v.request.timestamp), receivedMs: Date.parse(v.receivedAt), durationMs: 876 });
    expect([of.receivedAt, of.requestTimestamp]).toEqual([v.receivedAt, v.request.timestamp]);
    // its values at VARIANT_PATHS, in their order, as the texts or as the numbers they were made of
    const at = (path: readonly string[]) => path.reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], v);
    expect(variantValues(of, (_ms, text) => text)).toEqual(VARIANT_PATHS.map(at));
    expect(variantValues(of, (ms) => ms)).toEqual(VARIANT_PATHS.map((path) => (typeof at(path) === 'string' && path[0] !== 'id' ? Date.parse(at(path) as string) : at(path))));
    // a variant of a variant is one of the same base; -0 is kept as 0, as a Date keeps it
    const again = variant(v, { id: 'w', requestMs: -0, receivedMs: 5, durationMs: 5 });
    expect(variantOf(again)?.base).toBe(base);
    expect(Object.is(variantOf(again)!.fields.requestMs, 0)).toBe(true);
    expect(again.request.timestamp).toBe('1970-01-01T00:00:00.000Z');
  });
});
