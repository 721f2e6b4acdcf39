// A crash in the middle of retention loses nothing still referenced: the relay is SIGKILLed while its
// pruner strips and deletes thousands of old reports and sweeps their blobs, and while reports that reuse
// those old messages pour in through the API. Afterwards every acknowledged report reads back with exactly
// the bodies it was sent with, and no report with bodies names a blob the store does not hold. On SQLite and
// on PostgreSQL (a database of its own).
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresReportStore } from '../../src/storage/postgres-report-store.js';
import type { ReportStore, StoredReport } from '../../src/storage/report-store.js';
import { createSqliteReportStore } from '../../src/storage/sqlite-report-store.js';
import { tempDir } from '../helpers/relay.js';
import { spawnRelay } from '../helpers/relay-process.js';
import { databaseRows, dropDatabases, freshDatabase, missingBlobs, sqliteRows } from '../helpers/report-stores.js';
import { storedReport } from '../helpers/stored-report.mjs';

const DAY = 86_400_000;
const OLD = 12_000;
/** Messages that old reports and new ones share: the sweep must not take one a new report uses. */
const SHARED = Array.from({ length: 50 }, (_, i) => ({ role: 'user', content: `shared question ${i} `.repeat(8) }));

afterAll(dropDatabases);

interface Store {
  /** the relay's settings for it */
  env: Record<string, string>;
  /** the store itself, on the clock `now` */
  open(now: () => number): Promise<ReportStore>;
  rows(sql: string): Promise<Record<string, unknown>[]>;
}

/** A fresh store of this kind: a SQLite file in a new data dir, or a new PostgreSQL database (and a data dir). */
async function freshStore(kind: 'sqlite' | 'postgres'): Promise<Store> {
  const dataDir = await tempDir();
  const env = { RELAY_DATA_DIR: dataDir, RELAY_CACHE_URL: 'memory' };
  if (kind === 'sqlite') {
    const file = join(dataDir, 'reports.sqlite');
    return { env, open: async (now) => createSqliteReportStore({ file, now }), rows: (sql) => sqliteRows(file, sql) };
  }
  const url = await freshDatabase('relay_retention_crash');
  return {
    env: { ...env, RELAY_REPORTS_URL: url },
    open: (now) => createPostgresReportStore({ connectionString: url, now }),
    rows: (sql) => databaseRows(url, sql),
  };
}

function oldReport(i: number, receivedMs: number): StoredReport {
  return storedReport(
    `old-${String(i).padStart(6, '0')}`,
    new Date(receivedMs).toISOString(),
    { client: 'old', environment: 'crash' },
    { model: 'gpt-4o-mini', messages: [SHARED[i % SHARED.length], { role: 'user', content: `old ${i}` }] },
    { id: `o${i}`, choices: [{ index: 0, message: { role: 'assistant', content: `old answer ${i}` } }] },
  ) as StoredReport;
}

function newReport(i: number) {
  return {
    metadata: { client: 'crash-test', environment: 'crash' },
    request: { timestamp: new Date().toISOString(), body: { model: 'gpt-4o-mini', messages: [SHARED[i % SHARED.length], { role: 'user', content: `new ${i}` }] } },
    response: { timestamp: new Date().toISOString(), body: { id: `n${i}`, choices: [{ index: 0, message: { role: 'assistant', content: `old answer ${i}` } }] }, status: 200 },
    cacheEnabled: false,
    cacheHit: null,
  };
}

describe.each(['sqlite', 'postgres'] as const)('a crash during retention (%s reports)', (kind) => {
  it('loses no acknowledged report and no blob a report with bodies uses', async () => {
    const store = await freshStore(kind);
    const rows = store.rows;
    const now = Date.now();
    // Half past report retention (deleted), half past body retention only (stripped); blobs written then.
    const seed = await store.open(() => now - 100 * DAY);
    for (let i = 0; i < OLD; i += 1000) {
      await seed.insertMany(Array.from({ length: 1000 }, (_, k) => oldReport(i + k, now - ((i + k) % 2 === 0 ? 100 : 40) * DAY)));
    }
    await seed.close();
    const untouched = async (): Promise<number> =>
      Number((await rows("SELECT count(*) AS n FROM reports WHERE client = 'old' AND NOT bodies_expired"))[0]!.n);
    expect(await untouched()).toBe(OLD);

    const env = store.env;
    const first = await spawnRelay(env);
    const sent = new Map<string, ReturnType<typeof newReport>>();
    let killed = false;
    let next = 0;
    const send = async (i: number): Promise<void> => {
      const body = newReport(i);
      try {
        const res = await fetch(`${first.url}/api/reporting/v2/request`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        if (res.status === 201) sent.set(((await res.json()) as { id: string }).id, body);
      } catch {
        // in flight when the process died: never acknowledged
      }
    };
    const senders = Array.from({ length: 20 }, async () => {
      while (!killed && next < 50_000) await send(next++);
    });
    // Kill while the pruner is part-way through the old reports (and the API is answering).
    const deadline = Date.now() + 60_000;
    for (;;) {
      const left = await untouched();
      if (left < OLD * 0.7 && left > 0) break;
      if (left === 0) throw new Error('the pruner finished before the kill: seed more reports');
      if (Date.now() > deadline) throw new Error(`the pruner did not start (${left} old reports untouched)`);
      await new Promise((r) => setTimeout(r, 20));
    }
    killed = true;
    first.child.kill('SIGKILL');
    await Promise.all(senders);
    expect((await first.exited).signal).toBe('SIGKILL');
    expect(sent.size).toBeGreaterThan(0);
    expect(await untouched()).toBeGreaterThan(0);
    expect(await missingBlobs({ rows })).toEqual([]);

    // Start again: the pruner finishes its work, and every acknowledged report is there with its bodies.
    const second = await spawnRelay(env);
    try {
      await fetch(`${second.url}/api/reporting/v2/request`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(newReport(99_999)) });
      const settle = Date.now() + 60_000;
      while ((await untouched()) > 0 && Date.now() < settle) await new Promise((r) => setTimeout(r, 100));
      expect(await untouched()).toBe(0);
      // And the sweep has taken the old reports' own blobs: what is left is the new reports' and the
      // shared messages they use.
      const blobs = async (): Promise<number> => Number((await rows('SELECT count(*) AS n FROM bodies'))[0]!.n);
      // (the new reports include some written but not acknowledged before the kill)
      const fresh = Number((await rows("SELECT count(*) AS n FROM reports WHERE client = 'crash-test'"))[0]!.n);
      expect(fresh).toBeGreaterThanOrEqual(sent.size);
      const limit = fresh * 4 + SHARED.length;
      while ((await blobs()) > limit && Date.now() < settle) await new Promise((r) => setTimeout(r, 100));
      expect(await blobs()).toBeLessThanOrEqual(limit);
      for (const [id, body] of sent) {
        const res = await fetch(`${second.url}/api/reporting/v2/requests/${id}`);
        expect(res.status).toBe(200);
        const got = (await res.json()) as StoredReport;
        expect(got.bodiesExpired).toBeUndefined();
        expect(got.request.body).toEqual(body.request.body);
        expect(got.response.body).toEqual(body.response.body);
      }
      expect(await missingBlobs({ rows })).toEqual([]);
    } finally {
      second.child.kill('SIGTERM');
      expect(await second.exited).toEqual({ code: 0, signal: null });
    }
  }, 120_000);
});
