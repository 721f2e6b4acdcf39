// Retention on both report stores, with a clock the test moves: reports past RELAY_REPORT_RETENTION go,
// reports past RELAY_BODY_RETENTION keep everything but their bodies (and say so), blobs no report with
// bodies uses are swept while shared ones stay, and a size budget takes the oldest reports first. Real
// SQLite and PostgreSQL; never skipped.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createReportPruner } from '../../src/storage/report-pruner.js';
import type { ReportStore, StoredReport } from '../../src/storage/report-store.js';
import { type StoreKind, dropSchemas, missingBlobs, openStore } from '../helpers/report-stores.js';
import { makeReport } from './report-fixtures.js';

afterAll(dropSchemas);

const DAY = 86_400_000;
const D = Date.parse('2025-01-01T00:00:00.000Z');
const SYSTEM = { role: 'system', content: 'Shared by every conversation. '.repeat(40) };

/** A report received `days` after D, with a system prompt every report shares and content of its own. */
function reportAt(id: string, days: number, own = `content of ${id}, long enough to be kept in a blob of its own`): StoredReport {
  const at = new Date(D + days * DAY).toISOString();
  return makeReport(id, 0, {
    receivedAt: at,
    request: { timestamp: at, body: { model: 'gpt-4o', messages: [SYSTEM, { role: 'user', content: own }] } },
    response: { timestamp: at, body: { id: `c-${id}`, choices: [{ index: 0, message: { role: 'assistant', content: `answer to ${own}` } }] } },
    requestSha256: `req-sha-${id}`,
    responseSha256: `res-sha-${id}`,
  });
}

async function pruneUntilDone(step: () => Promise<{ more: boolean }>): Promise<number> {
  let steps = 0;
  while ((await step()).more) if (++steps > 2000) throw new Error('pruning never ended');
  return steps + 1;
}

async function allIds(store: ReportStore): Promise<string[]> {
  return (await store.list({ limit: 1000 })).items.map((r) => r.id).sort();
}

describe.each<StoreKind>(['sqlite', 'postgres'])('retention: %s', (kind) => {
  it('deletes reports past report retention and strips bodies past body retention, in bounded steps', async () => {
    let clock = D;
    const s = await openStore(kind, () => clock, { blobsOnly: true });
    try {
      const days = [0, 5, 20, 40, 50, 75, 95, 99];
      const sent = new Map<string, StoredReport>();
      for (const day of days) {
        clock = D + day * DAY;
        const report = reportAt(`d${day}`, day);
        sent.set(report.id, report);
        await s.store.insertMany([report]);
      }
      clock = D + 100 * DAY + 3_600_000;
      const pruner = createReportPruner({
        store: s.store,
        reportRetentionMs: 90 * DAY,
        bodyRetentionMs: 30 * DAY,
        maxBytes: 0,
        measure: async () => 0,
        now: () => clock,
        rows: 2,
      });
      // Two rows per step: two old reports and three to strip take more than one.
      expect(await pruneUntilDone(() => pruner.step())).toBeGreaterThan(1);

      expect(await allIds(s.store)).toEqual(['d20', 'd40', 'd50', 'd75', 'd95', 'd99']);
      for (const id of ['d20', 'd40', 'd50']) {
        const { request, response, ...rest } = sent.get(id)!;
        const { body: _q, ...requestLeft } = request;
        const { body: _a, ...responseLeft } = response;
        // Everything but the bodies stays: metadata, sizes, sha256, usage, cost.
        expect(await s.store.get(id)).toEqual({ ...rest, request: requestLeft, response: responseLeft, bodiesExpired: true });
      }
      for (const id of ['d75', 'd95', 'd99']) expect(await s.store.get(id)).toEqual(sent.get(id));
      // The list reads them the same way.
      const listed = (await s.store.list({ limit: 10 })).items;
      expect(listed.find((r) => r.id === 'd40')?.bodiesExpired).toBe(true);
      expect(listed.find((r) => r.id === 'd95')?.response.body).toEqual(sent.get('d95')!.response.body);

      // Swept: every blob only the deleted or stripped reports used. Kept: the three reports' own blobs
      // (user message, answer message, two skeletons each) and the system prompt they share.
      expect(await missingBlobs(s)).toEqual([]);
      expect(Number((await s.rows('SELECT count(*) AS n FROM bodies'))[0]!.n)).toBe(3 * 4 + 1);
      // Nothing more to do.
      expect(await pruner.step()).toEqual({ reports: 0, expired: 0, bodies: 0, more: false });
    } finally {
      await s.store.close();
    }
  });

  it('keeps a blob that a report with bodies still uses, however old the reports that wrote it first', async () => {
    let clock = D;
    const s = await openStore(kind, () => clock);
    try {
      await s.store.insertMany([reportAt('old', 0, 'the same question')]);
      clock = D + 60 * DAY;
      await s.store.insertMany([reportAt('new', 60, 'the same question')]);
      clock = D + 61 * DAY;
      const pruner = createReportPruner({
        store: s.store,
        reportRetentionMs: 0,
        bodyRetentionMs: 30 * DAY,
        maxBytes: 0,
        measure: async () => 0,
        now: () => clock,
      });
      await pruneUntilDone(() => pruner.step());
      expect((await s.store.get('old'))?.bodiesExpired).toBe(true);
      const got = await s.store.get('new');
      expect(got?.request.body).toEqual(reportAt('new', 60, 'the same question').request.body);
      expect(await missingBlobs(s)).toEqual([]);
    } finally {
      await s.store.close();
    }
  });

  it('keeps the data under a size budget by deleting the oldest reports first', async () => {
    let clock = D;
    const s = await openStore(kind, () => clock);
    try {
      for (let day = 0; day < 24; day++) {
        clock = D + day * DAY;
        // Incompressible content, so that every report weighs about the same.
        await s.store.insertMany([reportAt(`r${String(day).padStart(2, '0')}`, day, randomBytes(6000).toString('base64'))]);
      }
      const full = await s.store.sizeBytes!();
      const budget = Math.floor(full / 2);
      clock = D + 30 * DAY;
      const pruner = createReportPruner({
        store: s.store,
        reportRetentionMs: 0,
        bodyRetentionMs: 0,
        maxBytes: budget,
        measure: () => s.store.sizeBytes!(),
        now: () => clock,
        rows: 3,
      });
      await pruneUntilDone(() => pruner.step());
      const left = await allIds(s.store);
      expect(await s.store.sizeBytes!()).toBeLessThanOrEqual(budget);
      expect(left.length).toBeGreaterThan(4);
      expect(left.length).toBeLessThan(20);
      // Oldest first: what is left is the newest reports, without a gap.
      const all = Array.from({ length: 24 }, (_, day) => `r${String(day).padStart(2, '0')}`);
      expect(left).toEqual(all.slice(24 - left.length));
      for (const id of left) expect((await s.store.get(id))?.bodiesExpired).toBeUndefined();
      expect(await missingBlobs(s)).toEqual([]);
    } finally {
      await s.store.close();
    }
  });
});
