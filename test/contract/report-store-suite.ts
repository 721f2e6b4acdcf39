// The contract every report store passes (like keyv's test suite): the same reports in, the same pages out.
// `make` must return an empty store; the suite closes it after each test.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import type { ReportQuery, ReportStore, StoredReport } from '../../src/storage/report-store.js';
import { T0, makeReport } from './report-fixtures.js';
import { reportStatsCases } from './report-stats-cases.js';

/** Newest request first, ties by id descending (ids in these tests are ASCII, so JS order is byte order). */
function newestFirst(reports: StoredReport[]): string[] {
  return [...reports]
    .sort((a, b) => {
      const dt = Date.parse(b.request.timestamp) - Date.parse(a.request.timestamp);
      return dt !== 0 ? dt : a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
    })
    .map((r) => r.id);
}

async function listAll(store: ReportStore, query: Omit<ReportQuery, 'cursor'>): Promise<string[][]> {
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const page = await store.list({ ...query, ...(cursor === undefined ? {} : { cursor }) });
    pages.push(page.items.map((r) => r.id));
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined && pages.length < 1000);
  return pages;
}

export function reportStoreSuite(name: string, make: () => Promise<ReportStore>): void {
  describe(`report store contract: ${name}`, () => {
    let store: ReportStore;
    beforeEach(async () => {
      store = await make();
    });
    afterEach(async () => {
      // undefined when make() failed; the test already reports why
      await store?.close();
    });

    const ids = async (query: Omit<ReportQuery, 'limit'>): Promise<string[]> =>
      (await store.list({ limit: 1000, ...query })).items.map((r) => r.id);

    it('returns an inserted report deep-equal, with unknown fields, nested properties and unicode', async () => {
      const report = makeReport('r-1', 0, {
        metadata: { environment: 'staging', promptId: 'p', client: 'cli', extra: { deep: [1, null, 'x'] } },
        request: { timestamp: new Date(T0).toISOString(), body: { text: 'héllo 世界 🎉 "quoted" \\ \n' }, url: '/v1' },
        properties: { nested: { a: [1, 2, { b: true }] }, 'dotted.name': 'v', emoji: '🚀' },
        cacheHit: null,
        cacheEnabled: null,
        usage: { inputTokens: 1, outputTokens: 2, totalTokens: 3, cachedInputTokens: 1 },
        futureField: { anything: ['goes', 1.25, false] },
      });
      await store.insertMany([report]);
      expect(await store.get('r-1')).toEqual(report);
      expect(await store.get('missing')).toBeUndefined();
    });

    it('keeps the first report for an id: later inserts of that id change nothing', async () => {
      const first = makeReport('dup', 0);
      await store.insertMany([first]);
      await store.insertMany([makeReport('dup', 5, { model: 'other', status: 500, metadata: { environment: 'x' } })]);
      await store.insertMany([makeReport('dup2', 1), makeReport('dup2', 2, { model: 'other' })]);
      expect(await store.get('dup')).toEqual(first);
      expect(await store.get('dup2')).toEqual(makeReport('dup2', 1));
      expect(await store.count()).toBe(2);
      expect(await ids({ model: 'other' })).toEqual([]);
    });

    it('lists newest request first, ties broken by id descending', async () => {
      const reports = [
        makeReport('b', 1),
        makeReport('a', 3),
        makeReport('c', 1),
        makeReport('d', 2),
        makeReport('A', 1),
        // received later but requested earlier: the request timestamp decides
        makeReport('e', 0, { receivedAt: new Date(T0 + 3_600_000).toISOString() }),
      ];
      await store.insertMany(reports);
      expect(await ids({})).toEqual(['a', 'd', 'c', 'b', 'A', 'e']);
      expect(await ids({})).toEqual(newestFirst(reports));
    });

    it('honours the limit and ends with a null cursor', async () => {
      await store.insertMany([0, 1, 2, 3, 4].map((i) => makeReport(`r${i}`, i)));
      const two = await store.list({ limit: 2 });
      expect(two.items.map((r) => r.id)).toEqual(['r4', 'r3']);
      expect(two.nextCursor).toEqual(expect.any(String));
      // exactly as many reports as the limit: no further page
      expect((await store.list({ limit: 5 })).nextCursor).toBeNull();
      expect((await store.list({ limit: 6 })).nextCursor).toBeNull();
      expect((await store.list({ limit: 1 })).items).toHaveLength(1);
    });

    it('pages through every report exactly once, in order, across equal timestamps', async () => {
      const reports = Array.from({ length: 23 }, (_, i) => makeReport(`id-${String(i).padStart(2, '0')}`, i % 4));
      await store.insertMany(reports);
      const pages = await listAll(store, { limit: 5 });
      expect(pages.map((p) => p.length)).toEqual([5, 5, 5, 5, 3]);
      expect(pages.flat()).toEqual(newestFirst(reports));
      // a cursor keeps working together with a filter
      const filtered = reports.filter((_, i) => i % 2 === 0).map((r) => ({ ...r, model: 'even' }));
      await store.insertMany(filtered.map((r) => ({ ...r, id: `e-${r.id}` })));
      const evenPages = await listAll(store, { limit: 4, model: 'even' });
      expect(evenPages.flat()).toEqual(newestFirst(filtered.map((r) => ({ ...r, id: `e-${r.id}` }))));
    });

    describe('filters', () => {
      const data = [
        makeReport('f1', 0),
        makeReport('f2', 10, { metadata: { environment: 'staging', promptId: 'classify', client: 'cli' } }),
        makeReport('f3', 20, { model: 'claude-sonnet-4', provider: 'anthropic', status: 429, cacheHit: true }),
        makeReport('f4', 30, {
          cacheHit: null,
          cacheEnabled: false,
          properties: { team: 'search', tier: 3, beta: true },
        }),
        makeReport('f5', 40, { properties: { 'feature.flag': 'on', 'a-b': 'x', tier: '3' }, status: null }),
        makeReport('f6', 50, {
          metadata: { environment: 42 },
          properties: { team: 'search', tier: 3.5, empty: null, obj: { a: 1 } },
        }),
        makeReport('f7', 60, { metadata: undefined, properties: undefined, model: null, cacheHit: true }),
      ];
      const at = (minute: number): string => new Date(T0 + minute * 60_000).toISOString();
      beforeEach(async () => {
        await store.insertMany(data);
      });

      it('from is inclusive and to exclusive', async () => {
        expect(await ids({ from: at(20) })).toEqual(['f7', 'f6', 'f5', 'f4', 'f3']);
        expect(await ids({ to: at(20) })).toEqual(['f2', 'f1']);
        expect(await ids({ from: at(10), to: at(30) })).toEqual(['f3', 'f2']);
        expect(await ids({ from: at(15), to: at(16) })).toEqual([]);
        // any ISO offset names the same instant
        expect(await ids({ from: '2025-03-01T13:50:00+01:00' })).toEqual(['f7', 'f6']);
      });

      it('matches metadata, model, status and cacheHit exactly', async () => {
        expect(await ids({ environment: 'staging' })).toEqual(['f2']);
        expect(await ids({ environment: 'production' })).toEqual(['f5', 'f4', 'f3', 'f1']);
        expect(await ids({ environment: '42' })).toEqual([]);
        expect(await ids({ promptId: 'classify' })).toEqual(['f2']);
        expect(await ids({ client: 'cli' })).toEqual(['f2']);
        expect(await ids({ client: 'web' })).toEqual(['f5', 'f4', 'f3', 'f1']);
        expect(await ids({ model: 'claude-sonnet-4' })).toEqual(['f3']);
        expect(await ids({ status: 429 })).toEqual(['f3']);
        expect(await ids({ status: 200 })).toEqual(['f7', 'f6', 'f4', 'f2', 'f1']);
        // a report without a cache decision (null) is neither a hit nor a miss
        expect(await ids({ cacheHit: true })).toEqual(['f7', 'f3']);
        expect(await ids({ cacheHit: false })).toEqual(['f6', 'f5', 'f2', 'f1']);
      });

      it('matches properties by their string form, with dots and dashes in names', async () => {
        expect(await ids({ properties: { team: 'search' } })).toEqual(['f6', 'f4', 'f3', 'f2', 'f1']);
        expect(await ids({ properties: { tier: '3' } })).toEqual(['f5', 'f4']);
        expect(await ids({ properties: { tier: '3.5' } })).toEqual(['f6']);
        expect(await ids({ properties: { beta: 'true' } })).toEqual(['f4']);
        expect(await ids({ properties: { 'feature.flag': 'on' } })).toEqual(['f5']);
        expect(await ids({ properties: { 'a-b': 'x' } })).toEqual(['f5']);
        expect(await ids({ properties: { feature: 'on' } })).toEqual([]);
        expect(await ids({ properties: { empty: 'null' } })).toEqual([]);
        expect(await ids({ properties: { obj: '{"a":1}' } })).toEqual([]);
        expect(await ids({ properties: { team: 'search', tier: '3' } })).toEqual(['f4']);
      });

      it('combines every filter with AND', async () => {
        expect(await ids({ environment: 'production', cacheHit: false, status: 200 })).toEqual(['f1']);
        expect(
          await ids({
            from: at(0),
            to: at(50),
            environment: 'production',
            promptId: 'summarize',
            client: 'web',
            model: 'gpt-4o',
            properties: { 'feature.flag': 'on', 'a-b': 'x' },
          }),
        ).toEqual(['f5']);
        expect(await ids({ model: 'claude-sonnet-4', cacheHit: false })).toEqual([]);
      });

      it('rejects a property name outside the allowed characters', async () => {
        await expect(store.list({ limit: 5, properties: { 'a"b': 'x' } })).rejects.toMatchObject({
          code: 'RELAY_ERR_VALIDATION',
        });
      });
    });

    reportStatsCases(() => store);

    it('rejects a bad cursor with RELAY_ERR_INVALID_CURSOR', async () => {
      await store.insertMany([makeReport('r', 0)]);
      const notACursor = Buffer.from(JSON.stringify({ t: 1 })).toString('base64url');
      for (const cursor of ['%%%', 'x', notACursor]) {
        await expect(store.list({ limit: 5, cursor })).rejects.toMatchObject({ code: 'RELAY_ERR_INVALID_CURSOR' });
      }
    });

    it('counts reports', async () => {
      expect(await store.count()).toBe(0);
      await store.insertMany([makeReport('a', 0), makeReport('b', 1)]);
      expect(await store.count()).toBe(2);
      await store.insertMany([]);
      expect(await store.count()).toBe(2);
    });

    it('stores a batch of 1000 in one insertMany', async () => {
      const reports = Array.from({ length: 1000 }, (_, i) => makeReport(`b-${String(i).padStart(4, '0')}`, i % 97));
      await store.insertMany(reports);
      expect(await store.count()).toBe(1000);
      const page = await store.list({ limit: 1000 });
      expect(page.items.map((r) => r.id)).toEqual(newestFirst(reports));
      expect(page.nextCursor).toBeNull();
      expect(await store.get('b-0500')).toEqual(reports[500]);
    });

    it('accepts concurrent insertMany calls, overlapping ids stored once', async () => {
      const batches = Array.from({ length: 8 }, (_, b) =>
        Array.from({ length: 40 }, (_, i) => makeReport(`c-${String(b * 30 + i).padStart(3, '0')}`, i)),
      );
      await Promise.all(batches.map((batch) => store.insertMany(batch)));
      expect(await store.count()).toBe(7 * 30 + 40);
      expect((await listAll(store, { limit: 100 })).flat()).toHaveLength(250);
    });

    it('stores (never rejects) a report with U+0000 and a lone surrogate in it', async () => {
      // `literal` is backslash-u text, not an escape: it must come back exactly.
      const literal = String.raw`\u0000 \ud800 \\u0000`;
      const body = 'a\u0000b\ud800c';
      const report = makeReport('odd', 0, { response: { timestamp: new Date(T0).toISOString(), body, literal } });
      await store.insertMany([report]);
      const got = await store.get('odd');
      expect(got?.id).toBe('odd');
      expect(got?.response.body).toMatch(/^a.b.c$/u);
      expect(got?.response['literal']).toBe(literal);
    });

    it('pings, closes idempotently, and rejects with StoreUnavailableError once closed', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
      await store.close();
      await store.close();
      await expect(store.list({ limit: 5 })).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.count()).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.stats({})).rejects.toBeInstanceOf(StoreUnavailableError);
    });
  });
}
