// recordLater: the proxy's reports are built and written in a quiet moment after a burst of answers, never
// later than a bounded delay however busy the relay is, and flush() writes whatever is still waiting.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createPriceTable } from '../../../src/core/pricing.js';
import type { ReportInput } from '../../../src/core/report-derive.js';
import { createReportService } from '../../../src/core/report-service.js';
import type { ReportStore, StoredReport } from '../../../src/storage/report-store.js';

function memoryStore() {
  const rows: StoredReport[] = [];
  const store = {
    kind: 'test',
    async insertMany(reports: StoredReport[]) {
      rows.push(...reports);
    },
  } as unknown as ReportStore;
  return { store, rows };
}

function input(i: number): ReportInput {
  return {
    metadata: { client: 'test', clientVersion: '1', environment: 'test' },
    request: { timestamp: new Date(1_700_000_000_000 + i).toISOString(), body: { i } },
    response: { timestamp: new Date(1_700_000_000_001 + i).toISOString(), status: 200, body: { ok: i } },
    properties: {},
    cacheEnabled: true,
    cacheHit: false,
  } as ReportInput;
}

function service() {
  const s = memoryStore();
  const errors: unknown[] = [];
  const reports = createReportService({ store: s.store, prices: createPriceTable({}), flushMs: 0, batchMax: 500, maxBodyBytes: 65_536 });
  let built = 0;
  const later = (i: number) =>
    reports.recordLater(
      () => {
        built++;
        return { input: input(i), id: `r-${i}`, known: {} };
      },
      (err) => errors.push(err),
    );
  return { reports, rows: s.rows, errors, later, built: () => built };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('report service: recordLater', () => {
  it('builds nothing while answers keep coming, then all of them once it is quiet', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'performance', 'Date'] });
    const s = service();
    for (let i = 0; i < 20; i++) {
      s.later(i);
      await vi.advanceTimersByTimeAsync(1); // an answer every millisecond: a burst
    }
    expect(s.built()).toBe(0);
    await vi.advanceTimersByTimeAsync(10);
    expect(s.built()).toBe(20);
    expect(s.rows.map((r) => r.id)).toEqual(Array.from({ length: 20 }, (_, i) => `r-${i}`));
    expect(s.rows[3]).toMatchObject({ id: 'r-3', status: 200, request: { body: { i: 3 } }, response: { body: { ok: 3 } } });
    expect(s.errors).toEqual([]);
  });

  it('never waits much longer than 50 ms, however busy the relay is', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'performance', 'Date'] });
    const s = service();
    for (let i = 0; i < 200; i++) {
      s.later(i);
      await vi.advanceTimersByTimeAsync(1);
      // every report scheduled more than 55 ms ago has been written
      expect(s.rows.length).toBeGreaterThanOrEqual(Math.max(0, i - 55));
    }
    expect(s.rows.length).toBeGreaterThan(100);
    await vi.advanceTimersByTimeAsync(60);
    expect(s.rows.length).toBe(200);
    expect(new Set(s.rows.map((r) => r.id)).size).toBe(200);
  });

  it('flush writes what is waiting at once', async () => {
    const s = service();
    for (let i = 0; i < 5; i++) s.later(i);
    expect(s.built()).toBe(0);
    await s.reports.flush();
    expect(s.rows.map((r) => r.id)).toEqual(['r-0', 'r-1', 'r-2', 'r-3', 'r-4']);
    await s.reports.close();
  });

  it('a report that fails to build goes to onError and the others are written', async () => {
    const s = service();
    s.later(0);
    s.reports.recordLater(
      () => {
        throw new Error('bad facts');
      },
      (err) => s.errors.push(err),
    );
    s.later(2);
    await s.reports.flush();
    expect(s.rows.map((r) => r.id)).toEqual(['r-0', 'r-2']);
    expect(s.errors).toEqual([new Error('bad facts')]);
  });
});
