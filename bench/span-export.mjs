// What a traced hit's span costs on the report worker from end to end, for http/protobuf (or http/json with
// OTLP_PROTOCOL=http/json): written (exchange-spans.ts → ProtoSpans or JsonSpans), queued in the SDK's
// BatchSpanProcessor and exported over HTTP by the official transport (span-export.ts) to a local sink
// (bench/otlp-sink.mjs, its own process) — the same path the worker runs, in this one process, so that its
// CPU time (user + system, every thread of it) is the spans' alone. Hits of 64 cache entries
// (bench/lib/hit-spans.mjs); the loop yields to the event loop every 64 spans, as a worker between batches,
// so that exports run beside it. With more than one build directory, their rounds are interleaved in one
// process (keep the old build as bench/span-encode.mjs says, then rebuild).
//   npm run build && node bench/span-export.mjs [dist …]        (SPANS: spans a round, 200000)
import { spawn } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { hitSpans } from './lib/hit-spans.mjs';
import { BENCH_DIR, freePort, sleep } from './lib/processes.mjs';

const N = Number(process.env.SPANS ?? 200_000);
const dirs = process.argv.length > 2 ? process.argv.slice(2) : ['dist'];
const port = await freePort();
const sink = spawn(process.execPath, [path.join(BENCH_DIR, 'otlp-sink.mjs')], { env: { ...process.env, OTLP_SINK_PORT: String(port) }, stdio: ['ignore', 'pipe', 'inherit'] });
let sinkOut = '';
sink.stdout.on('data', (c) => (sinkOut += c));
while (!sinkOut.includes('port')) await sleep(50);

// A queue deep enough that this loop, faster than any relay's traffic, never drops (a dropped span costs less).
const env = { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_EXPORTER_OTLP_PROTOCOL: process.env.OTLP_PROTOCOL ?? 'http/protobuf', OTEL_BSP_MAX_QUEUE_SIZE: '65536' };
const builds = await Promise.all(
  dirs.map(async (dir) => {
    const url = (file) => pathToFileURL(path.resolve(dir, file)).href;
    const { createSpanExport } = await import(url('tracing/span-export.js'));
    const { tracingFromEnv } = await import(url('tracing/tracing-config.js'));
    const problems = [];
    const settings = tracingFromEnv(env, problems);
    if (problems.length > 0) throw new Error(problems.join('; '));
    const spans = await createSpanExport(settings, { version: '0.1.0', onCounters() {}, onFailure: (err) => console.error('export failed', err) });
    return { dir, spans, times: [] };
  }),
);

const hits = hitSpans(2048);

const ROUNDS = 6;
for (let round = 0; round < ROUNDS; round++) {
  for (let k = 0; k < builds.length; k++) {
    const b = builds[(k + round) % builds.length]; // each build goes first in turn
    const before = process.cpuUsage();
    for (let i = 0; i < N; i++) {
      const { facts, report } = hits[i & 2047];
      b.spans.submit(facts, report);
      if ((i & 63) === 63) await new Promise((resolve) => setImmediate(resolve));
    }
    await sleep(200); // the last exports of the round
    const used = process.cpuUsage(before);
    if (round > 0) b.times.push([(used.user + used.system) / N, used.system / N]);
  }
}
console.log('| build | CPU µs a span, user + system (median) | of it system | rounds |');
console.log('|---|--:|--:|---|');
for (const b of builds) {
  const sorted = [...b.times].sort((x, y) => x[0] - y[0]);
  const mid = sorted[sorted.length >> 1];
  console.log(`| ${b.dir} | ${mid[0].toFixed(2)} | ${mid[1].toFixed(2)} | ${b.times.map((t) => t[0].toFixed(2)).join(', ')} |`);
}
for (const b of builds) {
  const c = b.spans.counters;
  console.log(`\n${b.dir}: spans exported ${c.exported}, dropped (queue full) ${c.dropped}, failed ${c.failed}`);
  await b.spans.shutdown();
}
sink.kill('SIGTERM');
