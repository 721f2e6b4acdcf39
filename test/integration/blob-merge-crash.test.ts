// A SIGKILL in the middle of a blob merge (src/storage/sqlite-blob-index.ts) loses nothing: a writer with a
// small merge threshold is killed three times while a merge spans its batches (part of the tail in the hash
// index, `through` not moved), and started again, each pass reusing the bodies of the one before. After each
// kill no blob is missing, none is stored twice, and the index names no row that is not there; at the end every
// acknowledged report reads back deep-equal from a connection opened afterwards, and the merges that got
// through left every blob they cover indexed.
// Real SQLite, real processes (test/helpers/blob-writer.mjs, on the built store).
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { StoredReport } from '../../src/storage/report-store.js';
import { createSqliteReportStore } from '../../src/storage/sqlite-report-store.js';
import { crashReport } from '../helpers/blob-writer.mjs';
import { count, dangling, mergedAhead, through, unindexed } from '../helpers/blob-index-checks.js';
import { tempDir } from '../helpers/relay.js';
import { missingBlobs, sqliteRows } from '../helpers/report-stores.js';

const WRITER = fileURLToPath(new URL('../helpers/blob-writer.mjs', import.meta.url));
const report = crashReport as (pass: number, i: number) => StoredReport;

/** Runs the writer until its `merge`th merge (1: the first) is under way, then SIGKILLs it; the reports it acknowledged. */
async function writeUntilKilled(file: string, pass: number, merge: number): Promise<number> {
  const child: ChildProcess = spawn(process.execPath, [WRITER, file, String(pass), '300', '25'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let acked = 0;
  const merges = new Set<string>();
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
    let nl: number;
    while ((nl = out.indexOf('\n')) >= 0) {
      const [what, a, b] = out.slice(0, nl).split(' ');
      out = out.slice(nl + 1);
      if (what === 'ack') acked = Math.max(acked, Number(a) + Number(b));
      if (what === 'merging') merges.add(a!);
      // (its first slice is in: the merge has eleven more batches to go, the writer goes on writing)
      if (merges.size === merge && child.exitCode === null && !child.killed) child.kill('SIGKILL');
    }
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const signal = await exited;
  clearTimeout(timer);
  expect(signal, err).toBe('SIGKILL');
  return acked;
}

describe('a crash in the middle of a blob merge', () => {
  it('loses no acknowledged report, stores no blob twice and leaves no index entry without its row', async () => {
    const file = join(await tempDir('llm-relay-merge-crash-'), 'reports.sqlite');
    const acked: StoredReport[] = [];
    // Three kills with a merge under way: the first in the first merge, the next (whose writer starts that merge
    // over) in its second, the last in its third. Each writer is a new pass, reusing the pass before's bodies; a
    // kill that landed after its merge had ended (a busy machine) is followed by one more pass.
    for (let pass = 0, kills = 0; kills < 3; pass++) {
      if (pass > 8) throw new Error('no kill landed in the middle of a merge in nine passes');
      const n = await writeUntilKilled(file, pass, kills + 1);
      for (let i = 0; i < n; i++) acked.push(report(pass, i));
      if ((await mergedAhead(file)) > 0) kills++;
      expect(await count(file, 'SELECT count(*) - count(DISTINCT hash) AS n FROM bodies')).toBe(0);
      expect(await dangling(file)).toBe(0);
      expect(await missingBlobs({ rows: (sql) => sqliteRows(file, sql) })).toEqual([]);
    }
    // Every acknowledged report whole, from a connection that knows nothing of the writers.
    const store = createSqliteReportStore({ file });
    try {
      for (const sent of acked) expect(await store.get(sent.id)).toEqual(sent);
    } finally {
      await store.close();
    }
    // (merges got through, so later passes found merged blobs as well as tail ones; all they cover is indexed)
    expect(await through(file)).toBeGreaterThan(300);
    expect(await unindexed(file)).toBe(0);
  }, 90_000);
});
