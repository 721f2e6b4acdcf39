// What encoding one span for OTLP/protobuf costs: the official serializer of @opentelemetry/otlp-transformer
// against the relay's encoder (src/tracing/otlp-proto.ts, from dist: `npm run build` first), on batches of
// 512 spans shaped as a cache hit's span (14 attributes: the GenAI ones, the cache key, ids), interleaved,
// after a warm-up. Both produce the same bytes (checked here once, and by test/unit/tracing/otlp-proto.test.ts).
//   node bench/otlp-encode.mjs [rounds]
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { encodeTraceExport } from '../dist/tracing/otlp-proto.js';

const rounds = Number(process.argv[2] ?? 5);
const resource = defaultResource().merge(resourceFromAttributes({ 'host.name': 'bench', 'service.name': 'llm-relay', 'service.version': '0.1.0' }));
const scope = { name: 'llm-relay', version: '0.1.0', schemaUrl: 'https://opentelemetry.io/schemas/1.41.0' };
const hex = (n, i) => (i.toString(16).padStart(n, '0') + 'ab'.repeat(n)).slice(0, n);
const span = (i) => {
  const context = { traceId: hex(32, i), spanId: hex(16, i), traceFlags: 1 };
  return {
    name: 'chat gpt-4o-mini',
    kind: 1,
    spanContext: () => context,
    parentSpanContext: undefined,
    startTime: [1_764_110_000 + i, 123_456_789],
    endTime: [1_764_110_000 + i, 223_456_789],
    duration: [0, 100_000_000],
    attributes: {
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.response.model': 'gpt-4o-mini-2024-07-18',
      'gen_ai.response.id': `chatcmpl-${hex(20, i)}`,
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.usage.input_tokens': 12,
      'gen_ai.usage.output_tokens': 34 + (i % 50),
      'http.response.status_code': 200,
      'llm_relay.cache.status': 'HIT',
      'llm_relay.cache.key': hex(64, i * 7),
      'llm_relay.cache.namespace': `cred-${hex(32, 3)}`,
      'llm_relay.report.id': `01a2152e-e44e-7704-97d7-${hex(12, i)}`,
      'llm_relay.origin_report.id': '01a2152e-e44e-7704-97d7-5aa934e6792e',
    },
    status: { code: 0 },
    links: [],
    events: [],
    resource,
    instrumentationScope: scope,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
    ended: true,
  };
};
const batch = Array.from({ length: 512 }, (_, i) => span(i));
const official = (spans) => ProtobufTraceSerializer.serializeRequest(spans);
if (!Buffer.from(official(batch)).equals(Buffer.from(encodeTraceExport(batch)))) throw new Error('the two encoders disagree');

function perSpan(encode, times) {
  let bytes = 0;
  const t0 = process.hrtime.bigint();
  for (let k = 0; k < times; k++) bytes += encode(batch).length;
  return { us: Number(process.hrtime.bigint() - t0) / 1e3 / (times * batch.length), bytes: bytes / (times * batch.length) };
}
perSpan(official, 20);
perSpan(encodeTraceExport, 20);
const got = { official: [], relay: [] };
for (let r = 0; r < rounds; r++) {
  got.official.push(perSpan(official, 40).us);
  got.relay.push(perSpan(encodeTraceExport, 40).us);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const bytes = perSpan(encodeTraceExport, 1).bytes;
console.log(`| encoder | µs per span (median of ${rounds}) | rounds |`);
console.log('|---|--:|---|');
for (const [name, xs] of Object.entries(got)) console.log(`| ${name} | ${median(xs).toFixed(2)} | ${xs.map((x) => x.toFixed(2)).join(', ')} |`);
console.log(`\n${Math.round(bytes)} bytes per span; relay/official: ${(median(got.relay) / median(got.official)).toFixed(2)}`);
