// What the SQLite report store's insert costs (src/storage/sqlite-report-store.ts): durable batches of
// direct-API reports with two new bodies each (cpu.sh's report bodies, derived by the report pipeline as the
// worker derives them), in a fresh file per build, after REPORTS_BEFORE reports are in the file. CPU time
// (user + system) of this process per report, and wall time. With more than one build directory, each
// runs in turn (keep the old build as bench/span-encode.mjs says, then rebuild).
//   npm run build && node bench/report-store.mjs [dist …]      (REPORTS 20000, REPORTS_BEFORE 3000, BATCH 200)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const dirs = process.argv.length > 2 ? process.argv.slice(2) : ['dist'];
const N = Number(process.env.REPORTS ?? 20_000);
const BEFORE = Number(process.env.REPORTS_BEFORE ?? 3000);
const BATCH = Number(process.env.BATCH ?? 200);
const PRICES = resolve('config/prices.json');
const tag = `run${Date.now()}`;

/** The direct-API report ../shared/bench/client.mjs posts in its report mode, the i-th. */
function reportText(i) {
  return JSON.stringify({
    metadata: { client: 'cost', environment: 'bench' },
    properties: { run: tag },
    cacheEnabled: true,
    cacheHit: false,
    request: {
      timestamp: '2026-11-25T00:00:00.000Z',
      body: { model: 'gpt-4o-mini', stream: false, messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: `hello ${tag}-${i} ` }] },
    },
    response: {
      timestamp: '2026-11-25T00:00:01.000Z',
      body: {
        id: `chatcmpl-${i}`,
        model: 'gpt-4o-mini',
        choices: [{ index: 0, message: { role: 'assistant', content: `answer ${i} ` }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 20, completion_tokens: 25, total_tokens: 45 },
      },
    },
  });
}

for (const dir of dirs) {
  const dist = pathToFileURL(resolve(dir)).href;
  const { createSqliteReportStore } = await import(`${dist}/storage/sqlite-report-store.js`);
  const { createReportPipeline } = await import(`${dist}/core/report-pipeline.js`);
  const { loadPriceTable } = await import(`${dist}/core/pricing.js`);
  const pipeline = createReportPipeline({
    prices: loadPriceTable(PRICES),
    maxBodyBytes: 1 << 20,
    maxJsonDepth: 64,
    defaults: { client: 'bench', clientVersion: '0', environment: 'bench' },
  });
  const made = (i) => pipeline.api({ id: `0190${String(i).padStart(12, '0')}-bench`, receivedAt: Date.now(), body: Buffer.from(reportText(i)) });
  const data = mkdtempSync(join(tmpdir(), 'relay-report-store-'));
  const store = createSqliteReportStore({ file: join(data, 'reports.sqlite') });
  try {
    const write = async (from, count) => {
      for (let i = from; i < from + count; i += BATCH) await store.insertMany(Array.from({ length: Math.min(BATCH, from + count - i) }, (_, j) => made(i + j)), { durable: true });
    };
    await write(0, BEFORE);
    const reports = Array.from({ length: N }, (_, i) => made(BEFORE + i));
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < N; i += BATCH) await store.insertMany(reports.slice(i, i + BATCH), { durable: true });
    const used = process.cpuUsage(cpu);
    const wall = performance.now() - t0;
    const per = (us) => (us / N).toFixed(1);
    console.log(
      JSON.stringify({ build: dir, reportsBefore: BEFORE, reports: N, batch: BATCH, cpuUs: +per(used.user + used.system), userUs: +per(used.user), systemUs: +per(used.system), wallUs: +per(wall * 1000) }),
    );
  } finally {
    await store.close();
    rmSync(data, { recursive: true, force: true });
  }
}
