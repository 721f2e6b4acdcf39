// What writing a traced hit's span costs on the report worker, as the relay does it for http/protobuf:
// exchangeSpans (src/tracing/exchange-spans.ts) writing to ProtoSpans (src/tracing/otlp-proto.ts), straight
// into protobuf bytes, from facts and a report shaped as a cache hit's and parsed from JSON as the worker
// gets them (14 attributes, ~770 bytes a span): 512 hits of 64 cache entries, the hits of one entry sharing
// its kept request and answer as they do on the worker. With more than one build directory, their rounds are
// interleaved in one process, so that a change can be measured against what it replaces (first
// `mkdir /tmp/before && cp -r dist /tmp/before/ && ln -s "$PWD/node_modules" /tmp/before/`, then rebuild).
//   npm run build && node bench/span-encode.mjs [dist …]        (default: ./dist)
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';

const dirs = process.argv.length > 2 ? process.argv.slice(2) : ['dist'];
const builds = await Promise.all(
  dirs.map(async (dir) => {
    const url = (file) => pathToFileURL(resolve(dir, file)).href;
    return { dir, proto: await import(url('tracing/otlp-proto.js')), spans: await import(url('tracing/exchange-spans.js')) };
  }),
);
const resource = defaultResource().merge(resourceFromAttributes({ 'host.name': 'bench', 'service.name': 'llm-relay', 'service.version': '0.1.0' }));
const scope = { name: 'llm-relay', version: '0.1.0', schemaUrl: 'https://opentelemetry.io/schemas/1.41.0' };
const hex = (n, i) => (i.toString(16).padStart(n, '0') + 'ab'.repeat(n)).slice(0, n);
const ENTRIES = 64;
// a cache entry: what the worker keeps of it (the request and answer, parsed once) and what its hits share
const entry = (e) =>
  JSON.parse(
    JSON.stringify({
      cacheKey: hex(64, e * 7),
      request: { body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] } },
      response: { body: { id: `chatcmpl-${hex(20, e)}`, model: 'gpt-4o-mini-2024-07-18', choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'x' } }] } },
      usage: { inputTokens: 12, outputTokens: 34 + (e % 50) },
    }),
  );
const entries = Array.from({ length: ENTRIES }, (_, e) => entry(e));
const hit = (i) => {
  const e = entries[i % ENTRIES];
  const { facts } = JSON.parse(
    JSON.stringify({
      facts: {
        id: `01a2152e-e44e-7704-97d7-${hex(12, i)}`,
        url: '/v1/chat/completions',
        method: 'POST',
        upstream: 'http://127.0.0.1:18480',
        status: 200,
        outcome: 'complete',
        cacheStatus: 'HIT',
        cacheKey: e.cacheKey,
        originReportId: `01a2152e-e44e-7704-97d7-${hex(12, i % ENTRIES)}`,
        trace: { traceId: hex(32, i), spanId: hex(16, i), start: 1764110000123.456 + i, end: 1764110000125.789 + i, namespace: `cred-${hex(32, 3)}` },
      },
    }),
  );
  const report = { request: e.request, response: e.response, model: 'gpt-4o-mini', provider: 'openai', proxy: { outcome: 'complete' }, usage: e.usage, costUsd: 0 };
  return { facts, report };
};
const exchanges = Array.from({ length: 512 }, (_, i) => hit(i));

const rounds = 12;
const warm = 2;
const times = builds.map(() => []);
let bytes = 0;
let spans = 0;
const outs = builds.map((b) => new b.proto.ProtoSpans(resource, scope, (s) => ((bytes += s.to - s.from), spans++)));
for (let r = 0; r < rounds; r++) {
  for (let k = 0; k < builds.length; k++) {
    const i = (k + r) % builds.length; // each build goes first in turn
    const { exchangeSpans } = builds[i].spans;
    const t0 = process.hrtime.bigint();
    for (let z = 0; z < 100; z++) for (const x of exchanges) exchangeSpans(x.facts, x.report, outs[i], false);
    if (r >= warm) times[i].push(Number(process.hrtime.bigint() - t0) / 1e3 / (100 * exchanges.length));
  }
}
console.log('| build | µs per hit span (median) | fastest round |');
console.log('|---|--:|--:|');
for (let i = 0; i < builds.length; i++) {
  const s = times[i].sort((a, b) => a - b);
  console.log(`| ${builds[i].dir} | ${s[s.length >> 1].toFixed(2)} | ${s[0].toFixed(2)} |`);
}
console.log(`\n${Math.round(bytes / spans)} bytes per span`);
