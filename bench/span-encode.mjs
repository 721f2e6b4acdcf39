// What writing a traced hit's span costs on the report worker, as the relay does it for http/protobuf:
// exchangeSpans (src/tracing/exchange-spans.ts) writing to ProtoSpans (src/tracing/otlp-proto.ts), straight
// into protobuf bytes, for 512 hits of 64 cache entries shaped as the worker gets them
// (bench/lib/hit-spans.mjs). With more than one build directory, their rounds are interleaved in one
// process, so that a change can be measured against what it replaces (first
// `mkdir /tmp/before && cp -r dist /tmp/before/ && ln -s "$PWD/node_modules" /tmp/before/`, then rebuild).
//   npm run build && node bench/span-encode.mjs [dist …]        (default: ./dist)
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { hitSpans } from './lib/hit-spans.mjs';

const dirs = process.argv.length > 2 ? process.argv.slice(2) : ['dist'];
const builds = await Promise.all(
  dirs.map(async (dir) => {
    const url = (file) => pathToFileURL(resolve(dir, file)).href;
    return { dir, proto: await import(url('tracing/otlp-proto.js')), spans: await import(url('tracing/exchange-spans.js')) };
  }),
);
const resource = defaultResource().merge(resourceFromAttributes({ 'host.name': 'bench', 'service.name': 'llm-relay', 'service.version': '0.1.0' }));
const scope = { name: 'llm-relay', version: '0.1.0', schemaUrl: 'https://opentelemetry.io/schemas/1.41.0' };
const exchanges = hitSpans(512);

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
