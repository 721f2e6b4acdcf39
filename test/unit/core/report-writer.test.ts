// The writer's promises: group commit, the outbox when the store fails, in-order delivery when it is back,
// and nothing stored twice.
import { afterEach, describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createReportWriter } from '../../../src/core/report-writer.js';
import { StoreUnavailableError } from '../../../src/errors.js';
import { openOutboxFile } from '../../../src/storage/outbox-file.js';
import { openReportJournal } from '../../../src/storage/report-journal.js';
import type { ReportStore, StoredReport } from '../../../src/storage/report-store.js';
import { tempDir } from '../../helpers/relay.js';

function report(i: number): StoredReport {
  return {
    id: `r-${String(i).padStart(5, '0')}`,
    receivedAt: '2024-01-01T00:00:00.000Z',
    request: { timestamp: '2024-01-01T00:00:00.000Z', body: { i } },
    response: { timestamp: '2024-01-01T00:00:00.000Z' },
    durationMs: 0,
    status: 200,
    model: null,
    provider: null,
    usage: null,
    costUsd: null,
    requestBytes: 0,
    responseBytes: 0,
  };
}

/** A store in memory that can be switched off; insert is idempotent by id, like the real ones. */
function flakyStore() {
  const rows = new Map<string, StoredReport>();
  const order: string[] = [];
  const batches: number[] = [];
  const durable: boolean[] = [];
  let up = true;
  const store = {
    kind: 'test',
    async insertMany(reports: StoredReport[], opts?: { durable?: boolean }) {
      await new Promise((r) => setTimeout(r, 1));
      if (!up) throw new StoreUnavailableError('reports', 'down');
      batches.push(reports.length);
      durable.push(opts?.durable !== false);
      for (const r of reports)
        if (!rows.has(r.id)) {
          rows.set(r.id, r);
          order.push(r.id);
        }
    },
  } as unknown as ReportStore;
  return { store, rows, order, batches, durable, setUp: (v: boolean) => (up = v) };
}

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

describe('report writer', () => {
  it('group-commits concurrent writes', async () => {
    const s = flakyStore();
    const w = createReportWriter({ store: s.store, flushMs: 5, batchMax: 100, retryMs: 10 });
    await Promise.all(Array.from({ length: 250 }, (_, i) => w.write(report(i))));
    expect(s.rows.size).toBe(250);
    expect(s.batches.length).toBeLessThanOrEqual(5);
    expect(w.written).toBe(250);
  });

  it('without a window, commits what arrived in one turn together, and what arrived meanwhile in the next batch', async () => {
    const s = flakyStore();
    const w = createReportWriter({ store: s.store, flushMs: 0, batchMax: 100, retryMs: 10 });
    const first = Array.from({ length: 30 }, (_, i) => w.write(report(i)));
    // arrives while the first batch is being written (the store takes 1 ms)
    await new Promise((r) => setImmediate(r));
    const second = Array.from({ length: 20 }, (_, i) => w.write(report(100 + i)));
    await Promise.all([...first, ...second]);
    expect(s.batches).toEqual([30, 20]);
    expect(s.order).toEqual([...Array.from({ length: 30 }, (_, i) => report(i).id), ...Array.from({ length: 20 }, (_, i) => report(100 + i).id)]);
  });

  it('without an outbox, a store failure rejects the writes and counts them dropped', async () => {
    const s = flakyStore();
    s.setUp(false);
    const w = createReportWriter({ store: s.store, flushMs: 1, batchMax: 10, retryMs: 10 });
    await expect(w.write(report(1))).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(w.dropped).toBe(1);
  });

  it('goes to the outbox while the store is down and delivers in order, exactly once, when it is back', async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const s = flakyStore();
    const outbox = await openOutboxFile(join(dir, 'outbox.ndjson'));
    const w = createReportWriter({ store: s.store, outbox, flushMs: 1, batchMax: 7, retryMs: 20 });
    await Promise.all(Array.from({ length: 10 }, (_, i) => w.write(report(i))));
    s.setUp(false);
    await Promise.all(Array.from({ length: 40 }, (_, i) => w.write(report(10 + i)))); // acknowledged: durable in the outbox
    expect(w.outboxDepth).toBe(40);
    expect(w.dropped).toBe(0);
    await new Promise((r) => setTimeout(r, 60));
    s.setUp(true);
    await Promise.all(Array.from({ length: 10 }, (_, i) => w.write(report(50 + i)))); // behind the outbox
    for (let i = 0; i < 100 && w.outboxDepth > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(w.outboxDepth).toBe(0);
    expect(s.order).toEqual(Array.from({ length: 60 }, (_, i) => report(i).id));
    expect(w.written).toBe(60);
    await w.close();
    await outbox.close();
  });

  it('delivers what an earlier run left in the outbox, cutting a torn last line', async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const path = join(dir, 'outbox.ndjson');
    const first = await openOutboxFile(path);
    await first.append([report(1), report(2), report(3)]);
    await first.close();
    const { appendFile } = await import('node:fs/promises');
    await appendFile(path, '{"id":"torn'); // a crash mid-append: never acknowledged
    const s = flakyStore();
    const outbox = await openOutboxFile(path);
    expect(outbox.depth).toBe(3);
    const w = createReportWriter({ store: s.store, outbox, flushMs: 1, batchMax: 2, retryMs: 10 });
    for (let i = 0; i < 100 && w.outboxDepth > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(s.order).toEqual([report(1).id, report(2).id, report(3).id]);
    await w.close();
    await outbox.close();
    const { readFile } = await import('node:fs/promises');
    expect(await readFile(path, 'utf8')).toBe('');
  });
});

describe('report writer with a journal and a write delay', () => {
  it('acknowledges a durable write once journaled; the store takes it later in one durable batch, and the journal is emptied', async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const s = flakyStore();
    const { journal } = openReportJournal(join(dir, 'reports.journal'));
    const w = createReportWriter({ store: s.store, journal, flushMs: 0, lazyMs: 40, batchMax: 100, retryMs: 10 });
    await Promise.all(Array.from({ length: 10 }, (_, i) => w.write(report(i))));
    expect(journal.depth).toBe(10);
    expect(s.rows.size).toBe(0); // durable already, in the journal; the store has not been asked yet
    await Promise.all(Array.from({ length: 5 }, (_, i) => w.write(report(10 + i))));
    await new Promise((r) => setTimeout(r, 80));
    expect(s.batches).toEqual([15]);
    expect(s.durable).toEqual([true]);
    expect(journal.depth).toBe(0);
    expect(openReportJournal(join(dir, 'reports.journal')).left).toEqual([]);
    await w.close();
    journal.close();
  });

  it('holds reports nobody waits on for the write delay or a full batch, and flush writes them at once', async () => {
    const s = flakyStore();
    const w = createReportWriter({ store: s.store, flushMs: 0, lazyMs: 10_000, batchMax: 5, retryMs: 10 });
    const full = Array.from({ length: 5 }, (_, i) => w.write(report(i), false));
    await Promise.all(full);
    expect(s.batches).toEqual([5]);
    expect(s.durable).toEqual([false]);
    void w.write(report(5), false);
    void w.write(report(6), false);
    await new Promise((r) => setTimeout(r, 20));
    expect(s.rows.size).toBe(5);
    expect(w.pending).toBe(2);
    w.add(report(7)); // a proxied call's: nobody waits on it at all
    expect(w.pending).toBe(3);
    await w.flush();
    expect(s.batches).toEqual([5, 3]);
    expect(w.pending).toBe(0);
  });

  it('writes first what an earlier run journaled, then empties the journal', async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const path = join(dir, 'reports.journal');
    const before = openReportJournal(path);
    before.journal.append([JSON.stringify(report(1)), JSON.stringify(report(2))]);
    before.journal.close();
    const s = flakyStore();
    const { journal, left } = openReportJournal(path);
    const w = createReportWriter({ store: s.store, journal, replay: left, flushMs: 0, lazyMs: 10_000, batchMax: 100, retryMs: 10 });
    await w.flush();
    expect(s.order).toEqual([report(1).id, report(2).id]);
    expect(s.durable).toEqual([true]);
    expect(journal.depth).toBe(0);
    await w.close();
    journal.close();
  });

  it('keeps journaled reports in the journal when neither the store nor the outbox takes them', async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const s = flakyStore();
    s.setUp(false);
    const { journal } = openReportJournal(join(dir, 'reports.journal'));
    const w = createReportWriter({ store: s.store, journal, flushMs: 0, lazyMs: 10_000, batchMax: 100, retryMs: 10 });
    await w.write(report(1)); // acknowledged: durable in the journal
    await w.flush();
    expect(w.dropped).toBe(0);
    expect(openReportJournal(join(dir, 'reports.journal')).left.map((r) => r.id)).toEqual([report(1).id]);
    journal.close();
  });
});

describe('report writer in slices (a store that writes on the writer\'s own thread)', () => {
  /** A store whose insert holds the thread, as SQLite's does: no turn of the event loop inside a write. */
  function blockingStore(onInsert?: (reports: StoredReport[]) => void) {
    const rows = new Map<string, StoredReport>();
    const batches: number[] = [];
    const durable: boolean[] = [];
    const store = {
      kind: 'test',
      async insertMany(reports: StoredReport[], opts?: { durable?: boolean }) {
        onInsert?.(reports);
        batches.push(reports.length);
        durable.push(opts?.durable !== false);
        for (const r of reports) if (!rows.has(r.id)) rows.set(r.id, r);
      },
    } as unknown as ReportStore;
    return { store, rows, batches, durable };
  }

  it('acknowledges a write that arrives during a long insert after the first slice; the slices commit unsynced, the last write durably, and only then is the journal emptied', async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const { journal } = openReportJournal(join(dir, 'reports.journal'));
    const depths: number[] = [];
    let late: Promise<void> | undefined;
    let writtenWhenAcknowledged: number | undefined;
    let w: ReturnType<typeof createReportWriter>;
    const s = blockingStore(() => {
      depths.push(journal.depth);
      late ??= w.write(report(100)).then(() => {
        writtenWhenAcknowledged = s.rows.size;
      });
    });
    w = createReportWriter({ store: s.store, journal, flushMs: 0, lazyMs: 10_000, batchMax: 100, slice: 4, retryMs: 10 });
    await Promise.all(Array.from({ length: 10 }, (_, i) => w.write(report(i))));
    await w.flush();
    await late;
    // acknowledged (journaled) after the first slice, not after the whole queue
    expect(writtenWhenAcknowledged).toBe(4);
    expect(s.batches).toEqual([4, 4, 3]);
    expect(s.durable).toEqual([false, false, true]);
    expect(depths).toEqual([10, 11, 11]);
    expect(journal.depth).toBe(0);
    expect(s.rows.size).toBe(11);
    await w.close();
    journal.close();
  });

  it('resolves a durable write only with the durable write after its slice', async () => {
    const s = blockingStore();
    const w = createReportWriter({ store: s.store, flushMs: 0, lazyMs: 10_000, batchMax: 100, slice: 2, retryMs: 10 });
    const seen: number[][] = [];
    await Promise.all(Array.from({ length: 5 }, (_, i) => w.write(report(i)).then(() => seen.push([...s.batches]))));
    expect(s.batches).toEqual([2, 2, 1]);
    expect(s.durable).toEqual([false, false, true]);
    expect(seen).toEqual(Array.from({ length: 5 }, () => [2, 2, 1]));
    await w.close();
  });

  it('writes reports nobody waits on in whole batches, without turns or a sync', async () => {
    const s = blockingStore();
    const w = createReportWriter({ store: s.store, flushMs: 0, lazyMs: 10_000, batchMax: 100, slice: 4, retryMs: 10 });
    for (let i = 0; i < 10; i++) w.add(report(i));
    await w.flush();
    expect(s.batches).toEqual([10]);
    expect(s.durable).toEqual([false]);
    await w.close();
  });

  it('writes a short queue whole, as without slices', async () => {
    const s = blockingStore();
    const w = createReportWriter({ store: s.store, flushMs: 0, lazyMs: 10_000, batchMax: 100, slice: 8, retryMs: 10 });
    await Promise.all(Array.from({ length: 8 }, (_, i) => w.write(report(i))));
    expect(s.batches).toEqual([8]);
    expect(s.durable).toEqual([true]);
    await w.close();
  });
});

describe('a report the store refuses while it is up', () => {
  it('is set aside in the quarantine file instead of blocking the reports behind it', async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const s = flakyStore();
    const insert = s.store.insertMany.bind(s.store);
    (s.store as { insertMany: ReportStore['insertMany'] }).insertMany = async (reports) => {
      if (reports.some((r) => r.id === report(3).id)) throw new Error('constraint violation');
      return insert(reports);
    };
    (s.store as { ping: ReportStore['ping'] }).ping = async () => {};
    const outbox = await openOutboxFile(join(dir, 'outbox.ndjson'));
    const w = createReportWriter({ store: s.store, outbox, flushMs: 1, batchMax: 10, retryMs: 10 });
    await Promise.all(Array.from({ length: 6 }, (_, i) => w.write(report(i))));
    for (let i = 0; i < 100 && w.outboxDepth > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(w.outboxDepth).toBe(0);
    expect(s.order).toEqual([0, 1, 2, 4, 5].map((i) => report(i).id));
    expect(w.quarantined).toBe(1);
    expect(w.dropped).toBe(0);
    const { readFile } = await import('node:fs/promises');
    const kept = (await readFile(join(dir, 'outbox.rejected.ndjson'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l).id);
    expect(kept).toEqual([report(3).id]);
    await w.close();
    await outbox.close();
  });
});
