// The report service on the event loop hands records over in batches: a proxied call's in a quiet moment
// after a burst of answers (never much later than 50 ms, however busy the relay is), a direct-API report at
// the end of the turn, resolved with the worker's answer once durable. flush() hands over what waits.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type ApiRecord, type ProxyRecord, type RecordBatch, decodeBatch } from '../../../src/core/exchange-record.js';
import { type ReportPort, createReportService } from '../../../src/core/report-service.js';
import type { ApiOutcome } from '../../../src/core/report-sink.js';
import type { ReportStore } from '../../../src/storage/report-store.js';
import { missFacts } from '../../helpers/proxy-facts.js';

function proxyRecord(i: number): ProxyRecord {
  return {
    facts: missFacts({ id: `r-${i}`, startedAt: 1_700_000_000_000 + i, endedAt: 1_700_000_000_001 + i }),
    request: Buffer.from(JSON.stringify({ i })),
    response: Buffer.from(JSON.stringify({ ok: i })),
  };
}

function apiRecord(i: number): ApiRecord {
  return { id: `a-${i}`, receivedAt: 1_700_000_000_000, body: Buffer.from(JSON.stringify({ n: i })) };
}

/** A port that keeps what it was sent; API reports are answered with their own body, or as `answer` says. */
function fakePort(answer?: (r: ApiRecord) => ApiOutcome) {
  const batches: { proxy: ProxyRecord[]; api: ApiRecord[] }[] = [];
  let flushed = 0;
  let fail: Error | undefined;
  const port: ReportPort = {
    async send(batch: RecordBatch) {
      if (fail) throw fail;
      const decoded = decodeBatch(batch);
      batches.push(decoded);
      return decoded.api.map((r) => answer?.(r) ?? { ok: true, text: Buffer.from(r.body).toString() });
    },
    async flush() {
      flushed++;
    },
    async close() {},
    counters: { pending: 0, written: 0, dropped: 0, outboxDepth: 0 },
  };
  return {
    port,
    batches,
    proxyIds: () => batches.flatMap((b) => b.proxy.map((r) => r.facts.id)),
    get flushed() {
      return flushed;
    },
    failWith(err: Error) {
      fail = err;
    },
  };
}

function service(answer?: (r: ApiRecord) => ApiOutcome) {
  const p = fakePort(answer);
  const reports = createReportService({ port: p.port, store: {} as ReportStore, batchMax: 500 });
  return { p, reports };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('report service: proxied calls', () => {
  it('hands nothing over while answers keep coming, then all of them in one batch once it is quiet', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'performance', 'Date'] });
    const { p, reports } = service();
    for (let i = 0; i < 20; i++) {
      reports.recordProxy(proxyRecord(i));
      await vi.advanceTimersByTimeAsync(1); // an answer every millisecond: a burst
    }
    expect(p.batches).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(10);
    expect(p.batches).toHaveLength(1);
    expect(p.proxyIds()).toEqual(Array.from({ length: 20 }, (_, i) => `r-${i}`));
    // the record crossed as it was: facts and the bodies' bytes
    const third = p.batches[0]!.proxy[3]!;
    expect(third.facts).toEqual(proxyRecord(3).facts);
    expect(Buffer.from(third.request!).toString()).toBe('{"i":3}');
    expect(Buffer.from(third.response!).toString()).toBe('{"ok":3}');
  });

  it('never waits much longer than 50 ms, however busy the relay is', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'performance', 'Date'] });
    const { p, reports } = service();
    for (let i = 0; i < 200; i++) {
      reports.recordProxy(proxyRecord(i));
      await vi.advanceTimersByTimeAsync(1);
      // every record made more than 55 ms ago has been handed over
      expect(p.proxyIds().length).toBeGreaterThanOrEqual(Math.max(0, i - 55));
    }
    await vi.advanceTimersByTimeAsync(60);
    expect(p.proxyIds()).toEqual(Array.from({ length: 200 }, (_, i) => `r-${i}`));
  });

  it('a full batch goes at once', () => {
    const p = fakePort();
    const reports = createReportService({ port: p.port, store: {} as ReportStore, batchMax: 3 });
    for (let i = 0; i < 7; i++) reports.recordProxy(proxyRecord(i));
    expect(p.batches.map((b) => b.proxy.length)).toEqual([3, 3]);
  });

  it('flush hands over what is waiting and waits for the worker', async () => {
    const { p, reports } = service();
    for (let i = 0; i < 5; i++) reports.recordProxy(proxyRecord(i));
    expect(p.batches).toHaveLength(0);
    await reports.flush();
    expect(p.proxyIds()).toEqual(['r-0', 'r-1', 'r-2', 'r-3', 'r-4']);
    expect(p.flushed).toBe(1);
  });
});

describe('report service: a streamed answer in blocks', () => {
  it('crosses as one body, its blocks copied into the batch in order', async () => {
    const { p, reports } = service();
    const blocks = [Buffer.alloc(4096, 'a'), Buffer.alloc(4096, 'b'), Buffer.from('data: [DONE]\n\n')];
    const streamed = { ...proxyRecord(1), response: blocks };
    reports.recordProxy(streamed);
    reports.recordProxy(proxyRecord(2));
    await reports.flush();
    const [first, second] = p.batches.flatMap((b) => b.proxy);
    expect(Buffer.from(first!.response!).equals(Buffer.concat(blocks))).toBe(true);
    expect(Buffer.from(first!.request!).toString()).toBe('{"i":1}');
    expect(Buffer.from(second!.response!).toString()).toBe('{"ok":2}');
    expect(Buffer.from(second!.request!).toString()).toBe('{"i":2}');
  });
});

describe('report service: a burst bounded in flight', () => {
  /** A port that answers only when told: what it holds is what is in flight. */
  function heldPort() {
    const held: { bytes: number; ids: string[]; api: ApiRecord[]; release(): void }[] = [];
    const port: ReportPort = {
      send(batch: RecordBatch) {
        const decoded = decodeBatch(batch);
        return new Promise((resolve) => {
          held.push({
            bytes: batch.bytes.byteLength,
            ids: decoded.proxy.map((r) => r.facts.id),
            api: decoded.api,
            release: () => resolve(decoded.api.map((r) => ({ ok: true as const, text: Buffer.from(r.body).toString() }))),
          });
        });
      },
      async flush() {},
      async close() {},
      counters: { pending: 0, written: 0, dropped: 0, outboxDepth: 0 },
    };
    return { port, held };
  }
  const big = (i: number): ProxyRecord => ({ ...proxyRecord(i), response: Buffer.alloc(100 * 1024, 'x') });

  it('keeps at most 2 MB of bodies with the worker; the rest goes, in order and in 1 MB batches, as it answers', async () => {
    const { port, held } = heldPort();
    const reports = createReportService({ port, store: {} as ReportStore, batchMax: 500 });
    for (let i = 0; i < 60; i++) reports.recordProxy(big(i)); // ~6 MB of answers ending together
    const inFlight = () => held.reduce((n, b) => n + b.bytes, 0);
    expect(inFlight()).toBeLessThanOrEqual(2 * 1024 * 1024 + 1024 * 1024);
    const sent = held.length;
    expect(reports.counters.pending).toBe(60);
    const ids: string[] = [];
    let released = 0;
    while (released < held.length) {
      ids.push(...held[released]!.ids);
      held[released++]!.release();
      await new Promise((r) => setImmediate(r));
      const open = held.slice(released).reduce((n, b) => n + b.bytes, 0);
      expect(open).toBeLessThanOrEqual(2 * 1024 * 1024 + 1024 * 1024);
    }
    expect(held.length).toBeGreaterThan(sent);
    for (const b of held) expect(b.bytes).toBeLessThanOrEqual(1024 * 1024 + 100 * 1024 + 64);
    expect(ids).toEqual(Array.from({ length: 60 }, (_, i) => `r-${i}`));
    expect(reports.counters.pending).toBe(0);
  });

  it('a direct-API report goes at once even then, and a flush sends everything', async () => {
    const { port, held } = heldPort();
    const reports = createReportService({ port, store: {} as ReportStore, batchMax: 500 });
    for (let i = 0; i < 60; i++) reports.recordProxy(big(i));
    const before = held.length;
    const answered = reports.recordApi(apiRecord(1));
    await new Promise((r) => setImmediate(r));
    expect(held.length).toBeGreaterThan(before);
    expect(held.at(-1)!.api.map((r) => r.id)).toEqual(['a-1']);
    const flushed = reports.flush();
    await new Promise((r) => setImmediate(r));
    const ids = held.flatMap((b) => b.ids);
    expect(ids).toEqual(Array.from({ length: 60 }, (_, i) => `r-${i}`));
    for (const b of held) b.release();
    await flushed;
    expect(await answered).toBe(JSON.stringify({ n: 1 }));
  });
});

describe('report service: direct-API reports', () => {
  it('go at the end of the turn, with the proxied records waiting, and resolve with the worker answer', async () => {
    const { p, reports } = service();
    reports.recordProxy(proxyRecord(1));
    const answers = Promise.all([reports.recordApi(apiRecord(1)), reports.recordApi(apiRecord(2))]);
    expect(p.batches).toHaveLength(0);
    expect(await answers).toEqual(['{"n":1}', '{"n":2}']);
    expect(p.batches).toHaveLength(1);
    expect(p.batches[0]!.proxy.map((r) => r.facts.id)).toEqual(['r-1']);
    expect(p.batches[0]!.api.map((r) => r.id)).toEqual(['a-1', 'a-2']);
  });

  it('reject with the status and code the worker gave, or 503 when the worker failed', async () => {
    const { p, reports } = service((r) =>
      r.id === 'a-1' ? { ok: false, statusCode: 503, code: 'RELAY_ERR_REPORTS_UNAVAILABLE', message: 'The report store is unavailable: disk full' } : { ok: true, text: '{}' },
    );
    await expect(reports.recordApi(apiRecord(1))).rejects.toMatchObject({ statusCode: 503, code: 'RELAY_ERR_REPORTS_UNAVAILABLE', message: 'The report store is unavailable: disk full' });
    await expect(reports.recordApi(apiRecord(2))).resolves.toBe('{}');
    p.failWith(new Error('the report worker exited (1)'));
    await expect(reports.recordApi(apiRecord(3))).rejects.toMatchObject({ statusCode: 503, code: 'RELAY_ERR_REPORTS_UNAVAILABLE' });
  });
});

describe('report service: reads', () => {
  it('read after what was acknowledged, also when they come together while the first one’s flush is under way', async () => {
    // A worker whose flush takes a while (a loaded machine), and a store that knows what the flush wrote.
    let stored = 0;
    let sent = 0;
    let releaseFlush!: () => void;
    let flushes = 0;
    const port: ReportPort = {
      async send(batch: RecordBatch) {
        const decoded = decodeBatch(batch);
        sent += decoded.api.length + decoded.proxy.length;
        return decoded.api.map((r) => ({ ok: true, text: Buffer.from(r.body).toString() }));
      },
      flush() {
        flushes++;
        const upTo = sent;
        return new Promise<void>((resolve) => {
          releaseFlush = () => {
            stored = upTo;
            resolve();
          };
        });
      },
      async close() {},
      counters: { pending: 0, written: 0, dropped: 0, outboxDepth: 0 },
    };
    const store = { stats: async () => ({ requests: stored }) } as unknown as ReportStore;
    const reports = createReportService({ port, store, batchMax: 500 });
    await Promise.all([reports.recordApi(apiRecord(1)), reports.recordApi(apiRecord(2))]);

    // Five reads at once (the dashboard's first look): the first starts the flush, the others wait for it.
    const reads = Promise.all(Array.from({ length: 5 }, () => reports.stats({}, undefined)));
    await new Promise((r) => setTimeout(r, 20));
    expect(flushes).toBe(1);
    releaseFlush();
    expect(await reads).toEqual(Array.from({ length: 5 }, () => ({ requests: 2 })));
    // With nothing new since, a read goes straight to the store.
    expect(await reports.stats({}, undefined)).toEqual({ requests: 2 });
    expect(flushes).toBe(1);
  });
});

describe("report service: a burst's end, with the worker stopped", () => {
  /** A port whose thread is stopped until a batch starts it (report-thread.ts); `events` orders starts and gives-back. */
  function sleepyService() {
    const p = fakePort();
    const events: string[] = [];
    let asleep = true;
    const port: ReportPort = {
      ...p.port,
      async send(batch) {
        if (asleep) events.push('start');
        asleep = false;
        events.push('batch');
        return p.port.send(batch);
      },
      get asleep() {
        return asleep;
      },
    };
    const calls = { open: 0 };
    const reports = createReportService({
      port,
      store: {} as ReportStore,
      batchMax: 500,
      openCalls: () => calls.open,
      onBurstEnd: () => events.push(`give back (${calls.open} open)`),
    });
    return {
      p,
      events,
      reports,
      calls,
      sleep() {
        asleep = true;
      },
    };
  }
  const ids = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `r-${from + i}`);
  const fake = () => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'performance', 'Date'] });

  it('records of calls ending while many are open wait for the burst to end; it gives its memory back, then starts the worker', async () => {
    fake();
    const { p, events, reports, calls } = sleepyService();
    calls.open = 100;
    for (let i = 0; i < 100; i++) {
      calls.open--;
      reports.recordProxy(proxyRecord(i)); // 100 streams ending over a second: one every 10 ms
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(p.batches).toHaveLength(0);
    expect(reports.counters.pending).toBe(100);
    await vi.advanceTimersByTimeAsync(150);
    expect(p.batches).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(100);
    expect(events).toEqual(['give back (0 open)', 'start', 'batch']);
    expect(p.proxyIds()).toEqual(ids(100));
    // the worker runs now: the next records go in the usual quiet moment (never later than 50 ms)
    calls.open = 200;
    for (let i = 100; i < 110; i++) {
      reports.recordProxy(proxyRecord(i));
      await vi.advanceTimersByTimeAsync(1);
    }
    await vi.advanceTimersByTimeAsync(50);
    expect(p.proxyIds()).toEqual(ids(110));
    expect(events.filter((e) => e.startsWith('give back'))).toHaveLength(1);
  });

  it('a lull while the calls are still open does not end the wait; their records are the rest of the burst', async () => {
    fake();
    const { p, events, reports, calls } = sleepyService();
    calls.open = 500;
    for (let i = 0; i < 10; i++) reports.recordProxy(proxyRecord(i)); // a few streams end early
    await vi.advanceTimersByTimeAsync(900);
    expect(p.batches).toHaveLength(0);
    for (let i = 10; i < 100; i++) reports.recordProxy(proxyRecord(i)); // then the rest, together
    calls.open = 0;
    await vi.advanceTimersByTimeAsync(199);
    expect(p.batches).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(250);
    expect(events).toEqual(['give back (0 open)', 'start', 'batch']);
    expect(p.proxyIds()).toEqual(ids(100));
  });

  it('with few calls open, records start the worker in the usual quiet moment: nothing waits, nothing is given back', async () => {
    fake();
    const { p, events, reports, calls } = sleepyService();
    calls.open = 8;
    for (let i = 0; i < 100; i++) reports.recordProxy(proxyRecord(i));
    await vi.advanceTimersByTimeAsync(10);
    expect(events).toEqual(['start', 'batch']);
    expect(p.proxyIds()).toEqual(ids(100));
  });

  it('while calls stay open and records keep coming, they wait 2 s at most, and start the worker without the give-back', async () => {
    fake();
    const { p, events, reports, calls } = sleepyService();
    calls.open = 500;
    let i = 0;
    for (; i < 190; i++) {
      reports.recordProxy(proxyRecord(i));
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(p.batches).toHaveLength(0);
    for (; i < 230; i++) {
      reports.recordProxy(proxyRecord(i));
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(events.slice(0, 2)).toEqual(['start', 'batch']);
    expect(events.join()).not.toContain('give back');
    await vi.advanceTimersByTimeAsync(50);
    expect(p.proxyIds()).toEqual(ids(230));
  });

  it('quiet, with the calls still open, they wait 2 s at most as well', async () => {
    fake();
    const { p, events, reports, calls } = sleepyService();
    calls.open = 500;
    for (let i = 0; i < 100; i++) reports.recordProxy(proxyRecord(i));
    await vi.advanceTimersByTimeAsync(1_900);
    expect(p.batches).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(400);
    expect(events).toEqual(['start', 'batch']);
    expect(p.proxyIds()).toEqual(ids(100));
  });

  it('2 s at most in all, also when records start coming again after a lull', async () => {
    fake();
    const { p, events, reports, calls } = sleepyService();
    calls.open = 500;
    for (let i = 0; i < 10; i++) reports.recordProxy(proxyRecord(i));
    await vi.advanceTimersByTimeAsync(1_000); // a lull, calls still open: the wait goes on
    expect(p.batches).toHaveLength(0);
    let i = 10;
    for (; i < 140 && p.batches.length === 0; i++) {
      reports.recordProxy(proxyRecord(i)); // then records every 10 ms, on and on
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(events.slice(0, 2)).toEqual(['start', 'batch']);
    expect(i).toBeLessThanOrEqual(10 + 106); // 2 s after the first record, within the usual 50 ms
    expect(i).toBeGreaterThanOrEqual(10 + 99);
    expect(events.join()).not.toContain('give back');
  });

  it('a direct-API report, a read or a flush ends the wait at once, the waiting records first', async () => {
    const s = sleepyService();
    s.calls.open = 500;
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    for (let i = 0; i < 100; i++) s.reports.recordProxy(proxyRecord(i));
    await sleep(60);
    expect(s.p.batches).toHaveLength(0);
    expect(await s.reports.recordApi(apiRecord(1))).toBe(JSON.stringify({ n: 1 }));
    expect(s.events).toEqual(['start', 'batch']);
    expect(s.p.proxyIds()).toEqual(ids(100));
    expect(s.p.batches[0]!.api.map((r) => r.id)).toEqual(['a-1']);

    s.sleep(); // stopped again for being idle
    for (let i = 100; i < 200; i++) s.reports.recordProxy(proxyRecord(i));
    await sleep(60);
    expect(s.p.proxyIds()).toEqual(ids(100));
    await s.reports.flush();
    expect(s.p.proxyIds()).toEqual(ids(200));

    s.sleep();
    for (let i = 200; i < 300; i++) s.reports.recordProxy(proxyRecord(i));
    await sleep(60);
    await s.reports.list({} as never).catch(() => undefined); // a read (this fake store has no list)
    expect(s.p.proxyIds()).toEqual(ids(300));
    // nothing left to fire later
    s.calls.open = 0;
    await sleep(300);
    expect(s.p.batches).toHaveLength(3);
    expect(s.events.join()).not.toContain('give back');
  });

  it('2,000 waiting records go at once (steady traffic has no end to wait for)', () => {
    const { p, events, reports, calls } = sleepyService();
    calls.open = 500;
    for (let i = 0; i < 2_000; i++) reports.recordProxy(proxyRecord(i));
    expect(events.slice(0, 2)).toEqual(['start', 'batch']);
    expect(p.batches.length).toBeGreaterThan(0);
  });
});
