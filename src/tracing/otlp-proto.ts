// The relay's encoder of OTLP trace exports (ExportTraceServiceRequest, protobuf), handed to the official
// OTLP/HTTP export delegate of @opentelemetry/otlp-exporter-base in place of the official serializer: the
// transport, its retries, timeouts, headers, compression and the OTEL_* settings stay the official ones.
//
// Why an encoder of our own: the official one (@opentelemetry/otlp-transformer 0.223) walks every string
// three times — once to estimate the request's size, once to check it is ASCII, once to copy it — and that
// made up most of what tracing cost a cache hit (~5.5 µs for a hit's span, against ~2.2 µs here:
// `node bench/otlp-encode.mjs`; figures in bench/results.md). This one writes in a single pass into one
// growing buffer: an ASCII string is copied as it is checked, anything else goes through Buffer's native
// UTF-8 writer, and a message's length is written in a byte reserved before it (moved along in the rare
// case it needs more than one byte).
//
// The relay's own spans do not even become objects: ProtoSpans writes each as it ends, attribute by
// attribute from exchange-spans.ts, into a shared slab, and the export copies those bytes (EncodedSpan).
//
// Its output is the official serializer's, byte for byte (test/unit/tracing/otlp-proto.test.ts checks that
// on arbitrary spans, exchange-spans.test.ts on the relay's spans written both ways): same fields, same
// order, same choices of int or double, same flags.
import type { Attributes, AttributeValue, HrTime, Link, SpanContext, SpanKind, SpanStatus } from '@opentelemetry/api';
import type { InstrumentationScope } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace-base';
import { KEPT_ATTRIBUTES_MAX, LEADER_LINK_ATTRIBUTES, type ParentOfSpan, SAMPLED_CONTEXT, type SpanKey, type SpanOut, sameInputs, spanFlags } from './exchange-spans.js';

// wire types
const VARINT = 0;
const FIXED64 = 1;
const LENGTH = 2;
const FIXED32 = 5;
const tag = (field: number, wire: number): number => (field << 3) | wire;

const TWO_32 = 0x1_0000_0000;
const TWO_16 = 0x1_0000;
const INT64_MIN = -(2 ** 63);
const INT64_LIMIT = 2 ** 63;
/**
 * Strings this long or longer go to Buffer's native UTF-8 writer; shorter ones are copied in a loop, which
 * beats the native call's own cost up to here (a 64-character cache key: −7% for a hit's span). No longer:
 * the loop writes the length as one byte.
 */
const NATIVE_FROM = 128;

function varintSize(v: number): number {
  let size = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    size++;
  }
  return size;
}

class Writer {
  buf: Buffer;
  pos = 0;

  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }

  room(n: number): void {
    if (this.pos + n > this.buf.length) this.grow(n);
  }

  private grow(n: number): void {
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.pos++] = b;
  }

  /** A non-negative or negative integer as a varint (negative ones as 64-bit two's complement: 10 bytes). */
  varint(value: number): void {
    this.room(10);
    const buf = this.buf;
    if (value >= 0 && value < TWO_32) {
      let v = value >>> 0;
      while (v > 0x7f) {
        buf[this.pos++] = (v & 0x7f) | 0x80;
        v >>>= 7;
      }
      buf[this.pos++] = v;
      return;
    }
    let low: number;
    let high: number;
    if (value >= 0) {
      low = value >>> 0;
      high = Math.floor(value / TWO_32) >>> 0;
    } else {
      // two's complement of |value| over 64 bits: invert, add one
      const abs = -value;
      low = ~(abs >>> 0) >>> 0;
      high = ~(Math.floor(abs / TWO_32) >>> 0) >>> 0;
      low = (low + 1) >>> 0;
      if (low === 0) high = (high + 1) >>> 0;
    }
    while (high !== 0 || low > 0x7f) {
      buf[this.pos++] = (low & 0x7f) | 0x80;
      low = ((low >>> 7) | (high << 25)) >>> 0;
      high >>>= 7;
    }
    buf[this.pos++] = low;
  }

  fixed32(v: number): void {
    this.room(4);
    this.buf.writeUInt32LE(v >>> 0, this.pos);
    this.pos += 4;
  }

  /** An HrTime ([seconds, nanoseconds]) as nanoseconds since the epoch, fixed64. */
  time(t: HrTime): void {
    this.nanos(t[0], t[1]);
  }

  /** seconds and nanoseconds since the epoch as nanoseconds, fixed64 */
  nanos(seconds: number, nanoseconds: number): void {
    // seconds × 1e9 passes 2^53: split the seconds at 16 bits so that each product stays exact
    const secondsHigh = Math.floor(seconds / TWO_16);
    const secondsLow = seconds - secondsHigh * TWO_16;
    const highNanos = secondsHigh * 1e9; // to be shifted up by 16 bits
    const highNanosLow16 = highNanos % TWO_16;
    const carried = highNanosLow16 * TWO_16 + secondsLow * 1e9 + nanoseconds;
    const low = carried % TWO_32;
    const high = (highNanos - highNanosLow16) / TWO_16 + Math.floor(carried / TWO_32);
    this.room(8);
    this.buf.writeUInt32LE(low >>> 0, this.pos);
    this.buf.writeUInt32LE(high >>> 0, this.pos + 4);
    this.pos += 8;
  }

  /** Epoch milliseconds as the SDK's millisToHrTime makes them an HrTime, then as nanoseconds (fixed64). */
  millis(ms: number): void {
    this.nanos(Math.trunc(ms / 1000), Math.round((ms % 1000) * 1e6));
  }

  double(v: number): void {
    this.room(8);
    this.buf.writeDoubleLE(v, this.pos);
    this.pos += 8;
  }

  /** A string, length-delimited, as UTF-8 (lone surrogates as U+FFFD, as TextEncoder writes them). */
  string(s: string): void {
    const n = s.length;
    if (n < NATIVE_FROM) {
      // ASCII is copied as it is checked; the first other character sends the whole string the native way
      this.room(n + 1);
      const buf = this.buf;
      const start = this.pos;
      let p = start + 1;
      for (let i = 0; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c > 0x7f) return this.utf8(s);
        buf[p++] = c;
      }
      buf[start] = n;
      this.pos = p;
      return;
    }
    this.utf8(s);
  }

  private utf8(s: string): void {
    const len = Buffer.byteLength(s, 'utf8');
    this.varint(len);
    this.room(len);
    this.pos += this.buf.write(s, this.pos, len, 'utf8');
  }

  /** A few bytes already encoded (a key): TypedArray's set, a builtin, not a call into C++. */
  raw(b: Uint8Array): void {
    const n = b.length;
    this.room(n);
    this.buf.set(b, this.pos);
    this.pos += n;
  }

  /** Bytes already encoded, as they are. */
  copy(from: Buffer, start: number, end: number): void {
    this.room(end - start);
    this.pos += from.copy(this.buf, this.pos, start, end);
  }

  bytes(b: Uint8Array): void {
    this.varint(b.length);
    this.room(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  /** A hex id (trace or span id) as its bytes, length-delimited. */
  hex(id: string): void {
    const n = id.length >> 1;
    this.varint(n);
    this.room(n);
    const buf = this.buf;
    for (let i = 0; i < n; i++) buf[this.pos++] = (nibble(id.charCodeAt(2 * i)) << 4) | nibble(id.charCodeAt(2 * i + 1));
  }

  /** Reserves a length byte for the message that follows; `close` fills it in. */
  open(): number {
    this.room(1);
    return this.pos++;
  }

  close(at: number): void {
    const len = this.pos - at - 1;
    if (len < 0x80) {
      this.buf[at] = len;
      return;
    }
    const size = varintSize(len);
    this.room(size - 1);
    this.buf.copyWithin(at + size, at + 1, this.pos);
    this.pos += size - 1;
    const end = this.pos;
    this.pos = at;
    this.varint(len);
    this.pos = end;
  }
}

function nibble(c: number): number {
  if (c <= 0x39) return c - 0x30; // 0-9
  if (c >= 0x61) return c - 0x57; // a-f
  return c - 0x37; // A-F
}

function anyValue(w: Writer, value: AttributeValue | Uint8Array | Record<string, unknown> | null | undefined): void {
  switch (typeof value) {
    case 'string':
      w.byte(tag(1, LENGTH));
      w.string(value);
      return;
    case 'boolean':
      w.byte(tag(2, VARINT));
      w.byte(value ? 1 : 0);
      return;
    case 'number':
      if (Number.isInteger(value) && value >= INT64_MIN && value < INT64_LIMIT) {
        w.byte(tag(3, VARINT));
        w.varint(value);
      } else {
        w.byte(tag(4, FIXED64));
        w.double(value);
      }
      return;
  }
  if (value instanceof Uint8Array) {
    w.byte(tag(7, LENGTH));
    w.bytes(value);
  } else if (Array.isArray(value)) {
    w.byte(tag(5, LENGTH));
    const array = w.open();
    for (const item of value) {
      w.byte(tag(1, LENGTH));
      const at = w.open();
      anyValue(w, item);
      w.close(at);
    }
    w.close(array);
  } else if (value !== null && typeof value === 'object') {
    // a key-value list (what a log body may hold; attributes of a span do not, but the type allows it)
    w.byte(tag(6, LENGTH));
    const list = w.open();
    keyValues(w, value as Attributes, 1);
    w.close(list);
  }
  // anything else (null, undefined, a function): an empty value, as the official serializer writes it
}

function keyValues(w: Writer, attributes: Attributes, field: number): void {
  const t = tag(field, LENGTH);
  // own enumerable keys, in for…in's order (what the official serializer walks)
  for (const key of Object.keys(attributes)) {
    w.byte(t);
    const kv = w.open();
    w.byte(tag(1, LENGTH));
    w.string(key);
    w.byte(tag(2, LENGTH));
    const value = w.open();
    anyValue(w, attributes[key]);
    w.close(value);
    w.close(kv);
  }
}

function status(w: Writer, s: SpanStatus): void {
  w.byte(tag(15, LENGTH));
  const at = w.open();
  if (s.message) {
    w.byte(tag(2, LENGTH));
    w.string(s.message);
  }
  w.byte(tag(3, VARINT));
  w.varint(s.code);
  w.close(at);
}

function event(w: Writer, e: TimedEvent): void {
  w.byte(tag(11, LENGTH));
  const at = w.open();
  w.byte(tag(1, FIXED64));
  w.time(e.time);
  w.byte(tag(2, LENGTH));
  w.string(e.name);
  if (e.attributes) keyValues(w, e.attributes, 3);
  w.byte(tag(4, VARINT));
  w.varint(e.droppedAttributesCount || 0);
  w.close(at);
}

/** trace_id, span_id and trace_state: fields 1–3 of a Span and of a Link alike */
function contextIds(w: Writer, c: SpanContext): void {
  ids(w, c.traceId, c.spanId, c.traceState?.serialize());
}

function ids(w: Writer, traceId: string, spanId: string, state: string | undefined): void {
  w.byte(tag(1, LENGTH));
  w.hex(traceId);
  w.byte(tag(2, LENGTH));
  w.hex(spanId);
  if (state) {
    w.byte(tag(3, LENGTH));
    w.string(state);
  }
}

function link(w: Writer, l: Link): void {
  w.byte(tag(13, LENGTH));
  const at = w.open();
  const c = l.context;
  contextIds(w, c);
  if (l.attributes) keyValues(w, l.attributes, 4);
  w.byte(tag(5, VARINT));
  w.varint(l.droppedAttributesCount || 0);
  w.byte(tag(6, FIXED32));
  w.fixed32(spanFlags(c.traceFlags, c.isRemote));
  w.close(at);
}

// span's field 16 (flags, fixed32): a tag of two bytes
const FLAGS_TAG = tag(16, FIXED32);

/**
 * A span's first fields, up to its kind (span objects and ProtoSpans alike): ScopeSpans' field 2 is opened,
 * and the position of its length byte returned, for `close` once the span is written.
 */
function spanHead(w: Writer, traceId: string, spanId: string, state: string | undefined, parentSpanId: string | undefined, name: string, kind: SpanKind | undefined): number {
  w.byte(tag(2, LENGTH)); // ScopeSpans.spans
  const at = w.open();
  ids(w, traceId, spanId, state);
  if (parentSpanId) {
    w.byte(tag(4, LENGTH));
    w.hex(parentSpanId);
  }
  w.byte(tag(5, LENGTH));
  w.string(name);
  // OTLP's kinds count from 1 (0 is "unspecified"); the API's from 0
  const otlpKind = kind == null ? 0 : kind + 1;
  if (otlpKind !== 0) {
    w.byte(tag(6, VARINT));
    w.varint(otlpKind);
  }
  return at;
}

function span(w: Writer, s: ReadableSpan): void {
  const c: SpanContext = s.spanContext();
  const parent = s.parentSpanContext;
  const at = spanHead(w, c.traceId, c.spanId, c.traceState?.serialize(), parent?.spanId, s.name, s.kind);
  w.byte(tag(7, FIXED64));
  w.time(s.startTime);
  w.byte(tag(8, FIXED64));
  w.time(s.endTime);
  if (s.attributes) keyValues(w, s.attributes, 9);
  w.byte(tag(10, VARINT));
  w.varint(s.droppedAttributesCount);
  for (const e of s.events) event(w, e);
  w.byte(tag(12, VARINT));
  w.varint(s.droppedEventsCount);
  for (const l of s.links) link(w, l);
  w.byte(tag(14, VARINT));
  w.varint(s.droppedLinksCount);
  status(w, s.status);
  w.varint(FLAGS_TAG);
  w.fixed32(spanFlags(c.traceFlags, parent?.isRemote));
  w.close(at);
}

function scopeSpans(w: Writer, scope: InstrumentationScope & { attributes?: Attributes; droppedAttributesCount?: number }, spans: (ReadableSpan | EncodedSpan)[]): void {
  w.byte(tag(2, LENGTH)); // ResourceSpans.scope_spans
  const at = w.open();
  w.byte(tag(1, LENGTH));
  const s = w.open();
  w.byte(tag(1, LENGTH));
  w.string(scope.name);
  if (scope.version) {
    w.byte(tag(2, LENGTH));
    w.string(scope.version);
  }
  if (scope.attributes) keyValues(w, scope.attributes, 3);
  if (scope.droppedAttributesCount) {
    w.byte(tag(4, VARINT));
    w.varint(scope.droppedAttributesCount);
  }
  w.close(s);
  for (let i = 0; i < spans.length; i++) {
    const one = spans[i]!;
    if (!(one instanceof EncodedSpan)) {
      span(w, one);
      continue;
    }
    // spans the relay encoded as they ended lie one after the other in their buffer: copied a run at a time
    let j = i;
    while (j + 1 < spans.length && isNextOf(spans[j + 1]!, spans[j] as EncodedSpan)) j++;
    const last = spans[j] as EncodedSpan;
    w.copy(one.buf, one.from, last.to);
    i = j;
  }
  if (scope.schemaUrl) {
    w.byte(tag(3, LENGTH));
    w.string(scope.schemaUrl);
  }
  w.close(at);
}

function resourceSpans(w: Writer, resource: Resource, scopes: Map<InstrumentationScope, (ReadableSpan | EncodedSpan)[]>): void {
  w.byte(tag(1, LENGTH)); // ExportTraceServiceRequest.resource_spans
  const at = w.open();
  w.byte(tag(1, LENGTH));
  const r = w.open();
  if (resource.attributes) keyValues(w, resource.attributes, 1);
  w.byte(tag(2, VARINT)); // dropped_attributes_count: the SDK keeps none
  w.byte(0);
  w.close(r);
  for (const [scope, spans] of scopes) scopeSpans(w, scope, spans);
  if (resource.schemaUrl) {
    w.byte(tag(3, LENGTH));
    w.string(resource.schemaUrl);
  }
  w.close(at);
}

const isNextOf = (next: ReadableSpan | EncodedSpan, prev: EncodedSpan): boolean => next instanceof EncodedSpan && next.buf === prev.buf && next.from === prev.to;

/** how much of a slab (the buffer spans are encoded into as they end) is filled before the next is taken */
const SLAB = 64 * 1024;
const SLAB_FULL = SLAB - 4 * 1024;

/**
 * A span the relay encoded as it ended (ProtoSpans): its bytes, ScopeSpans' field 2 and all, in a slab
 * shared with the spans encoded before and after it. It goes through the SDK's BatchSpanProcessor in place
 * of a span object, and encodeTraceExport copies its bytes: what the processor reads of a span is there
 * (its trace flags, sampled; its resource, for attributes still pending, which the relay's never are), and
 * nothing else is.
 */
export class EncodedSpan {
  constructor(
    readonly buf: Buffer,
    readonly from: number,
    readonly to: number,
    readonly resource: Resource,
    readonly instrumentationScope: InstrumentationScope,
  ) {}
  spanContext(): SpanContext {
    return SAMPLED_CONTEXT;
  }
}

/** A KeyValue's field 1 (the key) and the tag of its field 2 (the value that follows). */
function keyBytes(key: string): Uint8Array {
  const k = new Writer(key.length * 3 + 8);
  k.byte(tag(1, LENGTH));
  k.string(key);
  k.byte(tag(2, LENGTH));
  return k.buf.subarray(0, k.pos);
}

const ERROR_CODE = 2; // SpanStatusCode.ERROR
const UNSET: SpanStatus = { code: 0 };

/**
 * The SpanOut (exchange-spans.ts) that writes each span as OTLP/protobuf as it ends, into a slab, and hands
 * it on as an EncodedSpan: the bytes span() writes for the same span as an object (checked by
 * test/unit/tracing/exchange-spans.test.ts), with no span object, attribute map or time pair on the way.
 * The attributes of a hit that are the same for every hit of its cache entry are written once and copied
 * after (repeat, keep).
 */
export class ProtoSpans implements SpanOut {
  private w = new Writer(SLAB);
  /** the attributes written for an owner, and the inputs they came from (the owner is a kept answer) */
  private readonly kept = new WeakMap<object, { inputs: readonly unknown[]; bytes: Uint8Array }>();
  /** where the attributes to keep began (repeat answered false) */
  private keepFrom = 0;
  private from = 0;
  private at = 0;
  private flags = 0;

  constructor(
    private readonly resource: Resource,
    private readonly scope: InstrumentationScope,
    private readonly emit: (span: EncodedSpan) => void,
  ) {}

  begin(name: string, kind: SpanKind, traceId: string, spanId: string, parent: ParentOfSpan | undefined, start: number, end: number): void {
    if (this.w.pos >= SLAB_FULL) this.w = new Writer(SLAB);
    const w = this.w;
    this.from = w.pos;
    this.at = spanHead(w, traceId, spanId, undefined, parent?.spanId, name, kind);
    w.byte(tag(7, FIXED64));
    w.millis(start);
    w.byte(tag(8, FIXED64));
    w.millis(Math.max(start, end));
    this.flags = spanFlags(1, parent?.isRemote);
  }

  repeat(owner: object, inputs: readonly unknown[]): boolean {
    const kept = this.kept.get(owner);
    if (kept !== undefined && sameInputs(kept.inputs, inputs)) {
      this.w.raw(kept.bytes);
      return true;
    }
    this.keepFrom = this.w.pos;
    return false;
  }

  keep(owner: object, inputs: readonly unknown[]): void {
    const { buf, pos } = this.w;
    // (a copy of the inputs: the caller refills its array for the next span)
    if (pos - this.keepFrom <= KEPT_ATTRIBUTES_MAX) this.kept.set(owner, { inputs: inputs.slice(), bytes: new Uint8Array(buf.subarray(this.keepFrom, pos)) });
  }

  attr(key: SpanKey, value: AttributeValue): void {
    const w = this.w;
    w.byte(tag(9, LENGTH));
    const kv = w.open();
    w.raw((key.bytes ??= keyBytes(key.name)));
    const at = w.open();
    anyValue(w, value);
    w.close(at);
    w.close(kv);
  }

  end(error: string | undefined, leader: { traceId: string; spanId: string } | undefined): void {
    const w = this.w;
    w.byte(tag(10, VARINT)); // dropped attributes, events (none), links
    w.byte(0);
    w.byte(tag(12, VARINT));
    w.byte(0);
    if (leader) link(w, { context: { traceId: leader.traceId, spanId: leader.spanId, traceFlags: 1 }, attributes: LEADER_LINK_ATTRIBUTES });
    w.byte(tag(14, VARINT));
    w.byte(0);
    status(w, error ? { code: ERROR_CODE, message: error } : UNSET);
    w.varint(FLAGS_TAG);
    w.fixed32(this.flags);
    w.close(this.at);
    this.emit(new EncodedSpan(w.buf, this.from, w.pos, this.resource, this.scope));
  }
}

/** the size of the last request: where the next one's buffer starts (at most 4 MiB: one batch of spans with
 * captured content must not make every later request hold as much) */
let lastSize = 64 * 1024;
const MAX_START = 4 * 1024 * 1024;

/** An ExportTraceServiceRequest of these spans, grouped by resource, then by instrumentation scope. */
export function encodeTraceExport(spans: (ReadableSpan | EncodedSpan)[]): Uint8Array {
  const resources = new Map<Resource, Map<InstrumentationScope, (ReadableSpan | EncodedSpan)[]>>();
  for (const s of spans) {
    let scopes = resources.get(s.resource);
    if (!scopes) resources.set(s.resource, (scopes = new Map()));
    const of = scopes.get(s.instrumentationScope);
    if (of) of.push(s);
    else scopes.set(s.instrumentationScope, [s]);
  }
  const w = new Writer(lastSize);
  for (const [resource, scopes] of resources) resourceSpans(w, resource, scopes);
  lastSize = Math.min(MAX_START, Math.max(1024, Math.ceil(w.pos * 1.25)));
  return w.buf.subarray(0, w.pos);
}
