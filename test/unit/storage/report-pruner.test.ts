// The pruner's own decisions, on a store that records what it was asked: cut-offs from the (fake) clock and
// the retention settings, `off` as no cut-off, the size budget measured every step while over it and once a
// minute while under, and a budget it cannot meet (nothing left to delete) not spinning.
import { describe, expect, it } from 'vitest';
import { createReportPruner } from '../../../src/storage/report-pruner.js';
import type { PruneResult, PruneStep, ReportStore } from '../../../src/storage/report-store.js';

function recordingStore(answer: (step: PruneStep) => PruneResult): ReportStore & { steps: PruneStep[] } {
  const steps: PruneStep[] = [];
  const no = async (): Promise<never> => {
    throw new Error('not used');
  };
  return {
    kind: 'test',
    steps,
    insertMany: no,
    get: no,
    list: no,
    count: no,
    stats: no,
    ping: no,
    close: async () => {},
    async prune(step) {
      steps.push(step);
      return answer(step);
    },
  };
}

const DAY = 86_400_000;
const idle: PruneResult = { reports: 0, expired: 0, bodies: 0, more: false };

describe('report pruner', () => {
  it('asks the store for one bounded step with cut-offs from the clock; off means none', async () => {
    const store = recordingStore(() => idle);
    const clock = 1_000 * DAY;
    const on = createReportPruner({ store, reportRetentionMs: 90 * DAY, bodyRetentionMs: 30 * DAY, maxBytes: 0, measure: async () => 0, now: () => clock, rows: 7 });
    await on.step();
    const off = createReportPruner({ store, reportRetentionMs: 0, bodyRetentionMs: 0, maxBytes: 0, measure: async () => 0, now: () => clock });
    await off.step();
    expect(store.steps).toEqual([
      { now: clock, reportsBefore: clock - 90 * DAY, bodiesBefore: clock - 30 * DAY, trimOldest: 0, rows: 7 },
      { now: clock, reportsBefore: Number.MIN_SAFE_INTEGER, bodiesBefore: Number.MIN_SAFE_INTEGER, trimOldest: 0, rows: 500 },
    ]);
  });

  it('measures every step while over budget, then once a minute', async () => {
    let size = 3000;
    let measured = 0;
    const store = recordingStore((step) => {
      if (step.trimOldest > 0) size -= 1000;
      return { ...idle, reports: step.trimOldest > 0 ? 1 : 0 };
    });
    let clock = 0;
    const pruner = createReportPruner({
      store,
      reportRetentionMs: 0,
      bodyRetentionMs: 0,
      maxBytes: 1500,
      measure: async () => {
        measured++;
        return size;
      },
      now: () => clock,
    });
    expect((await pruner.step()).more).toBe(true); // 3000 → 2000
    expect((await pruner.step()).more).toBe(true); // 2000 → 1000
    expect((await pruner.step()).more).toBe(false); // under: measured, nothing trimmed
    clock += 30_000;
    await pruner.step();
    expect(measured).toBe(3);
    size = 5000;
    clock += 30_000;
    expect((await pruner.step()).more).toBe(true);
    expect(measured).toBe(4);
    expect(store.steps.map((s) => s.trimOldest)).toEqual([500, 500, 0, 0, 500]);
  });

  it('stops asking when over budget with nothing left to delete', async () => {
    const store = recordingStore(() => idle);
    const pruner = createReportPruner({ store, reportRetentionMs: 0, bodyRetentionMs: 0, maxBytes: 1, measure: async () => 10, now: () => 0 });
    expect(await pruner.step()).toEqual(idle);
  });
});
