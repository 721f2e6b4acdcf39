// A 201 from the reporting endpoint means the report survives a crash: SIGKILL the relay while reports
// pour in, restart it on the same data dir (and the same PostgreSQL database), and find every acknowledged
// report. On SQLite the journal's sync stands behind the 201; on PostgreSQL the server's commit.
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/relay.js';
import { spawnRelay } from '../helpers/relay-process.js';
import { databaseRows, dropDatabases, freshDatabase } from '../helpers/report-stores.js';

afterAll(dropDatabases);

/** The relay's settings for a report store of this kind: a fresh data dir, and a fresh database on PostgreSQL. */
async function settings(kind: 'sqlite' | 'postgres'): Promise<Record<string, string>> {
  const env = { RELAY_DATA_DIR: await tempDir(), RELAY_CACHE_URL: 'memory' };
  return kind === 'sqlite' ? env : { ...env, RELAY_REPORTS_URL: await freshDatabase('relay_durability') };
}

function report(i: number) {
  return {
    metadata: { client: 'crash-test', environment: 'durability' },
    request: { timestamp: new Date().toISOString(), body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `n${i}` }] } },
    response: { timestamp: new Date().toISOString(), body: { id: `r${i}`, choices: [] }, status: 200 },
    properties: { i },
    cacheEnabled: false,
    cacheHit: null,
  };
}

describe.each(['sqlite', 'postgres'] as const)('durability (%s reports)', (kind) => {
  it('keeps every acknowledged report across SIGKILL', async () => {
    const env = await settings(kind);
    const first = await spawnRelay(env);
    const acknowledged: string[] = [];
    let killed = false;

    const send = async (i: number) => {
      try {
        const res = await fetch(`${first.url}/api/reporting/v2/request`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(report(i)),
        });
        if (res.status === 201) {
          const body = (await res.json()) as { id: string };
          acknowledged.push(body.id);
          if (acknowledged.length >= 300 && !killed) {
            killed = true;
            first.child.kill('SIGKILL');
          }
        }
      } catch {
        // in flight when the process died: never acknowledged, so nothing is promised
      }
    };
    // 40 concurrent senders until the kill.
    let next = 0;
    await Promise.all(
      Array.from({ length: 40 }, async () => {
        while (!killed && next < 5000) await send(next++);
      }),
    );
    expect((await first.exited).signal).toBe('SIGKILL');
    expect(acknowledged.length).toBeGreaterThanOrEqual(300);

    const second = await spawnRelay(env);
    try {
      const found = new Set<string>();
      let cursor: string | null = null;
      do {
        const page = (await (
          await fetch(`${second.url}/api/reporting/v2/requests?client=crash-test&limit=1000${cursor ? `&cursor=${cursor}` : ''}`)
        ).json()) as { items: { id: string }[]; nextCursor: string | null };
        for (const r of page.items) found.add(r.id);
        cursor = page.nextCursor;
      } while (cursor);
      const lost = acknowledged.filter((id) => !found.has(id));
      expect(lost).toEqual([]);
      if (kind === 'postgres') {
        // (read back from the database itself: the relay's reads went to PostgreSQL, not to a local file)
        const rows = await databaseRows(env.RELAY_REPORTS_URL!, "SELECT count(*)::int AS n FROM reports WHERE client = 'crash-test'");
        expect(rows[0]!.n).toBeGreaterThanOrEqual(acknowledged.length);
      }
    } finally {
      second.child.kill('SIGTERM');
      expect(await second.exited).toEqual({ code: 0, signal: null });
    }
  });
});
