// The body store's plan of a batch: which blobs its reports need written, or their last use raised. Variants
// of one base (a hit's reports) share the base's blobs: each blob is written once, at the batch's newest time.
import { describe, expect, it } from 'vitest';
import { createBodyKeeper } from '../../../src/storage/body-store.js';
import { packReport, packTemplate, packVariant } from '../../../src/storage/report-row-codec.js';
import type { StoredReport } from '../../../src/storage/report-store.js';
import { VARIANT_PATHS, variant } from '../../../src/storage/report-variant.js';

function report(id: string, receivedAt: string, content: string): StoredReport {
  return {
    id,
    receivedAt,
    request: { timestamp: receivedAt, body: { model: 'gpt-4o-mini', messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content }] } },
    response: { timestamp: receivedAt, status: 200, body: { id: 'c', choices: [{ index: 0, message: { role: 'assistant', content: `re: ${content}` } }] } },
    durationMs: 0,
  } as unknown as StoredReport;
}

const at = (ms: number) => new Date(ms).toISOString();

describe('the blobs a batch writes', () => {
  it('once per blob at its newest time, whether its reports are variants of one base or not', () => {
    const keeper = createBodyKeeper(packReport, { template: (base) => packTemplate(base, VARIANT_PATHS), encode: (t, r) => packVariant(t, r) });
    const base = report('base', at(1_000), 'hello');
    const hits = [3_000, 9_000, 5_000].map((ms, i) =>
      variant(base, { id: `hit-${i}`, requestMs: ms - 10, receivedMs: ms, durationMs: 10 }),
    );
    const other = report('other', at(7_000), 'another question');
    const planned = [base, ...hits, other].map((r) => keeper.plan(r));
    // the variants' plans carry one list of blobs, their base's
    expect(new Set(planned.slice(1, 4).map((p) => p.blobs)).size).toBe(1);
    const writes = keeper.writes(planned, 0);
    const hexes = writes.map((w) => w.blob.hash.toString('hex'));
    expect(new Set(hexes).size).toBe(hexes.length);
    // what each blob's newest report says, worked out report by report
    const newest = new Map<string, number>();
    for (const p of planned) for (const b of p.blobs) newest.set(b.hash.toString('hex'), Math.max(newest.get(b.hash.toString('hex')) ?? 0, p.receivedMs));
    expect(new Map(writes.map((w) => [w.blob.hash.toString('hex'), w.ms]))).toEqual(newest);
    // the system prompt both questions share: the newest of all five reports
    expect(Math.max(...writes.map((w) => w.ms))).toBe(9_000);
    // a batch's own time stands for reports older than it (delivered late)
    expect(keeper.writes(planned, 20_000).every((w) => w.ms === 20_000)).toBe(true);
  });
});

describe('a plan', () => {
  it('has the same keys in the same order for a report and for a variant of it (so that V8 copies a base plan fast)', () => {
    // A variant's plan is its base's plan spread with its own values set: a key the base's plan lacked would
    // be added after the spread, V8's slow path (~1.5 µs a plan where a copy takes ~0.1, measured).
    const keeper = createBodyKeeper(packReport, { template: (base) => packTemplate(base, VARIANT_PATHS), encode: (t, r) => packVariant(t, r) });
    const base = report('base', at(1_000), 'hello');
    const hit = variant(base, { id: 'hit', requestMs: 1_990, receivedMs: 2_000, durationMs: 10 });
    const own = keeper.plan(base);
    const ofVariant = keeper.plan(hit);
    const other = keeper.plan(report('other', at(3_000), 'another question'));
    expect(ofVariant.variant?.base).toBe(base);
    expect(ofVariant.receivedMs).toBe(2_000);
    expect(Object.keys(ofVariant)).toEqual(Object.keys(own));
    expect(Object.keys(other)).toEqual(Object.keys(own));
  });
});
