// Several relays on one PostgreSQL: one sweeps old blobs while another writes reports that use those same
// blobs again. No report with bodies may end up naming a blob the store lost (the sweep's last_ms test is
// re-checked under the row lock a concurrent batch takes; a blob deleted first is inserted again).
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { createPostgresReportStore } from '../../src/storage/postgres-report-store.js';
import { createReportPruner } from '../../src/storage/report-pruner.js';
import type { StoredReport } from '../../src/storage/report-store.js';
import { missingBlobs } from '../helpers/report-stores.js';
import { DATABASE_URL, requirePostgres } from '../helpers/servers.js';

const DAY = 86_400_000;
const schema = `t_race_${process.pid}_${Date.now()}`;
const SHARED = Array.from({ length: 40 }, (_, i) => ({ role: 'user', content: `shared message ${i}` }));

afterAll(async () => {
  const c = new pg.Client({ connectionString: DATABASE_URL });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await c.end();
});

function report(id: string, receivedMs: number, i: number): StoredReport {
  const at = new Date(receivedMs).toISOString();
  return {
    id,
    receivedAt: at,
    request: { timestamp: at, body: { model: 'm', messages: [SHARED[i % SHARED.length], { role: 'user', content: id }] } },
    response: { timestamp: at, body: { choices: [{ index: 0, message: SHARED[(i * 7) % SHARED.length] }] } },
    durationMs: 0,
    status: 200,
    model: 'm',
    provider: null,
    usage: null,
    costUsd: null,
    requestBytes: 0,
    responseBytes: 0,
  };
}

it('postgres: a sweep on one relay never takes a blob a batch on another is writing', async () => {
  await requirePostgres();
  const now = Date.now();
  const old = now - 40 * DAY;
  const seeding = await createPostgresReportStore({ connectionString: DATABASE_URL, schema, now: () => old });
  for (let b = 0; b < 4; b++) await seeding.insertMany(Array.from({ length: 500 }, (_, k) => report(`old-${b}-${k}`, old, b * 500 + k)));
  await seeding.close();

  const writer = await createPostgresReportStore({ connectionString: DATABASE_URL, schema });
  const sweeper = await createPostgresReportStore({ connectionString: DATABASE_URL, schema });
  try {
    // The sweeper's clock is a day ahead, so it may sweep everything the old reports wrote once they lose
    // their bodies; the writer meanwhile uses the same shared messages again.
    const pruner = createReportPruner({
      store: sweeper,
      reportRetentionMs: 0,
      bodyRetentionMs: 30 * DAY,
      maxBytes: 0,
      measure: async () => 0,
      now: () => Date.now() + DAY,
      rows: 100,
    });
    let pruning = true;
    const prunes = (async () => {
      while (pruning) await pruner.step();
    })();
    for (let b = 0; b < 20; b++) await writer.insertMany(Array.from({ length: 25 }, (_, k) => report(`new-${b}-${k}`, Date.now(), b * 25 + k)));
    pruning = false;
    await prunes;
    while ((await pruner.step()).more);
    const fresh = await writer.get('new-19-24');
    expect(fresh?.request.body).toEqual(report('new-19-24', 0, 19 * 25 + 24).request.body);
    const c = new pg.Client({ connectionString: DATABASE_URL });
    await c.connect();
    try {
      await c.query(`SET search_path TO "${schema}"`);
      const rows = async (sql: string) => (await c.query(sql)).rows as Record<string, unknown>[];
      expect(Number((await rows('SELECT count(*) AS n FROM reports WHERE NOT bodies_expired'))[0]!.n)).toBe(500);
      expect(await missingBlobs({ rows })).toEqual([]);
    } finally {
      await c.end();
    }
  } finally {
    await writer.close();
    await sweeper.close();
  }
});
