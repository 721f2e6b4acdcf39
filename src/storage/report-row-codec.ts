// How the SQLite store keeps a report's JSON (bodies already left out): a compact binary form of the same
// JSON value, exact to the last key and number. Object keys and frequent strings are one byte from a fixed
// dictionary, hex digests 32 bytes, UUIDs 16, ISO timestamps a varint of epoch ms, integers varints. A proxied
// call's ~1 KB of report JSON becomes ~230 bytes, written in microseconds with no compressor to set up (a
// zlib call costs ~15 µs of fixed overhead, more than encoding the whole row).
//
// Format: byte 2 (the version), then one value:
//   0 null · 1 false · 2 true · 3 integer (zigzag varint) · 4 float64 · 5 string (varint byte length, UTF-8)
//   6 dictionary string (varint index) · 7 hex digest (32 bytes) · 8 UUID (16 bytes) · 9 ISO timestamp
//   (zigzag varint of epoch ms) · 10 array (varint n, n values) · 11 object (varint n, n × key + value)
//   · 12 string kept as JSON text (not well-formed UTF-16, e.g. a lone surrogate)
//   A key is a varint k: k < DICTIONARY.length names a dictionary entry, otherwise a UTF-8 key of
//   k − DICTIONARY.length bytes follows.
// Rows written before (plain JSON text) are read as they are.

/**
 * Version 2's dictionary. Append only: entries may be added at the end (old rows never use them), never
 * changed or removed, or rows written with them would read differently.
 */
const DICTIONARY: readonly string[] = [
  // report fields
  'metadata', 'client', 'clientVersion', 'environment', 'promptId', 'request', 'timestamp', 'body',
  'response', 'status', 'streamed', 'properties', 'userId', 'traceId', 'cacheEnabled', 'cacheHit',
  'proxy', 'method', 'path', 'upstream', 'cacheStatus', 'cacheKey', 'outcome', 'upstreamMs', 'error',
  'originReportId', 'id', 'receivedAt', 'durationMs', 'model', 'provider', 'usage', 'inputTokens',
  'outputTokens', 'totalTokens', 'cachedInputTokens', 'cacheCreationInputTokens', 'estimated', 'costUsd',
  'requestBytes', 'responseBytes', 'requestSha256', 'responseSha256', 'costSavedUsd', 'truncated', 'type',
  // frequent values
  'llm-relay', 'development', 'production', 'test', 'POST', 'GET', '/v1/chat/completions', '/v1/completions',
  '/v1/embeddings', '/v1/messages', '/v1/responses', 'https://api.openai.com', 'https://api.anthropic.com',
  'HIT', 'MISS', 'BYPASS', 'REFRESH', 'COALESCED', 'complete', 'upstream-error', 'stream-error',
  'client-abort', 'cache-only-miss', 'openai', 'anthropic', 'gpt-4o-mini', 'gpt-4o', 'gpt-4.1-mini',
  'gpt-4.1', 'text-embedding-3-small', 'pezzo', 'OpenAIChatCompletion',
];
const INDEX = new Map(DICTIONARY.map((s, i) => [s, i]));

const VERSION = 2;
const T_NULL = 0, T_FALSE = 1, T_TRUE = 2, T_INT = 3, T_FLOAT = 4, T_STR = 5, T_DICT = 6, T_HEX = 7, T_UUID = 8;
const T_TIME = 9, T_ARRAY = 10, T_OBJECT = 11, T_JSON = 12;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const MAX_VARINT = Number.MAX_SAFE_INTEGER;

/** One writer, grown as needed and reused: a row is copied out of it. */
let buf = Buffer.allocUnsafe(16 * 1024);
let at = 0;

function room(n: number): void {
  if (at + n <= buf.length) return;
  const bigger = Buffer.allocUnsafe(Math.max(buf.length * 2, at + n));
  buf.copy(bigger, 0, 0, at);
  buf = bigger;
}

function varint(n: number): void {
  room(8);
  while (n >= 0x80) {
    buf[at++] = (n % 0x80) | 0x80;
    n = Math.floor(n / 0x80);
  }
  buf[at++] = n;
}

function zigzag(n: number): number {
  return n >= 0 ? n * 2 : -n * 2 - 1;
}

function utf8(s: string): void {
  const n = s.length;
  // Short ASCII, the usual case, is copied by hand: cheaper than measuring and writing through the binding.
  if (n < 128) {
    room(n + 1);
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      buf[at + 1 + i] = c;
    }
    if (i === n) {
      buf[at] = n;
      at += n + 1;
      return;
    }
  }
  const bytes = Buffer.byteLength(s);
  varint(bytes);
  room(bytes);
  at += buf.write(s, at);
}

const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function digits(s: string, from: number, count: number): number {
  let v = 0;
  for (let i = from; i < from + count; i++) {
    const d = s.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    v = v * 10 + d;
  }
  return v;
}

/**
 * Epoch ms of a timestamp in exactly the form Date#toISOString writes (YYYY-MM-DDTHH:MM:SS.sssZ, a real
 * date), or NaN: only such a string is kept as ms, so that it reads back as the very same text.
 */
function isoMs(s: string): number {
  if (s.charCodeAt(4) !== 0x2d || s.charCodeAt(7) !== 0x2d || s.charCodeAt(10) !== 0x54 || s.charCodeAt(13) !== 0x3a)
    return Number.NaN;
  if (s.charCodeAt(16) !== 0x3a || s.charCodeAt(19) !== 0x2e || s.charCodeAt(23) !== 0x5a) return Number.NaN;
  const y = digits(s, 0, 4);
  const mo = digits(s, 5, 2);
  const d = digits(s, 8, 2);
  const h = digits(s, 11, 2);
  const mi = digits(s, 14, 2);
  const sec = digits(s, 17, 2);
  const ms = digits(s, 20, 3);
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 || ms < 0) return Number.NaN;
  const leap = mo === 2 && y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  if (d > DAYS[mo - 1]! + (leap ? 1 : 0)) return Number.NaN;
  return (((daysFromCivil(y, mo, d) * 24 + h) * 60 + mi) * 60 + sec) * 1000 + ms;
}

/**
 * Days from 1970-01-01 to this date of the proleptic Gregorian calendar (Date's), counted in whole 400-year
 * eras from a year that starts in March (H. Hinnant's days_from_civil): a third of the time of a Date's
 * Date.UTC and setUTCFullYear, which a report's three timestamps each took.
 */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * ((month + 9) % 12) + 2) / 5) + day - 1;
  return era * 146097 + yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear - 719468;
}

const HEX_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX_VALUE[48 + i] = i;
for (let i = 0; i < 6; i++) HEX_VALUE[97 + i] = 10 + i;

/**
 * Writes the lowercase hex digits of `s` as bytes (dashes skipped when `dashes`); false, with nothing
 * counted as written, when a character is not one.
 */
function hexInto(s: string, dashes: boolean): boolean {
  let o = at;
  let hi = -1;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (dashes && c === 0x2d) continue;
    const v = c < 128 ? HEX_VALUE[c]! : -1;
    if (v < 0) return false;
    if (hi < 0) hi = v;
    else {
      buf[o++] = (hi << 4) | v;
      hi = -1;
    }
  }
  at = o;
  return true;
}

function string(s: string): void {
  const known = INDEX.get(s);
  if (known !== undefined) {
    room(1);
    buf[at++] = T_DICT;
    varint(known);
    return;
  }
  const n = s.length;
  if (n === 64) {
    room(33);
    buf[at++] = T_HEX;
    if (hexInto(s, false)) return;
    at--;
  } else if (n === 36 && UUID.test(s)) {
    room(17);
    buf[at++] = T_UUID;
    hexInto(s, true);
    return;
  } else if (n === 24) {
    const ms = isoMs(s);
    if (!Number.isNaN(ms)) {
      room(1);
      buf[at++] = T_TIME;
      varint(zigzag(ms));
      return;
    }
  }
  if (!s.isWellFormed()) {
    room(1);
    buf[at++] = T_JSON;
    utf8(JSON.stringify(s));
    return;
  }
  room(1);
  buf[at++] = T_STR;
  utf8(s);
}

function number(n: number): void {
  if (Number.isInteger(n) && Math.abs(n) <= MAX_VARINT / 2 && !Object.is(n, -0)) {
    room(1);
    buf[at++] = T_INT;
    varint(zigzag(n));
    return;
  }
  room(9);
  buf[at++] = T_FLOAT;
  at = buf.writeDoubleLE(n, at);
}

function key(k: string): void {
  const known = INDEX.get(k);
  if (known !== undefined) {
    varint(known);
    return;
  }
  const n = Buffer.byteLength(k);
  varint(DICTIONARY.length + n);
  room(n);
  at += buf.write(k, at);
}

/**
 * One JSON value, as JSON.stringify would keep it. `bodyless`: this is the report's request or response,
 * whose `body` is written as 0 (its place in the key order kept): the body lives in the body store.
 */
function value(v: unknown, bodyless = false): void {
  switch (typeof v) {
    case 'string':
      string(v);
      return;
    case 'number':
      if (Number.isFinite(v)) number(v);
      else {
        room(1);
        buf[at++] = T_NULL; // JSON has no NaN or Infinity: JSON.stringify writes null
      }
      return;
    case 'boolean':
      room(1);
      buf[at++] = v ? T_TRUE : T_FALSE;
      return;
    case 'object':
      break;
    default:
      room(1);
      buf[at++] = T_NULL; // only reached inside arrays: undefined, functions and symbols are null there
      return;
  }
  if (v === null) {
    room(1);
    buf[at++] = T_NULL;
    return;
  }
  if (v instanceof Hole) {
    holes.push(at);
    return;
  }
  if (typeof (v as { toJSON?: unknown }).toJSON === 'function') {
    value((v as { toJSON(): unknown }).toJSON());
    return;
  }
  if (Array.isArray(v)) {
    room(1);
    buf[at++] = T_ARRAY;
    varint(v.length);
    for (const item of v) value(item);
    return;
  }
  object(v as Record<string, unknown>, bodyless);
}

function object(o: Record<string, unknown>, bodyless: boolean, top = false): void {
  const keys = Object.keys(o);
  let count = 0;
  for (const k of keys) if (kept(o[k])) count++;
  room(1);
  buf[at++] = T_OBJECT;
  varint(count);
  for (const k of keys) {
    const item = o[k];
    if (!kept(item)) continue;
    key(k);
    if (bodyless && k === 'body') {
      room(2);
      buf[at++] = T_INT;
      buf[at++] = 0;
    } else if (top && (k === 'request' || k === 'response') && typeof item === 'object' && item !== null && !Array.isArray(item))
      object(item as Record<string, unknown>, true);
    else value(item);
  }
}

/** Whether JSON.stringify keeps an object's property with this value. */
function kept(v: unknown): boolean {
  const t = typeof v;
  return t !== 'undefined' && t !== 'function' && t !== 'symbol';
}

/** A report's row form; its request and response bodies are written as 0 (see body-store.ts). */
export function packReport(report: object): Buffer {
  at = 0;
  room(1);
  buf[at++] = VERSION;
  object(report as Record<string, unknown>, false, true);
  return Buffer.from(buf.subarray(0, at));
}

// ---- templates: a report packed once with holes where its variants differ (report-variant.ts)

/** A place left open in a template; packTemplate writes nothing for it and notes where it was. */
class Hole {}
const HOLE = new Hole();
/** where each hole of the template being packed fell, in order */
let holes: number[] = [];

/** A report packed with some fields left open: the bytes around them, and which field fills each gap. */
export interface PackedTemplate {
  /** n + 1 stretches of bytes for n paths */
  parts: Buffer[];
  paths: readonly (readonly string[])[];
  /** for each gap, the index of its path in the paths packTemplate was given */
  slots: number[];
}

/**
 * A timestamp known as epoch ms, whose text is what `new Date(ms).toISOString()` writes: packVariant writes
 * it as packReport would write that text, without reading the text back.
 */
export class KnownTime {
  constructor(
    readonly ms: number,
    readonly text: string,
  ) {}
}

function valueAt(o: unknown, path: readonly string[]): unknown {
  let v = o;
  for (const k of path) v = (v as Record<string, unknown> | undefined)?.[k];
  return v;
}

/** A value packVariant writes in place: what packReport writes for it does not depend on anything around it. */
function scalar(v: unknown): boolean {
  return v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
}

/**
 * The report packed as packReport would, with the values at `paths` (one or two keys deep, outside the
 * bodies) left open for packVariant to fill. Undefined when a path does not hold a scalar.
 */
export function packTemplate(report: object, paths: readonly (readonly string[])[]): PackedTemplate | undefined {
  // (spreads, not Object.assign: an own `__proto__` key stays a key)
  const open: Record<string, unknown> = { ...(report as Record<string, unknown>) };
  for (const path of paths) {
    if (path.length < 1 || path.length > 2 || path.includes('body') || !scalar(valueAt(report, path))) return undefined;
    const [first, second] = path as [string, string | undefined];
    if (second === undefined) open[first] = HOLE;
    else {
      // (a copy of the report's own object, made once per object)
      if (open[first] === (report as Record<string, unknown>)[first]) open[first] = { ...(open[first] as object) };
      (open[first] as Record<string, unknown>)[second] = HOLE;
    }
  }
  holes = [];
  at = 0;
  room(1);
  buf[at++] = VERSION;
  object(open, false, true);
  const found = holes;
  holes = [];
  // object() meets the holes in key order, depth first: the paths in that order, each filling its gap.
  const order: (readonly string[])[] = [];
  for (const [k, v] of Object.entries(open)) {
    if (v === HOLE) order.push([k]);
    else if (v !== null && typeof v === 'object' && v !== (report as Record<string, unknown>)[k])
      for (const [k2, v2] of Object.entries(v)) if (v2 === HOLE) order.push([k, k2]);
  }
  if (found.length !== paths.length || order.length !== paths.length) return undefined;
  const slots = order.map((path) => paths.findIndex((p) => p.length === path.length && p.every((k, i) => k === path[i])));
  const bytes = Buffer.from(buf.subarray(0, at));
  const parts: Buffer[] = [];
  let from = 0;
  for (const to of found) {
    parts.push(bytes.subarray(from, to));
    from = to;
  }
  parts.push(bytes.subarray(from));
  return { parts, paths: order, slots };
}

/**
 * A variant of the template's report packed: exactly packReport(report), when only the template's paths
 * differ. `values`, when given, are the report's values at the paths packTemplate was given, in that order
 * (a KnownTime for a timestamp whose ms the caller knows): they are not read from the report again.
 */
export function packVariant(template: PackedTemplate, report: object, values?: readonly unknown[]): Buffer {
  // (plain loops and TypedArray#set: this runs for every cache hit's report, where map/every's closures and
  // Buffer#copy's checks cost ~0.5-1 µs of ~2.5, measured)
  const { parts, paths, slots } = template;
  const n = slots.length;
  const own: unknown[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const v = values ? values[slots[i]!] : valueAt(report, paths[i]!);
    if (!(v instanceof KnownTime) && !scalar(v)) return packReport(report);
    own[i] = v;
  }
  at = 0;
  for (let i = 0; i <= n; i++) {
    const part = parts[i]!;
    room(part.length);
    buf.set(part, at);
    at += part.length;
    if (i < n) {
      const v = own[i];
      if (v instanceof KnownTime) time(v);
      else value(v);
    }
  }
  const out = Buffer.allocUnsafe(at);
  buf.copy(out, 0, 0, at);
  return out;
}

/** What string() writes for the time's text, from its ms (the text is in the form isoMs reads, or not). */
function time(t: KnownTime): void {
  if (t.text.length !== 24) return string(t.text);
  room(1);
  buf[at++] = T_TIME;
  varint(zigzag(t.ms));
}

// ---- reading

class Reader {
  at = 1;
  constructor(readonly b: Buffer) {}

  varint(): number {
    let n = 0;
    let scale = 1;
    for (;;) {
      const byte = this.b[this.at++]!;
      n += (byte & 0x7f) * scale;
      if (byte < 0x80) return n;
      scale *= 0x80;
    }
  }

  signed(): number {
    const z = this.varint();
    return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
  }

  text(n: number): string {
    const s = this.b.toString('utf8', this.at, this.at + n);
    this.at += n;
    return s;
  }

  value(): unknown {
    const tag = this.b[this.at++];
    switch (tag) {
      case T_NULL:
        return null;
      case T_FALSE:
        return false;
      case T_TRUE:
        return true;
      case T_INT:
        return this.signed();
      case T_FLOAT: {
        const v = this.b.readDoubleLE(this.at);
        this.at += 8;
        return v;
      }
      case T_STR:
        return this.text(this.varint());
      case T_DICT:
        return dictionary(this.varint());
      case T_HEX: {
        const s = this.b.toString('hex', this.at, this.at + 32);
        this.at += 32;
        return s;
      }
      case T_UUID: {
        const h = this.b.toString('hex', this.at, this.at + 16);
        this.at += 16;
        return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
      }
      case T_TIME:
        return new Date(this.signed()).toISOString();
      case T_ARRAY: {
        const n = this.varint();
        const out: unknown[] = new Array(n);
        for (let i = 0; i < n; i++) out[i] = this.value();
        return out;
      }
      case T_OBJECT: {
        const n = this.varint();
        const out: Record<string, unknown> = {};
        for (let i = 0; i < n; i++) {
          const k = this.varint();
          const name = k < DICTIONARY.length ? DICTIONARY[k]! : this.text(k - DICTIONARY.length);
          const v = this.value();
          // As JSON.parse makes it: a key such as __proto__ stays an own property, not the prototype.
          if (name === '__proto__') Object.defineProperty(out, name, { value: v, enumerable: true, writable: true, configurable: true });
          else out[name] = v;
        }
        return out;
      }
      case T_JSON:
        return JSON.parse(this.text(this.varint())) as string;
      default:
        throw new Error(`report row: unknown tag ${tag} at byte ${this.at - 1}`);
    }
  }
}

function dictionary(i: number): string {
  const s = DICTIONARY[i];
  if (s === undefined) throw new Error(`report row: dictionary entry ${i} is not known to this version`);
  return s;
}

/** The report JSON value of a row: packed by packReport, or plain JSON text from an older relay. */
export function unpackReport(data: string | Uint8Array): object {
  if (typeof data === 'string') return JSON.parse(data) as object;
  const b = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (b[0] !== VERSION) throw new Error(`report row packed with unknown version ${b[0]}`);
  return new Reader(b).value() as object;
}
