// An exchange's spans are written once, through SpanOut, as the relay writes them — protobuf bytes while they
// end (ProtoSpans: http/protobuf) or JSON text (JsonSpans: http/json), no span object on the way — and as span
// objects (SpanObjects, this test's reference, read by the official serializers). On arbitrary exchanges —
// hits, misses, streams, errors, coalesced calls, clients' parents, unknown paths, captured content, Unicode
// everywhere — an export of the relay's spans is, byte for byte, what the official ProtobufTraceSerializer
// or JsonTraceSerializer writes for the objects; and a batch that mixes encoded spans from several slabs comes
// out whole and in order. The attributes hits of one cache entry share are written once and copied after,
// and written again when any of their inputs changes.
import { SpanKind } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import type { ProxyFacts } from '../../../src/core/exchange-record.js';
import type { StoredReport } from '../../../src/storage/report-store.js';
import { SpanKey, type SpanOut, exchangeSpans } from '../../../src/tracing/exchange-spans.js';
import { type JsonSpan, JsonSpans, encodeTraceJson, nanosText } from '../../../src/tracing/otlp-json.js';
import { type EncodedSpan, ProtoSpans, encodeTraceExport } from '../../../src/tracing/otlp-proto.js';
import { SpanObjects } from './span-objects.js';

const resource = resourceFromAttributes({ 'service.name': 'llm-relay', 'host.name': 'relay-ünï', 'service.version': '1.2.3' });
const scope = { name: 'llm-relay', version: '1.2.3', schemaUrl: 'https://opentelemetry.io/schemas/1.41.0' };

const hex = (bytes: number) => fc.uint8Array({ minLength: bytes, maxLength: bytes }).map((b) => Buffer.from(b).toString('hex'));
const text = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'grapheme', maxLength: 60 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.constantFrom('gpt-4o-mini', 'claude-sonnet-4-5', 'é'.repeat(70), 'x'.repeat(200)),
);
const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });
const epoch = fc.double({ min: 1.7e12, max: 1.9e12, noNaN: true });

const facts = fc.record({
  id: fc.uuid(),
  url: fc.constantFrom('/v1/chat/completions', '/v1/messages', '/v1/embeddings', '/v1/responses', '/v1/completions', '/v1beta/models/g:generateContent?key=k', '/v1/models', '/other/path?q=1'),
  method: fc.constantFrom('POST', 'GET'),
  upstream: fc.constantFrom(null, 'http://127.0.0.1:8080', 'https://api.openai.com', 'https://api.anthropic.com:8443'),
  status: fc.integer({ min: 100, max: 599 }),
  cacheStatus: fc.constantFrom('HIT', 'MISS', 'BYPASS', 'REFRESH', 'COALESCED'),
  outcome: fc.constantFrom('complete', 'upstream-error', 'stream-error', 'client-abort', 'cache-only-miss'),
  cacheKey: fc.option(hex(32), { nil: null }),
  originReportId: opt(fc.uuid()),
  trace: fc.record({
    traceId: hex(16),
    spanId: hex(8),
    parentSpanId: opt(hex(8)),
    parentFlags: opt(fc.integer({ min: 0, max: 255 })),
    start: epoch,
    end: opt(epoch),
    namespace: opt(text),
    upstream: opt(
      fc.record({ spanId: hex(8), start: epoch, end: opt(epoch), status: opt(fc.integer({ min: 100, max: 599 })), error: opt(fc.constantFrom('RELAY_ERR_UPSTREAM_UNREACHABLE', 'RELAY_ERR_UPSTREAM_TIMEOUT')) }, { requiredKeys: ['spanId', 'start'] }),
    ),
    firstChunk: opt(epoch),
    leader: opt(fc.record({ traceId: hex(16), spanId: hex(8) })),
  }, { requiredKeys: ['traceId', 'spanId', 'start'] }),
}).map((f) => f as unknown as ProxyFacts);

const message = fc.record({ role: fc.constantFrom('system', 'user', 'assistant'), content: text });
const report = fc
  .record({
    request: fc.option(fc.record({ model: fc.oneof(text, fc.integer()), stream: fc.boolean(), messages: fc.array(message, { maxLength: 3 }), system: opt(text) }, { requiredKeys: [] }), { nil: null }),
    response: fc.option(
      fc.oneof(
        fc.record({ id: text, model: text, object: fc.constant('chat.completion'), choices: fc.array(fc.record({ finish_reason: fc.oneof(text, fc.constant(null)), message }), { maxLength: 3 }) }, { requiredKeys: [] }),
        fc.record({ id: text, model: text, type: fc.constant('message'), stop_reason: text, content: fc.array(fc.record({ type: fc.constant('text'), text }), { maxLength: 2 }) }, { requiredKeys: [] }),
        fc.record({ id: text, object: fc.constant('response'), status: text }),
      ),
      { nil: null },
    ),
    model: fc.option(text, { nil: null }),
    provider: fc.option(fc.constantFrom('openai', 'anthropic', 'ïnternal'), { nil: null }),
    outcome: opt(fc.constantFrom('complete', 'stream-error', 'upstream-error')),
    usage: opt(fc.record({ inputTokens: fc.nat(), outputTokens: fc.nat(), estimated: fc.boolean() })),
    costUsd: fc.option(fc.oneof(fc.double({ min: 0, max: 10, noNaN: true }), fc.constant(0)), { nil: null }),
  })
  .map(
    (r) =>
      ({
        request: { body: r.request },
        response: { body: r.response },
        model: r.model,
        provider: r.provider,
        proxy: r.outcome === undefined ? null : { outcome: r.outcome },
        usage: r.usage ?? null,
        costUsd: r.costUsd,
      }) as unknown as StoredReport,
  );
const exchange = fc.record({ facts, report, content: fc.boolean() });

function both(exchanges: { facts: ProxyFacts; report: StoredReport; content: boolean }[]): { objects: ReadableSpan[]; encoded: EncodedSpan[] } {
  const objects: ReadableSpan[] = [];
  const encoded: EncodedSpan[] = [];
  const asObjects = new SpanObjects({ resource, scope }, (s) => objects.push(s));
  const asBytes = new ProtoSpans(resource, scope, (s) => encoded.push(s));
  for (const x of exchanges) {
    exchangeSpans(x.facts, x.report, asObjects, x.content);
    exchangeSpans(x.facts, x.report, asBytes, x.content);
  }
  return { objects, encoded };
}

const official = (spans: ReadableSpan[]) => Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
const ours = (spans: (ReadableSpan | EncodedSpan)[]) => Buffer.from(encodeTraceExport(spans));

/** The relay's two writers, each with its export and the official serializer it stands in for. */
interface Writer<S> {
  make(emit: (span: S) => void): SpanOut;
  ours(spans: S[]): Buffer;
  official(objects: ReadableSpan[]): Buffer;
  /** the span's size, bytes or characters */
  size(span: S): number;
}
const protobuf: Writer<EncodedSpan> = {
  make: (emit) => new ProtoSpans(resource, scope, emit),
  ours,
  official,
  size: (span) => span.to - span.from,
};
const json: Writer<JsonSpan> = {
  make: (emit) => new JsonSpans(resource, scope, emit),
  ours: (spans) => Buffer.from(encodeTraceJson(spans)),
  official: (objects) => Buffer.from(JsonTraceSerializer.serializeRequest(objects)!),
  size: (span) => span.text.length,
};

describe('an exchange’s spans, as objects and as bytes', () => {
  it('encoded as they end: the official serializer’s bytes for the same spans as objects', () => {
    fc.assert(
      fc.property(fc.array(exchange, { minLength: 1, maxLength: 5 }), (exchanges) => {
        const { objects, encoded } = both(exchanges);
        expect(encoded.length).toBe(objects.length);
        expect(objects.length).toBe(exchanges.length + exchanges.filter((x) => x.facts.trace!.upstream).length);
        expect(ours(encoded).equals(official(objects))).toBe(true);
      }),
      { numRuns: 1500 },
    );
  });

  it('written as JSON text as they end: the official JSON serializer’s bytes for the same spans as objects', () => {
    fc.assert(
      fc.property(fc.array(exchange, { minLength: 1, maxLength: 5 }), (exchanges) => {
        const objects: ReadableSpan[] = [];
        const texts: JsonSpan[] = [];
        const asObjects = new SpanObjects({ resource, scope }, (s) => objects.push(s));
        const asText = json.make((s) => texts.push(s));
        for (const x of exchanges) {
          exchangeSpans(x.facts, x.report, asObjects, x.content);
          exchangeSpans(x.facts, x.report, asText, x.content);
        }
        expect(texts.length).toBe(objects.length);
        expect(json.ours(texts).toString()).toBe(json.official(objects).toString());
      }),
      { numRuns: 1500 },
    );
  });

  it('times as the official JSON encoder writes them, at any millisecond, whole or not', () => {
    const official = (ms: number) => {
      const [seconds, nanos] = [Math.trunc(ms / 1000), Math.round((ms % 1000) * 1e6)];
      return (BigInt(seconds) * 1_000_000_000n + BigInt(nanos)).toString();
    };
    fc.assert(
      fc.property(fc.oneof(fc.double({ min: 0, max: 4e12, noNaN: true }), fc.integer({ min: 0, max: 4e12 }), fc.constantFrom(0, 999.9999999, 1999.99999996, 1.7e12 + 999.9999997)), (ms) => {
        expect(nanosText(ms)).toBe(official(ms));
      }),
      { numRuns: 5000 },
    );
  });

  const hitsOfOneEntry = <S,>(writer: Writer<S>) => {
    // what changes from one hit of the entry to the next: always the exchange's own (id, trace, times), and
    // at times one input of the shared attributes
    const change = fc.oneof(
      fc.constant({}),
      fc.constant({}),
      fc.record({ namespace: text }),
      fc.record({ cacheKey: hex(32) }),
      fc.record({ originReportId: fc.uuid() }),
      fc.record({ status: fc.integer({ min: 100, max: 599 }) }),
      fc.record({ outcome: fc.constantFrom('complete', 'client-abort') }),
      fc.record({ usage: fc.record({ inputTokens: fc.nat(), outputTokens: fc.nat(), estimated: fc.constant(true as const) }, { requiredKeys: ['inputTokens', 'outputTokens'] }) }),
      fc.record({ estimated: fc.boolean() }),
      fc.record({ content: fc.boolean() }),
    );
    const hit = fc.record({ id: fc.uuid(), traceId: hex(16), spanId: hex(8), start: epoch, end: opt(epoch), firstChunk: opt(epoch), change });
    fc.assert(
      fc.property(exchange, fc.array(hit, { minLength: 2, maxLength: 8 }), fc.object(), (first, hits, answer) => {
        // the entry's kept request and answer: the same objects in every hit's report
        const base = { ...first.report, response: { body: first.report.response.body ?? answer } } as StoredReport;
        let content = first.content;
        let shared = { ...first.facts, cacheStatus: 'HIT', trace: { ...first.facts.trace!, upstream: undefined, leader: undefined } } as ProxyFacts;
        let usage = base.usage;
        const exchanges = hits.map((h) => {
          const c = h.change as Record<string, unknown>;
          if ('content' in c) content = c.content as boolean;
          if ('usage' in c) usage = c.usage as StoredReport['usage'];
          if ('estimated' in c) {
            // the same tokens, estimated or not
            const { estimated: _, ...counted } = usage ?? { inputTokens: 3, outputTokens: 5, totalTokens: 8 };
            usage = c.estimated ? { ...counted, estimated: true } : counted;
          }
          if ('namespace' in c) shared = { ...shared, trace: { ...shared.trace!, namespace: c.namespace as string } };
          else if (!('usage' in c) && !('content' in c) && !('estimated' in c)) shared = { ...shared, ...c } as ProxyFacts;
          const facts = { ...shared, id: h.id, trace: { ...shared.trace!, traceId: h.traceId, spanId: h.spanId, start: h.start, end: h.end, firstChunk: h.firstChunk } } as ProxyFacts;
          return { facts, report: { ...base, usage } as StoredReport, content, changed: Object.keys(c).length > 0 };
        });
        const objects: ReadableSpan[] = [];
        const encoded: S[] = [];
        const asObjects = new SpanObjects({ resource, scope }, (s) => objects.push(s));
        const asBytes = writer.make((s) => encoded.push(s));
        const attr = vi.spyOn(asBytes, 'attr');
        let last = 0;
        let written = 0;
        for (const [i, x] of exchanges.entries()) {
          exchangeSpans(x.facts, x.report, asObjects, x.content);
          exchangeSpans(x.facts, x.report, asBytes, x.content);
          // after the first, a hit with nothing changed writes its own attributes only (first chunk, report id),
          // unless the shared ones were too large to keep (captured content: more than 4 KiB)
          const own = x.facts.trace!.firstChunk === undefined ? 1 : 2;
          const span = encoded[encoded.length - 1]!;
          if (i > 0 && !x.changed && writer.size(span) < 4000) expect(attr.mock.calls.length - last).toBe(own);
          written += attr.mock.calls.length - last > own ? 1 : 0;
          last = attr.mock.calls.length;
        }
        expect(written).toBeGreaterThanOrEqual(1);
        expect(writer.ours(encoded).equals(writer.official(objects))).toBe(true);
      }),
      { numRuns: 600 },
    );
  };
  it('hits of one entry: their shared attributes written once, copied after, and written again when an input changes (protobuf)', () => hitsOfOneEntry(protobuf));
  it('… and as JSON text', () => hitsOfOneEntry(json));

  it('JSON text: attributes kept after others were written come back with the comma that parts them', () => {
    const texts: JsonSpan[] = [];
    const out = json.make((s) => texts.push(s));
    const [a, b, c] = [new SpanKey('a'), new SpanKey('b'), new SpanKey('c')];
    const owner = {};
    for (let i = 0; i < 2; i++) {
      out.begin('x', SpanKind.SERVER, '0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', undefined, 1.7e12, 1.7e12 + 1);
      out.attr(a, 1);
      if (!out.repeat(owner, ['in'])) {
        out.attr(b, 'two');
        out.attr(c, true);
        out.keep(owner, ['in']);
      }
      out.attr(a, 2.5);
      out.end(undefined, undefined);
    }
    expect(texts[1]!.text).toBe(texts[0]!.text);
    expect(JSON.parse(texts[1]!.text).attributes).toEqual([
      { key: 'a', value: { intValue: 1 } },
      { key: 'b', value: { stringValue: 'two' } },
      { key: 'c', value: { boolValue: true } },
      { key: 'a', value: { doubleValue: 2.5 } },
    ]);
  });

  it('a batch over several slabs, and one that mixes encoded spans with span objects, comes out whole and in order', () => {
    fc.assert(
      fc.property(fc.array(exchange, { minLength: 150, maxLength: 250 }), fc.nat(), (exchanges, cut) => {
        const { objects, encoded } = both(exchanges);
        // more than one slab (64 KiB) was filled: the runs copied at once end where a slab does
        expect(new Set(encoded.map((s) => s.buf)).size).toBeGreaterThan(1);
        expect(ours(encoded).equals(official(objects))).toBe(true);
        const at = cut % encoded.length;
        const mixed = [...encoded.slice(0, at), objects[at]!, ...encoded.slice(at + 1)];
        expect(ours(mixed).equals(official(objects))).toBe(true);
      }),
      { numRuns: 15, endOnFailure: true },
    );
  });
});
