// The dashboard's chart buckets and formats, as plain functions (the page imports the same modules).
import { describe, expect, it } from 'vitest';
import { buckets } from '../../../dashboard/chart.js';
import { statusText, usd } from '../../../dashboard/format.js';

const day = (key: string, requests: number, costUsd = 0) => ({ key, requests, costUsd });
const at = (iso: string) => Date.parse(iso);
const shape = (r: ReturnType<typeof buckets>) => ({
  unit: r.unit,
  list: r.list.map((b) => [new Date(b.start).toISOString().slice(0, 10), b.requests]),
});

describe('chart buckets', () => {
  it('gives every day between the first and the last its place, over a new year', () => {
    const r = buckets([day('2024-12-30', 2), day('2024-12-31', 2), day('2025-01-03', 5)], null, at('2026-01-01'));
    expect(shape(r)).toEqual({
      unit: 'day',
      list: [['2024-12-30', 2], ['2024-12-31', 2], ['2025-01-01', 0], ['2025-01-02', 0], ['2025-01-03', 5]],
    });
  });

  it('with a range, runs from the range’s first UTC day to today', () => {
    const r = buckets([day('2025-01-03', 1)], at('2025-01-01T15:00:00Z'), at('2025-01-05T10:00:00Z'));
    expect(shape(r).list).toEqual([['2025-01-01', 0], ['2025-01-02', 0], ['2025-01-03', 1], ['2025-01-04', 0], ['2025-01-05', 0]]);
  });

  it('sums a span over three months into weeks from Monday', () => {
    // 2025-01-01 is a Wednesday; 2025-04-15 a Tuesday
    const r = buckets([day('2025-01-01', 1, 0.5), day('2025-01-05', 2, 0.25), day('2025-04-15', 4)], null, 0);
    expect(r.unit).toBe('week');
    expect(r.list).toHaveLength(16);
    expect(shape(r).list[0]).toEqual(['2024-12-30', 3]);
    expect(r.list[0]!.costUsd).toBe(0.75);
    expect(shape(r).list.at(-1)).toEqual(['2025-04-14', 4]);
    expect(r.list.every((b) => new Date(b.start).getUTCDay() === 1 && b.end - b.start === 7 * 86_400_000)).toBe(true);
  });

  it('sums a span over two years into calendar months', () => {
    const r = buckets([day('2022-06-30', 1), day('2023-02-28', 2), day('2025-02-01', 3)], null, 0);
    expect(r.unit).toBe('month');
    expect(r.list).toHaveLength(33);
    expect(shape(r).list.filter(([, n]) => n !== 0)).toEqual([['2022-06-01', 1], ['2023-02-01', 2], ['2025-02-01', 3]]);
    expect(new Date(r.list[8]!.end).toISOString()).toBe('2023-03-01T00:00:00.000Z');
  });

  it('has nothing to draw without days', () => {
    expect(buckets([{ key: null, requests: 3, costUsd: 0 }], null, 0)).toEqual({ unit: 'day', list: [] });
  });
});

describe('usd', () => {
  it('writes cents from a dollar up and three significant digits below, never $0.00 for a cost above zero', () => {
    const cases: [number | null, string][] = [
      [null, '—'],
      [0, '$0.00'],
      [0.5, '$0.50'],
      [0.0123, '$0.0123'],
      [0.01885, '$0.0189'],
      [0.00045, '$0.00045'],
      [0.0000258, '$0.0000258'],
      [1e-9, '$0.000000001'],
      [1.234, '$1.23'],
      [1234.56, '$1,234.56'],
    ];
    expect(cases.map(([v]) => usd(v))).toEqual(cases.map(([, text]) => text));
  });
});

describe('statusText', () => {
  it('names how a proxied exchange ended, and nothing for an outcome it does not know', () => {
    expect(statusText({ status: 200, proxy: { outcome: 'stream-error' } })).toBe('200 · stream broke');
    expect(statusText({ status: 499, proxy: { outcome: 'client-abort' } })).toBe('499 · client left');
    expect(statusText({ status: 200, proxy: { outcome: 'complete' } })).toBe('200');
    expect(statusText({ status: 200, proxy: { outcome: 'constructor' } })).toBe('200');
    expect(statusText({ status: null })).toBe('—');
  });
});
