// The relay's writer of OTLP/JSON trace exports (http/json), the JSON counterpart of otlp-proto.ts: each
// span is written as JSON text as it ends (JsonSpans, a SpanOut of exchange-spans.ts), and an export is
// those texts joined under their resource and scope (encodeTraceJson). It is handed to the official OTLP/HTTP
// export delegate of @opentelemetry/otlp-exporter-base in place of the official JsonTraceSerializer: the
// transport, its retries, timeouts, headers, compression and the OTEL_* settings stay the official ones.
//
// Why: the official serializer needs a span object per span, turns it into a tree of OTLP objects (one per
// attribute, value, link, time) and stringifies that: a hit's span cost 7.2 µs of CPU from writing to the
// collector that way, 3.2 µs this way (`OTLP_PROTOCOL=http/json node bench/span-export.mjs`). Here a span is
// one string, the attributes every hit of one cache entry shares are written once per entry and copied after
// (SpanOut.repeat), and nothing else is built.
//
// Its output is the official serializer's, byte for byte (test/unit/tracing/exchange-spans.test.ts writes
// arbitrary exchanges both ways): the same keys in the same order, undefined ones left out as
// JSON.stringify leaves them out, strings escaped by JSON.stringify itself, times as decimal nanoseconds.
import type { AttributeValue, Attributes, SpanContext, SpanKind } from '@opentelemetry/api';
import type { InstrumentationScope } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import { KEPT_ATTRIBUTES_MAX, LEADER_LINK_ATTRIBUTES, type ParentOfSpan, SAMPLED_CONTEXT, type SpanKey, type SpanOut, sameInputs, spanFlags } from './exchange-spans.js';

/**
 * A span the relay wrote as JSON as it ended (JsonSpans). It goes through the SDK's BatchSpanProcessor in
 * place of a span object: what the processor reads of a span is here (its trace flags, sampled; its
 * resource, for attributes still pending, which the relay's never are), and nothing else is.
 */
export class JsonSpan {
  constructor(
    readonly text: string,
    readonly resource: Resource,
    readonly instrumentationScope: InstrumentationScope,
  ) {}
  spanContext(): SpanContext {
    return SAMPLED_CONTEXT;
  }
}

/** Epoch milliseconds as the official JSON encoder writes a time: decimal nanoseconds, in a string. */
export function nanosText(ms: number): string {
  // (the SDK's millisToHrTime, then its hrTimeToNanos)
  const seconds = Math.trunc(ms / 1000);
  const nanos = Math.round((ms % 1000) * 1e6);
  if (seconds > 0 && nanos >= 0 && nanos < 1e9) return `${seconds}${String(nanos + 1e9).slice(1)}`;
  return (BigInt(seconds) * 1_000_000_000n + BigInt(nanos)).toString();
}

/** An AttributeValue as the official JSON encoder writes it (its toAnyValue, then JSON.stringify). */
function anyValue(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return `{"stringValue":${JSON.stringify(v)}}`;
    case 'number':
      return Number.isInteger(v) ? `{"intValue":${JSON.stringify(v)}}` : `{"doubleValue":${JSON.stringify(v)}}`;
    case 'boolean':
      return v ? '{"boolValue":true}' : '{"boolValue":false}';
  }
  if (v instanceof Uint8Array) return `{"bytesValue":${JSON.stringify(Buffer.from(v).toString('base64'))}}`;
  if (Array.isArray(v)) {
    // (a loop, not map: a hole is a value here, written as an empty one)
    let values = '';
    for (let i = 0; i < v.length; i++) values += (i > 0 ? ',' : '') + anyValue(v[i]);
    return `{"arrayValue":{"values":[${values}]}}`;
  }
  if (typeof v === 'object' && v !== null) return `{"kvlistValue":{"values":[${keyValues(v as Record<string, unknown>)}]}}`;
  return '{}';
}

function keyValues(attributes: Record<string, unknown>): string {
  let text = '';
  for (const key of Object.keys(attributes)) text += `${text === '' ? '' : ','}{"key":${JSON.stringify(key)},"value":${anyValue(attributes[key])}}`;
  return text;
}

function resourceText(resource: Resource): string {
  const schemaUrl = resource.schemaUrl;
  return `{"attributes":[${keyValues(resource.attributes)}],"droppedAttributesCount":0${schemaUrl ? `,"schemaUrl":${JSON.stringify(schemaUrl)}` : ''}}`;
}

function scopeText(scope: InstrumentationScope & { attributes?: Attributes; droppedAttributesCount?: number }): string {
  let text = `{"name":${JSON.stringify(scope.name)}`;
  if (scope.version !== undefined) text += `,"version":${JSON.stringify(scope.version)}`;
  if (scope.attributes && Object.keys(scope.attributes).length > 0) text += `,"attributes":[${keyValues(scope.attributes)}],"droppedAttributesCount":${scope.droppedAttributesCount ?? 0}`;
  return `${text}}`;
}

const SAMPLED = 1;
const LEADER_FLAGS = spanFlags(SAMPLED, undefined);
const LEADER_LINK = `[{"attributes":[${keyValues(LEADER_LINK_ATTRIBUTES)}],"spanId":`;

/**
 * The SpanOut (exchange-spans.ts) that writes each span as OTLP/JSON text as it ends and hands it on as a
 * JsonSpan: the text the official JSON serializer writes for the same span as an object. The attributes of a
 * hit that are the same for every hit of its cache entry are written once and copied after (repeat, keep).
 */
export class JsonSpans implements SpanOut {
  /** the span being written */
  private text = '';
  /** attributes written in it so far */
  private count = 0;
  private flags = 0;
  /** the attributes written for an owner (a kept answer), their number, and the inputs they came from */
  private readonly kept = new WeakMap<object, { inputs: readonly unknown[]; text: string; count: number }>();
  /** where the attributes to keep began (repeat answered false), and how many came before them */
  private keepFrom = 0;
  private keepAfter = 0;

  constructor(
    private readonly resource: Resource,
    private readonly scope: InstrumentationScope,
    private readonly emit: (span: JsonSpan) => void,
  ) {}

  begin(name: string, kind: SpanKind, traceId: string, spanId: string, parent: ParentOfSpan | undefined, start: number, end: number): void {
    this.text =
      `{"traceId":${JSON.stringify(traceId)},"spanId":${JSON.stringify(spanId)}` +
      (parent?.spanId ? `,"parentSpanId":${JSON.stringify(parent.spanId)}` : '') +
      `,"name":${JSON.stringify(name)},"kind":${kind + 1},"startTimeUnixNano":"${nanosText(start)}","endTimeUnixNano":"${nanosText(Math.max(start, end))}","attributes":[`;
    this.count = 0;
    this.flags = spanFlags(SAMPLED, parent?.isRemote);
  }

  repeat(owner: object, inputs: readonly unknown[]): boolean {
    const kept = this.kept.get(owner);
    if (kept !== undefined && sameInputs(kept.inputs, inputs)) {
      if (kept.count > 0) {
        this.text += (this.count > 0 ? ',' : '') + kept.text;
        this.count += kept.count;
      }
      return true;
    }
    this.keepFrom = this.text.length;
    this.keepAfter = this.count;
    return false;
  }

  keep(owner: object, inputs: readonly unknown[]): void {
    let text = this.text.slice(this.keepFrom);
    // (kept without the comma that parted them from attributes written before)
    if (this.keepAfter > 0 && this.count > this.keepAfter) text = text.slice(1);
    // (a copy of the inputs: the caller refills its array for the next span)
    if (text.length <= KEPT_ATTRIBUTES_MAX) this.kept.set(owner, { inputs: inputs.slice(), text, count: this.count - this.keepAfter });
  }

  attr(key: SpanKey, value: AttributeValue): void {
    this.text += `${this.count++ > 0 ? ',' : ''}${(key.json ??= `{"key":${JSON.stringify(key.name)},"value":`)}${anyValue(value)}}`;
  }

  end(error: string | undefined, leader: { traceId: string; spanId: string } | undefined): void {
    const status = error ? `{"code":2,"message":${JSON.stringify(error)}}` : '{"code":0}';
    const links = leader ? `${LEADER_LINK}${JSON.stringify(leader.spanId)},"traceId":${JSON.stringify(leader.traceId)},"droppedAttributesCount":0,"flags":${LEADER_FLAGS}}]` : '[]';
    this.emit(
      new JsonSpan(
        `${this.text}],"droppedAttributesCount":0,"events":[],"droppedEventsCount":0,"status":${status},"links":${links},"droppedLinksCount":0,"flags":${this.flags}}`,
        this.resource,
        this.scope,
      ),
    );
    this.text = '';
  }
}

/** the resource's and the scope's text, written once each */
const resourceTexts = new WeakMap<Resource, string>();
const scopeTexts = new WeakMap<InstrumentationScope, string>();

/** the size of the last request: where the next one's buffer starts (at most 4 MiB, as otlp-proto.ts's) */
let lastSize = 64 * 1024;
const MAX_START = 4 * 1024 * 1024;

/**
 * The request's UTF-8 bytes, written piece by piece into one growing buffer: the spans' texts are never
 * joined into one string (a string of a thousand pieces costs more to flatten and encode than its parts).
 */
class Utf8Out {
  buf: Buffer;
  pos = 0;
  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }
  write(text: string): void {
    // at most 3 bytes a UTF-16 unit (a surrogate pair: 4 bytes for 2 units)
    if (this.pos + text.length * 3 > this.buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + text.length * 3));
      this.buf.copy(grown, 0, 0, this.pos);
      this.buf = grown;
    }
    this.pos += this.buf.write(text, this.pos, 'utf8');
  }
}

/**
 * An ExportTraceServiceRequest of these spans as OTLP/JSON, grouped as the official serializer groups them:
 * by resource, then by instrumentation scope (its name, version and schema URL).
 */
export function encodeTraceJson(spans: readonly JsonSpan[]): Uint8Array {
  const resources = new Map<Resource, Map<string, JsonSpan[]>>();
  for (const s of spans) {
    let scopes = resources.get(s.resource);
    if (!scopes) resources.set(s.resource, (scopes = new Map()));
    const scope = s.instrumentationScope;
    const key = `${scope.name}@${scope.version || ''}:${scope.schemaUrl || ''}`;
    const of = scopes.get(key);
    if (of) of.push(s);
    else scopes.set(key, [s]);
  }
  const out = new Utf8Out(lastSize);
  out.write('{"resourceSpans":[');
  let firstResource = true;
  for (const [resource, scopes] of resources) {
    let r = resourceTexts.get(resource);
    if (r === undefined) resourceTexts.set(resource, (r = resourceText(resource)));
    out.write(`${firstResource ? '' : ','}{"resource":${r},"scopeSpans":[`);
    firstResource = false;
    let firstScope = true;
    for (const of of scopes.values()) {
      const scope = of[0]!.instrumentationScope;
      let s = scopeTexts.get(scope);
      if (s === undefined) scopeTexts.set(scope, (s = scopeText(scope)));
      out.write(`${firstScope ? '' : ','}{"scope":${s},"spans":[`);
      firstScope = false;
      for (let i = 0; i < of.length; i++) {
        if (i > 0) out.write(',');
        out.write(of[i]!.text);
      }
      out.write(scope.schemaUrl !== undefined ? `],"schemaUrl":${JSON.stringify(scope.schemaUrl)}}` : ']}');
    }
    out.write(resource.schemaUrl ? `],"schemaUrl":${JSON.stringify(resource.schemaUrl)}}` : ']}');
  }
  out.write(']}');
  lastSize = Math.min(MAX_START, Math.max(1024, Math.ceil(out.pos * 1.25)));
  return out.buf.subarray(0, out.pos);
}
