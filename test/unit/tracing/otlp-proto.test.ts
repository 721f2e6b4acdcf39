// The relay's OTLP/protobuf encoder writes what the official serializer of @opentelemetry/otlp-transformer
// writes, byte for byte: on arbitrary batches of spans (several resources and scopes, parents local and
// remote, trace states, events, links, every kind of attribute value: ASCII and not, lone surrogates,
// strings long and short, integers up to int64's ends, doubles, NaN, arrays, bytes, nested lists, nulls),
// and on the spans the relay itself builds for an exchange.
import type { Attributes, HrTime, Link, SpanContext, TraceState } from '@opentelemetry/api';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace-base';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeTraceExport } from '../../../src/tracing/otlp-proto.js';

const hex = (bytes: number) => fc.uint8Array({ minLength: bytes, maxLength: bytes }).map((b) => Buffer.from(b).toString('hex'));
const upperOrLower = (bytes: number) => fc.tuple(hex(bytes), fc.boolean()).map(([h, up]) => (up ? h.toUpperCase() : h));

const text = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 30 }), // lone surrogates included
  fc.string({ unit: 'grapheme', maxLength: 80 }),
  fc.string({ minLength: 40, maxLength: 300 }),
  fc.constantFrom('', 'chat gpt-4o-mini', 'x'.repeat(47), 'x'.repeat(48), 'x'.repeat(127), 'x'.repeat(128), 'é'.repeat(64), 'a'.repeat(200)),
);
const number = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -1, 2 ** 31, 2 ** 32, 2 ** 32 - 1, -(2 ** 32), 2 ** 53, -(2 ** 53), 2 ** 62, 2 ** 63, -(2 ** 63), 2 ** 64, NaN, Infinity, -0),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(Number),
);
const scalar = fc.oneof(text, number, fc.boolean());
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar,
    fc.array(fc.oneof(scalar, fc.constant(null), fc.constant(undefined)), { maxLength: 5 }),
    fc.uint8Array({ maxLength: 20 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 3 }),
    fc.constant(null),
  ),
})).value;
const attributes = fc.dictionary(text, value, { maxKeys: 12 }) as fc.Arbitrary<Attributes>;
const hrTime: fc.Arbitrary<HrTime> = fc.tuple(fc.integer({ min: 0, max: 4_000_000_000 }), fc.integer({ min: 0, max: 999_999_999 }));
const traceState = fc.option(
  fc.string({ minLength: 1, maxLength: 30 }).map((s): TraceState => ({ serialize: () => s, set: () => { throw new Error('unused'); }, unset: () => { throw new Error('unused'); }, get: () => undefined })),
  { nil: undefined },
);
const context = fc.record({
  traceId: upperOrLower(16),
  spanId: upperOrLower(8),
  traceFlags: fc.integer({ min: 0, max: 255 }),
  isRemote: fc.option(fc.boolean(), { nil: undefined }),
  traceState,
}) as fc.Arbitrary<SpanContext>;
const event: fc.Arbitrary<TimedEvent> = fc.record({ name: text, time: hrTime, attributes: fc.option(attributes, { nil: undefined }), droppedAttributesCount: fc.option(fc.nat(1000), { nil: undefined }) });
const link: fc.Arbitrary<Link> = fc.record({ context, attributes: fc.option(attributes, { nil: undefined }), droppedAttributesCount: fc.option(fc.nat(1000), { nil: undefined }) });

const resources = [
  resourceFromAttributes({ 'service.name': 'llm-relay', 'host.name': 'relay-1', 'deployment.environment.name': 'ünïcode' }),
  resourceFromAttributes({ 'service.name': 'other', 'some.number': 12, 'some.list': ['a', 'b'] }),
  resourceFromAttributes({}),
];
const scopes = [
  { name: 'llm-relay', version: '1.2.3', schemaUrl: 'https://opentelemetry.io/schemas/1.41.0' },
  { name: 'other-scope' },
  { name: 'with-attributes', version: '', attributes: { 'a.b': 'c', n: 1 }, droppedAttributesCount: 2 },
];

const span: fc.Arbitrary<ReadableSpan> = fc
  .record({
    name: text,
    kind: fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined }),
    context,
    parent: fc.option(context, { nil: undefined }),
    startTime: hrTime,
    endTime: hrTime,
    attributes,
    status: fc.record({ code: fc.integer({ min: 0, max: 2 }), message: fc.option(text, { nil: undefined }) }),
    events: fc.array(event, { maxLength: 2 }),
    links: fc.array(link, { maxLength: 2 }),
    dropped: fc.tuple(fc.nat(300), fc.nat(300), fc.nat(300)),
    resource: fc.nat(resources.length - 1),
    scope: fc.nat(scopes.length - 1),
  })
  .map(
    (s) =>
      ({
        name: s.name,
        kind: s.kind,
        spanContext: () => s.context,
        parentSpanContext: s.parent,
        startTime: s.startTime,
        endTime: s.endTime,
        duration: [0, 0],
        attributes: s.attributes,
        status: s.status,
        events: s.events,
        links: s.links,
        ended: true,
        droppedAttributesCount: s.dropped[0],
        droppedEventsCount: s.dropped[1],
        droppedLinksCount: s.dropped[2],
        resource: resources[s.resource],
        instrumentationScope: scopes[s.scope],
      }) as unknown as ReadableSpan,
  );

const official = (spans: ReadableSpan[]) => Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
const ours = (spans: ReadableSpan[]) => Buffer.from(encodeTraceExport(spans));

describe('the relay encoder of OTLP trace exports', () => {
  it('writes the official serializer’s bytes for arbitrary batches of spans', () => {
    fc.assert(
      fc.property(fc.array(span, { maxLength: 6 }), (spans) => {
        expect(ours(spans).equals(official(spans))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('writes the official bytes for a batch larger than its first buffer, spans past 128 and 16 KiB', () => {
    fc.assert(
      fc.property(fc.array(span, { minLength: 200, maxLength: 400 }), fc.string({ minLength: 17_000, maxLength: 20_000 }), (spans, long) => {
        const first = spans[0]!;
        spans[0] = { ...first, spanContext: first.spanContext, attributes: { ...first.attributes, long } } as ReadableSpan;
        expect(ours(spans).equals(official(spans))).toBe(true);
      }),
      { numRuns: 10, endOnFailure: true },
    );
  });

  it('keeps to the official encoding of times and integers at their edges', () => {
    const base = { name: 'n', kind: 1, spanContext: () => ({ traceId: 'ab'.repeat(16), spanId: 'cd'.repeat(8), traceFlags: 1 }), duration: [0, 0], status: { code: 0 }, events: [], links: [], ended: true, droppedAttributesCount: 0, droppedEventsCount: 0, droppedLinksCount: 0, resource: resources[0], instrumentationScope: scopes[0] };
    const times: HrTime[] = [[0, 0], [1, 1], [65_535, 999_999_999], [65_536, 0], [1_764_110_000, 123_456_789], [4_294_967_295, 999_999_999], [18_446_744_073, 709_551_615]];
    const numbers = [0, 1, 127, 128, 16_383, 16_384, 2 ** 32 - 1, 2 ** 32, 2 ** 53 + 2, 2 ** 63 - 1024, -1, -128, -(2 ** 32), -(2 ** 32) - 1, -(2 ** 63), 0.5, -0.5, 1e300];
    const spans = times.map((t, i) => ({ ...base, startTime: t, endTime: t, attributes: { n: numbers[i], m: numbers[numbers.length - 1 - i] } }) as unknown as ReadableSpan);
    for (const n of numbers) spans.push({ ...base, startTime: [1, 0], endTime: [2, 0], attributes: { n } } as unknown as ReadableSpan);
    expect(ours(spans).equals(official(spans))).toBe(true);
  });
});
