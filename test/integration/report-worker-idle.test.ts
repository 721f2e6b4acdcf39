// The report worker thread stops when it has had nothing to do for RELAY_REPORT_WORKER_IDLE_MS and starts
// again with the next report: every report recorded before, during and after a stop is written, once.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProxyRecord } from '../../src/core/exchange-record.js';
import { createReportService } from '../../src/core/report-service.js';
import { type ReportThread, createReportThread } from '../../src/report-thread.js';
import { createSqliteReportStore } from '../../src/storage/sqlite-report-store.js';
import { tempDir } from '../helpers/relay.js';
import { missFacts } from '../helpers/proxy-facts.js';
import { TRACING_OFF } from '../../src/tracing/tracing-config.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

function proxyRecord(id: string): ProxyRecord {
  return {
    facts: missFacts({ id, startedAt: Date.now() - 5, endedAt: Date.now() }),
    request: Buffer.from(JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: id }] })),
    response: Buffer.from(JSON.stringify({ id, model: 'gpt-4o-mini', choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })),
  };
}

function apiBody(n: string): Uint8Array {
  const now = new Date().toISOString();
  return Buffer.from(
    JSON.stringify({
      request: { timestamp: now, body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: n }] } },
      response: { timestamp: now, body: { id: n, choices: [] }, status: 200 },
      properties: { n },
    }),
  );
}

async function until(what: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function setUp(idleStopMs: number, burst?: { openCalls: () => number; onBurstEnd: () => void }) {
  const dataDir = await tempDir('llm-relay-idle-');
  dirs.push(dataDir);
  const settings = {
    reportsUrl: 'sqlite',
    sqliteFile: join(dataDir, 'reports.sqlite'),
    outboxFile: join(dataDir, 'outbox.ndjson'),
    journalFile: join(dataDir, 'reports.journal'),
    dataDir,
    reportRetentionMs: 0,
    bodyRetentionMs: 0,
    dataMaxBytes: 0,
    pricesFile: join(import.meta.dirname, '../../config/prices.json'),
    maxBodyBytes: 1024 * 1024,
    maxJsonDepth: 64,
    flushMs: 0,
    writeDelayMs: 50,
    batchMax: 500,
    outboxRetryMs: 1000,
    idleStopMs,
    defaults: { client: 'test', clientVersion: '0', environment: 'test' },
    tracing: TRACING_OFF,
  };
  const errors: string[] = [];
  const thread: ReportThread = createReportThread(settings, { warn: (_o, m) => errors.push(m), error: (_o, m) => errors.push(m) });
  const store = createSqliteReportStore({ file: settings.sqliteFile });
  const service = createReportService({ port: thread, store, batchMax: 500, ...burst });
  return { thread, service, store, errors, settings };
}

describe('report worker idle stop', () => {
  it('stops an idle worker and starts it again, keeping every report (also those sent while it stops)', async () => {
    const { thread, service, store, errors, settings } = await setUp(100);
    const apiIds: string[] = [];
    const proxyIds: string[] = [];
    const round = async (tag: string) => {
      const api: Promise<string>[] = [];
      for (let i = 0; i < 20; i++) {
        const id = `${tag}-p${i}`;
        proxyIds.push(id);
        service.recordProxy(proxyRecord(id));
        api.push(service.recordApi({ id: `${tag}-a${i}`, receivedAt: Date.now(), body: apiBody(`${tag}-${i}`) }));
        apiIds.push(`${tag}-a${i}`);
      }
      // every acknowledged report: its 201 came back
      expect((await Promise.all(api)).length).toBe(20);
    };
    expect(thread.state).toBe('stopped');
    await round('one');
    expect(thread.state).toBe('running');
    await until(() => thread.state !== 'running');
    expect(thread.starts).toBe(1);
    // sent while the worker closes: it goes to the next one, after the last one closed the files
    await round('two');
    await until(() => thread.state === 'stopped');
    expect(thread.starts).toBe(2);
    await round('three');
    expect(thread.starts).toBe(3);
    await service.flush();
    for (const id of [...apiIds, ...proxyIds]) expect((await store.get(id))?.id, id).toBe(id);
    expect(await store.count()).toBe(120);
    await service.close();
    await store.close();
    expect(errors).toEqual([]);
    // a clean close leaves the journal empty
    const { statSync } = await import('node:fs');
    expect(statSync(settings.journalFile).size).toBe(0);
  });

  it("a burst's records leave the stopped worker stopped until the burst is over, then give its memory back and start it once", async () => {
    const seen: string[] = [];
    let open = 400;
    const { thread, service, store, errors } = await setUp(60_000, {
      openCalls: () => open,
      onBurstEnd: () => seen.push(`give back (${thread.state})`),
    });
    const ids: string[] = [];
    // 400 proxied calls ending over ~0.4 s, as a round of streams does
    for (let i = 0; i < 400; i++) {
      const id = `burst-${i}`;
      ids.push(id);
      open--;
      service.recordProxy(proxyRecord(id));
      if (i % 10 === 9) {
        await new Promise((r) => setTimeout(r, 10));
        expect(thread.state).toBe('stopped');
      }
    }
    expect(service.counters.pending).toBe(400);
    await until(() => thread.state === 'running');
    expect(seen).toEqual(['give back (stopped)']);
    expect(thread.starts).toBe(1);
    await service.flush();
    for (const id of ids) expect((await store.get(id))?.id, id).toBe(id);
    expect(await store.count()).toBe(400);
    await service.close();
    await store.close();
    expect(errors).toEqual([]);
  });

  it('a store opened after an idle stop starts no sweep pass; one opened otherwise walks its blobs', async () => {
    const dataDir = await tempDir('llm-relay-idle-');
    dirs.push(dataDir);
    const file = join(dataDir, 'reports.sqlite');
    // (every body a blob, however short: the sweep walks blobs)
    const first = createSqliteReportStore({ file, bodyInlineBelow: 0 });
    const at = new Date().toISOString();
    await first.insertMany(
      Array.from({ length: 40 }, (_, i) => ({
        id: `b${i}`,
        receivedAt: at,
        request: { timestamp: at, body: { messages: [{ role: 'user', content: `a message of its own, long enough for a blob: ${i}` }] } },
        response: { timestamp: at, body: { id: `c${i}` }, status: 200 },
      })) as never,
    );
    await first.close();
    const step = { now: Date.now(), reportsBefore: 0, bodiesBefore: 0, trimOldest: 0, rows: 1 };
    // one row per kind of change: the pass walks 8 blobs a step
    const opened = createSqliteReportStore({ file, bodyInlineBelow: 0 });
    expect((await opened.prune!(step)).more).toBe(true);
    await opened.close();
    const resumed = createSqliteReportStore({ file, sweepOnOpen: false, bodyInlineBelow: 0 });
    expect(await resumed.prune!(step)).toEqual({ reports: 0, expired: 0, bodies: 0, more: false });
    await resumed.close();
  });

  it('keeps the worker with idle stop off', async () => {
    const { thread, service, store } = await setUp(0);
    service.recordProxy(proxyRecord('only'));
    await service.flush();
    await new Promise((r) => setTimeout(r, 300));
    expect(thread.state).toBe('running');
    expect(thread.starts).toBe(1);
    await service.close();
    await store.close();
  });
});
