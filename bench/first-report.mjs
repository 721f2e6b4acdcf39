// How long a direct-API report waits when the report worker has stopped for being idle: a relay (this
// checkout's dist/) with RELAY_REPORT_WORKER_IDLE_MS=500, one POST to /api/reporting/v2/request after each
// pause of 1.5 s, timed at the client; once with tracing off and once on (an OTLP endpoint set, at a closed
// port: direct-API reports make no spans), so that what tracing adds to a worker's start shows.
//   npm run build && node bench/first-report.mjs        (PAUSES: how many, 6)
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, freePort, sleep, startRelay, stopChild } from './lib/processes.mjs';

const PAUSES = Number(process.env.PAUSES ?? 6);
const REPORT = JSON.stringify({
  metadata: { client: 'bench' },
  request: { timestamp: '2026-11-25T12:00:00.000Z', body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] } },
  response: { timestamp: '2026-11-25T12:00:01.000Z', body: { model: 'gpt-4o-mini', choices: [] } },
});

async function firstReports(env) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'relay-first-report-'));
  const relay = await startRelay({ cli: path.join(ROOT, 'dist', 'cli.js'), upstreamUrl: 'http://127.0.0.1:9', dataDir, env: { RELAY_REPORT_WORKER_IDLE_MS: '500', ...env }, buildCommand: 'npm run build' });
  try {
    const ms = [];
    for (let i = 0; i < PAUSES; i++) {
      await sleep(1500);
      const t0 = performance.now();
      const res = await fetch(`${relay.url}/api/reporting/v2/request`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: REPORT });
      await res.text();
      if (res.status !== 201) throw new Error(`report answered ${res.status}`);
      ms.push(Math.round(performance.now() - t0));
    }
    return ms;
  } finally {
    await stopChild(relay, 10_000);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const closed = `http://127.0.0.1:${await freePort()}`;
console.log('| tracing | ms to the 201, after each pause |');
console.log('|---|---|');
console.log(`| off | ${(await firstReports({})).join(', ')} |`);
console.log(`| on (http/protobuf) | ${(await firstReports({ OTEL_EXPORTER_OTLP_ENDPOINT: closed })).join(', ')} |`);
