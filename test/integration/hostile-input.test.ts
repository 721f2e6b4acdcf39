// Hostile input, property-based (fast-check): every endpoint of the relay gets malformed, mistyped, oversized,
// deeply nested, prototype-poisoning, badly encoded and otherwise hostile bodies, headers, query strings, ids
// and raw HTTP bytes. Each generator knows the class of answer its input must get:
//
//   - /api: a documented success (201 / 200 / 404 miss) for inputs that are valid, else a 4xx whose JSON body is
//     {statusCode, code, error, message} with statusCode = the HTTP status and code = the documented RELAY_ERR_*;
//   - the proxy forwards the body unchanged, so its answer is the fake upstream's (computed here from the bytes
//     sent, exactly as test/helpers/fake-upstream.ts decides) or a cache hit, or a documented relay 4xx;
//   - raw sockets (requests undici refuses to send) must get a complete HTTP answer, never a dropped connection.
//
// Never a 5xx the upstream did not send, never a dropped connection; afterwards /healthz answers 200 and the
// relay logged nothing at level error. Every request actually sent is counted; the total must be ≥ 1,000.
import { LINE_MAX_DEPTH } from '../../src/core/cache-transfer.js';
import { createHash } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheHash, proxyKeyObject } from '../../src/core/cache-key.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type TestRelay, startRelay } from '../helpers/relay.js';

const MAX_BODY = 64 * 1024;
const MAX_DEPTH = 64;
const T_REQ = '2024-05-01T12:00:00.000Z';
const T_RES = '2024-05-01T12:00:01.250Z';
const NOW = Date.now();
const JSON_CT = 'application/json';
const NDJSON_CT = 'application/x-ndjson';
const NAMESPACE = /^[A-Za-z0-9._-]{1,128}$/;
/** field name used to inject hostile values into an otherwise valid body (removed from generated bases) */
const HK = '~hostile';
/** "send no content-type header" */
const NONE = '(none)';
const PROP_TIMEOUT = 60_000;

let up: FakeUpstream;
let relay: TestRelay;
/** requests actually sent, per endpoint */
const sent: Record<string, number> = {};
/** a cursor the list endpoint really returned (set in beforeAll) */
let realCursor = '';
/** ids of stored reports (set in beforeAll, grown by the report properties) */
const reportIds: string[] = [];

function count(endpoint: string): void {
  sent[endpoint] = (sent[endpoint] ?? 0) + 1;
}

beforeAll(async () => {
  up = await startFakeUpstream();
  relay = await startRelay({ cacheUrl: 'memory', maxBodyBytes: MAX_BODY, upstreamUrl: up.url, logLevel: 'info' });
  for (let i = 0; i < 3; i++) {
    const a = await call('setup', 'POST', '/api/reporting/v2/request', {
      body: JSON.stringify({ request: { timestamp: T_REQ, body: { i } }, response: { timestamp: T_RES } }),
    });
    expect(a.status).toBe(201);
    reportIds.push(a.json.id);
  }
  const page = await call('setup', 'GET', '/api/reporting/v2/requests?limit=1');
  expect(page.json.nextCursor).toEqual(expect.any(String));
  realCursor = page.json.nextCursor;
});

afterAll(async () => {
  const lines = Object.entries(sent)
    .filter(([k]) => k !== 'setup')
    .map(([k, n]) => `  ${k.padEnd(40)} ${n}`);
  const total = Object.entries(sent).reduce((s, [k, n]) => (k === 'setup' ? s : s + n), 0);
  console.log(`hostile requests sent per endpoint:\n${lines.join('\n')}\n  ${'total'.padEnd(40)} ${total}`);
  await relay?.close();
  await up?.close();
});

// ───────────────────────────── sending and checking ─────────────────────────────

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

async function call(
  endpoint: string,
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: string | Buffer; base?: string } = {},
): Promise<Answer> {
  count(endpoint);
  // A Buffer body: fetch adds no content-type of its own (a string body would get text/plain).
  const body = typeof opts.body === 'string' ? Buffer.from(opts.body, 'utf8') : opts.body;
  const res = await fetch(`${opts.base ?? relay.url}${path}`, {
    method,
    headers: opts.body !== undefined && typeof opts.body === 'string' && !opts.headers ? { 'content-type': JSON_CT } : (opts.headers ?? {}),
    ...(body !== undefined ? { body } : {}),
  });
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

function show(a: Answer): string {
  return `HTTP ${a.status} ${a.text.slice(0, 300)}`;
}

/** A relay error: the documented shape, statusCode = HTTP status, code = one of `codes`. */
function expectRelayError(a: Answer, status: number | number[], codes: string | string[], what = ''): void {
  const ctx = `${what} → ${show(a)}`;
  expect([status].flat(), ctx).toContain(a.status);
  expect(a.headers.get('content-type') ?? '', ctx).toMatch(/^application\/json/);
  expect(a.json, ctx).toMatchObject({
    statusCode: a.status,
    code: expect.stringMatching(/^RELAY_ERR_[A-Z_]+$/),
    error: STATUS_CODES[a.status],
    message: expect.any(String),
  });
  expect([codes].flat(), ctx).toContain(a.json.code);
  expect(a.json.message.length, ctx).toBeGreaterThan(0);
}

function hasForbiddenKey(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(hasForbiddenKey);
  if (typeof v !== 'object' || v === null) return false;
  for (const [k, x] of Object.entries(v)) {
    if (k === '__proto__') return true;
    if (k === 'constructor' && typeof x === 'object' && x !== null && Object.hasOwn(x, 'prototype')) return true;
    if (hasForbiddenKey(x)) return true;
  }
  return false;
}

function depthOf(v: unknown): number {
  if (typeof v !== 'object' || v === null) return 0;
  return 1 + Math.max(0, ...Object.values(v).map(depthOf));
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** No lone surrogates (encodeURIComponent throws on them). */
function wellFormed(s: string): boolean {
  try {
    encodeURIComponent(s);
    return true;
  } catch {
    return false;
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
function validUtf8(b: Uint8Array): boolean {
  try {
    utf8.decode(b);
    return true;
  } catch {
    return false;
  }
}

/** Unicode text sent as its UTF-8 bytes in a header value (undici sends header strings as latin1 bytes). */
const asHeaderBytes = (s: string) => Buffer.from(s, 'utf8').toString('latin1');

// ───────────────────────────── generators: JSON values ─────────────────────────────

const WEIRD_STRINGS = [
  '',
  '\u0000',
  'nul\u0000inside',
  '\ud800',
  '\udfff',
  'x\ud83d',
  '\u202e\u2066rtl',
  '\ufeffbom',
  '\uffff\ufffe',
  '\u2028\u2029',
  '"\\\'',
  '</script><script>alert(1)</script>',
  "'; DROP TABLE reports; --",
  '%00%ff',
  '${jndi:ldap://x}',
  '__proto__',
  'constructor',
  'prototype',
  '\r\n\r\nHTTP/1.1 200 OK\r\n',
  'ｆｕｌｌｗｉｄｔｈ',
  'Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǫ̗',
  '👩‍👩‍👧‍👦',
  '\u0085\u00a0',
];
const hostileString = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 24 }) },
  { weight: 2, arbitrary: fc.constantFrom(...WEIRD_STRINGS) },
);
const hostileNumber = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, 1e308, -1e308, 5e-324, 2 ** 53 + 2, -(2 ** 63), Number.MAX_VALUE, 1e21),
);
const hostileKey = fc
  .oneof(hostileString, fc.constantFrom('constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', '', ' ', 'id', 'then'))
  .filter((k) => k !== '__proto__' && k !== HK);
const { tree } = fc.letrec<{ tree: unknown; arr: unknown[]; obj: Record<string, unknown> }>((tie) => ({
  tree: fc.oneof({ depthSize: 'small', withCrossShrink: true }, hostileString, hostileNumber, fc.boolean(), fc.constant(null), tie('arr'), tie('obj')),
  arr: fc.array(tie('tree'), { maxLength: 4 }),
  obj: fc.dictionary(hostileKey, tie('tree'), { maxKeys: 4 }),
}));
/** A JSON object with hostile but legal content: unicode, NULs, lone surrogates, odd keys, odd numbers. */
const hostileObject = fc
  .dictionary(hostileKey, tree, { maxKeys: 5 })
  .filter((o) => !hasForbiddenKey(o) && depthOf(o) <= 20)
  .map((o) => JSON.parse(JSON.stringify(o)) as Record<string, unknown>);
const safeTree = tree.filter((v) => !hasForbiddenKey(v) && depthOf(v) <= 20);
/** Sometimes a very long string (kept under the body limit by the bodies that use it). */
const longString = fc
  .tuple(fc.integer({ min: 1_000, max: 5_000 }), fc.constantFrom('x', 'é', '€', '😀', '\u0000'))
  .map(([n, c]) => c.repeat(n));

// ───────────────────────────── generators: valid bodies per endpoint ─────────────────────────────

const pad2 = (n: number) => String(n).padStart(2, '0');
/** RFC 3339 date-times as a client may write them. */
const validTimestamp = fc
  .tuple(
    fc.date({ min: new Date('0000-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }),
    fc.constantFrom('iso', 'no-ms', 'micros', 'offset', 'lower'),
    fc.integer({ min: -23 * 60 - 59, max: 23 * 60 + 59 }),
  )
  .map(([d, form, off]) => {
    const iso = d.toISOString();
    if (form === 'no-ms') return `${iso.slice(0, 19)}Z`;
    if (form === 'micros') return `${iso.slice(0, 23)}456789Z`;
    if (form === 'lower') return iso.replace('T', 't').replace('Z', 'z');
    if (form === 'offset') {
      const a = Math.abs(off);
      return `${iso.slice(0, 19)}${off < 0 ? '-' : '+'}${pad2(Math.floor(a / 60))}:${pad2(a % 60)}`;
    }
    return iso;
  });

const metadataArb = fc.record(
  {
    client: hostileString,
    clientVersion: hostileString,
    environment: hostileString,
    promptId: hostileString,
    provider: hostileString,
    type: safeTree,
  },
  { requiredKeys: [] },
);
const exchangeArb = (extra: fc.Arbitrary<unknown>) =>
  fc.record(
    { timestamp: validTimestamp, body: hostileObject, status: extra, unknown: safeTree },
    { requiredKeys: ['timestamp'] },
  );
const flagArb = fc.constantFrom(true, false, null);
const reportArb = fc
  .record(
    {
      metadata: metadataArb,
      request: exchangeArb(safeTree),
      response: exchangeArb(fc.oneof(fc.integer({ min: 100, max: 599 }), safeTree)),
      properties: hostileObject,
      cacheEnabled: flagArb,
      cacheHit: flagArb,
      extraField: safeTree,
      longField: longString,
    },
    { requiredKeys: ['request', 'response'] },
  )
  .map((r) => JSON.parse(JSON.stringify(r)) as Record<string, unknown>);
const saveArb = fc.record(
  { request: hostileObject, response: hostileObject, extra: safeTree, longField: longString },
  { requiredKeys: ['request', 'response'] },
);
const retrieveArb = fc.record({ request: hostileObject, extra: safeTree }, { requiredKeys: ['request'] });

type Ep = 'report' | 'save' | 'retrieve';
const EP_PATH: Record<Ep, string> = {
  report: '/api/reporting/v2/request',
  save: '/api/cache/v1/request/save',
  retrieve: '/api/cache/v1/request/retrieve',
};
const validBodyFor = (ep: Ep): fc.Arbitrary<Record<string, unknown>> =>
  ep === 'report' ? reportArb : ep === 'save' ? saveArb : retrieveArb;

// ───────────────────────────── generators: hostile bodies ─────────────────────────────

interface BodyCase {
  label: string;
  body: Buffer;
  /** undefined: no content-type header at all */
  contentType: string | undefined;
  /** the relay error it must get, or 'valid' (the endpoint's documented success) */
  expect: { status: number; code: string } | 'valid';
}

const err = (status: number, code: string) => ({ status, code });
const INVALID_JSON = err(400, 'RELAY_ERR_INVALID_JSON');

/** `{"~hostile": <raw>, …the rest of the base body}` — the base stays valid around the injected text. */
function inject(baseText: string, raw: string, key = HK): string {
  return `{${JSON.stringify(key)}:${raw},${baseText.slice(1)}`;
}

const BAD_LITERALS = [
  'NaN', '-NaN', 'Infinity', '-Infinity', '+Infinity', 'undefined', "'single'", '0x1F', '01', '-01', '+1', '.5', '1.',
  '1e', '-', 'True', 'nul', 'tru', '"unterminated', '"\\x41"', '"\\u12"', '"\\a"', '"tab\there"', '"nl\nhere"',
  '"nul\u0000here"', '"del\u001fhere"', '[1,]', '{"a":1,}', '{a:1}', "{'a':1}", '[1 2]', '{"a" 1}', '{"a":}', '{,}',
  '(1)', '1_000', '0b1', '1e+', '--1', '"\\ud800\\"', '\u00a0"nbsp-as-space"',
];
const TRAILING_GARBAGE = ['x', '}', ']', ',', '{}', '[]', '1', 'null', '"s"', '\u0000', '//', '/* */', ',,', ' }', 'NaN', "'x'", '\ufeff'];

function malformed(text: string): fc.Arbitrary<string> {
  return fc
    .oneof(
      fc.integer({ min: 1, max: text.length - 1 }).map((i) => text.slice(0, i)),
      fc.constantFrom(...TRAILING_GARBAGE).map((g) => text + g),
      fc.constantFrom(...BAD_LITERALS).map((lit) => inject(text, lit)),
      fc.constant(text.replaceAll('"', "'")),
      fc.constant(`{hostile:1,${text.slice(1)}`),
      fc.constant(`${text.slice(0, -1)},}`),
      fc.constantFrom(`/* c */${text}`, `{// c\n${text.slice(1)}`, text + text, `{\ufeff${text.slice(1)}`, `{\u00a0${text.slice(1)}`),
    )
    .filter((t) => t.trim() !== '' && !parses(t));
}

const INVALID_UTF8: number[][] = [
  [0x80], [0xbf], [0x80, 0x80], [0xc0, 0x80], [0xc1, 0xbf], [0xe0, 0x80, 0x80], [0xe0, 0x9f, 0xbf],
  [0xf0, 0x80, 0x80, 0x80], [0xf0, 0x8f, 0xbf, 0xbf], [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf],
  [0xed, 0xa0, 0xbd, 0xed, 0xb2, 0xa9], [0xf4, 0x90, 0x80, 0x80], [0xf5, 0x80, 0x80, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80], [0xfc, 0x84, 0x80, 0x80, 0x80, 0x80], [0xfe], [0xff], [0xfe, 0xff],
  [0xc3], [0xe2, 0x82], [0xf0, 0x9f, 0x98],
];
const invalidUtf8Bytes = fc.oneof(
  fc.constantFrom(...INVALID_UTF8).map((a) => Buffer.from(a)),
  fc.uint8Array({ minLength: 1, maxLength: 8, min: 0x80, max: 0xff }).map((a) => Buffer.from(a)).filter((b) => !validUtf8(b)),
);
const asciiBit = fc.string({ unit: 'grapheme-ascii', maxLength: 6 }).map((s) => s.replace(/["\\]/g, ''));

function invalidUtf8Body(text: string): fc.Arbitrary<Buffer> {
  return fc
    .tuple(invalidUtf8Bytes, asciiBit, asciiBit, fc.constantFrom('value', 'key'))
    .map(([bad, pre, post, where]) =>
      where === 'value'
        ? Buffer.concat([Buffer.from(`{"${HK}":"${pre}`), bad, Buffer.from(`${post}",${text.slice(1)}`)])
        : Buffer.concat([Buffer.from(`{"${pre}`), bad, Buffer.from(`${post}":1,${text.slice(1)}`)]),
    )
    .filter((b) => !validUtf8(b));
}

/** Nested arrays/objects `depth` levels deep. */
function nested(depth: number, kind: 'array' | 'object' | 'mixed'): string {
  let open = '';
  let close = '';
  for (let i = 0; i < depth; i++) {
    const obj = kind === 'object' || (kind === 'mixed' && i % 2 === 1);
    open += obj ? '{"a":' : '[';
    close = (obj ? '}' : ']') + close;
  }
  return `${open}1${close}`;
}

const FORBIDDEN_FORMS = [
  (v: string) => `{"__proto__":${v}}`,
  (v: string) => `{"\\u005f_proto__":${v}}`,
  (v: string) => `{"__\\u0070roto__":${v}}`,
  (v: string) => `{"\\u005F\\u005Fproto\\u005F\\u005F":${v}}`,
  (v: string) => `{"constructor":{"prototype":${v}}}`,
  (v: string) => `{"\\u0063onstructor":{"prototype":${v}}}`,
  (v: string) => `{"constructor":{"\\u0070rototype":${v}}}`,
  (v: string) => `{"ok":1,"constructor":{"a":1,"prototype":${v}}}`,
];

function forbiddenBody(text: string, rootHasConstructor: boolean): fc.Arbitrary<string> {
  return fc
    .record({
      form: fc.nat(FORBIDDEN_FORMS.length - 1),
      value: fc.oneof(fc.constant('{"polluted":true}'), safeTree.map((v) => JSON.stringify(v))),
      depth: fc.nat(30),
      arrays: fc.boolean(),
      atRoot: fc.boolean(),
    })
    .map(({ form, value, depth, arrays, atRoot }) => {
      const poison = FORBIDDEN_FORMS[form]!(value);
      // At the root, unless the base has its own `constructor` key (the later duplicate would replace ours).
      if (atRoot && depth === 0 && !(rootHasConstructor && poison.includes('constructor'))) return `${poison.slice(0, -1)},${text.slice(1)}`;
      let wrapped = poison;
      for (let i = 0; i < depth; i++) wrapped = arrays && i % 2 === 0 ? `[1,${wrapped}]` : `{"w${i}":${wrapped}}`;
      return inject(text, wrapped);
    });
}

const UNSUPPORTED_TYPES = [
  'text/plain', 'text/plain; charset=utf-8', 'text/json', 'application/jsonx', 'application/json-seq',
  'application/vnd.api+json', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=----x',
  'application/xml', 'application/octet-stream', '*/*', 'application/*', 'application', 'json', '',
  'application/json, text/plain', 'application/ json', ';application/json', NDJSON_CT, NONE,
];
/** Content-type headers fastify cannot parse at all (answered 415 before any content-type parser runs). */
const UNPARSABLE_TYPES = ['application', 'json', '', 'application/json, text/plain', 'application/ json', ';application/json'];
/** Media type application/json with parameters or in other case: the body is parsed as JSON (always as UTF-8). */
const JSON_EQUIVALENT_TYPES = ['application/json; charset=utf-8', 'Application/JSON', 'application/json;', 'application/json ; charset=UTF-8', 'application/json; charset=latin1'];
/** Out of range, yet without a 3-digit exponent or a 300-digit run (what src/http/json-body.ts looks for). */
const SNEAKY_HUGE = [`1${'0'.repeat(298)}e99`, `${'9'.repeat(250)}.5e60`];
const HUGE_NUMBERS = [
  '1e400', '-1e400', '1E+400', '1e309', '-2e308', '1e99999', `1${'0'.repeat(400)}`, `-${'9'.repeat(320)}`,
  ...SNEAKY_HUGE, `0.${'0'.repeat(5)}1e999`,
];

/** Every hostile category that applies to any JSON body endpoint, built around a valid body of that endpoint. */
function hostileBodies(base: Record<string, unknown>): fc.Arbitrary<BodyCase> {
  delete base[HK];
  const text = JSON.stringify(base);
  const buf = (t: string) => Buffer.from(t, 'utf8');
  // `contentType` NONE: no content-type header at all (a default parameter would swallow an explicit undefined).
  const c = (label: string, body: Buffer, expectation: BodyCase['expect'], ct: string = JSON_CT): BodyCase => {
    const contentType = ct === NONE ? undefined : ct;
    return {
    label,
    body,
    contentType,
    // The body limit is applied while reading, before the body is parsed.
    expect: body.length > MAX_BODY && !UNSUPPORTED_TYPES.includes(ct) ? err(413, 'RELAY_ERR_BODY_TOO_LARGE') : expectation,
    };
  };
  return fc.oneof(
    malformed(text).map((t) => c('malformed JSON', buf(t), INVALID_JSON)),
    fc.constantFrom('', ' ', '\n', '\r\n\t ', '\ufeff').map((t) => c('empty body', buf(t), INVALID_JSON)),
    invalidUtf8Body(text).map((b) => c('invalid UTF-8', b, INVALID_JSON)),
    fc
      .tuple(fc.constantFrom(...'àéîõüÿ€'.slice(0, 6)), fc.constantFrom('application/json; charset=latin1', 'application/json; charset=iso-8859-1'))
      .map(([ch, ct]) => c('latin1 bytes', Buffer.from(inject(text, `"caf${ch}"`), 'latin1'), INVALID_JSON, ct)),
    fc
      .record({ depth: fc.integer({ min: MAX_DEPTH, max: 5_000 }), kind: fc.constantFrom('array', 'object', 'mixed'), atRoot: fc.boolean() })
      .map(({ depth, kind, atRoot }) =>
        c('too deep', buf(atRoot ? nested(depth + 1, kind as 'array') : inject(text, nested(depth, kind as 'array'))), err(400, 'RELAY_ERR_JSON_TOO_DEEP')),
      ),
    forbiddenBody(text, Object.hasOwn(base, 'constructor')).map((t) => c('forbidden key', buf(t), err(400, 'RELAY_ERR_FORBIDDEN_KEY'))),
    fc.constantFrom(...UNSUPPORTED_TYPES).map((ct) =>
      c(
        `content-type ${JSON.stringify(ct)}`,
        ct.startsWith('multipart') ? buf(`------x\r\nContent-Disposition: form-data; name="a"\r\n\r\n${text}\r\n------x--\r\n`) : buf(text),
        err(415, 'RELAY_ERR_UNSUPPORTED_MEDIA_TYPE'),
        ct,
      ),
    ),
    fc.integer({ min: MAX_BODY + 1, max: 4 * MAX_BODY }).map((n) => {
      const head = `{"${HK}":"`;
      const tail = `",${text.slice(1)}`;
      return c('oversized', buf(head + 'x'.repeat(Math.max(0, n - head.length - Buffer.byteLength(tail))) + tail), err(413, 'RELAY_ERR_BODY_TOO_LARGE'));
    }),
    // Valid, however odd: the endpoint's documented success.
    fc.constantFrom(0, 2, '\t', '\r\n').map((indent) => c('valid, odd whitespace', buf(JSON.stringify(base, null, indent)), 'valid')),
    safeTree.map((junk) => {
      const first = Object.keys(base)[0]!;
      return c('valid, duplicate key (last wins)', buf(inject(text, JSON.stringify(junk), first)), 'valid');
    }),
    fc.constantFrom('"\\u0000 nul \\ud800 lone \\udfff"', '1e-400', '-0', '0.0000000000000000000000000000001', '123456789012345678901234567890', '"\\/\\b\\f\\n\\r\\t"')
      .map((raw) => c('valid, odd literal', buf(inject(text, raw)), 'valid')),
    fc.integer({ min: 1, max: MAX_DEPTH - 1 }).map((d) => c(`valid, depth ${d + 1}`, buf(inject(text, nested(d, 'mixed'))), 'valid')),
    fc.constantFrom(...JSON_EQUIVALENT_TYPES).map((ct) => c(`valid, content-type ${ct}`, buf(text), 'valid', ct)),
  );
}

// ───────────────────────────── the /api success answers ─────────────────────────────

async function expectValidAnswer(ep: Ep, a: Answer, bodyText: string, label: string): Promise<void> {
  const ctx = `${label} → ${show(a)}`;
  const sentValue = JSON.parse(bodyText.replace(/^\ufeff/, ''));
  if (ep === 'report') {
    expect(a.status, ctx).toBe(201);
    expect(a.json, ctx).toMatchObject({
      id: expect.any(String),
      receivedAt: expect.any(String),
      requestBytes: expect.any(Number),
      responseBytes: expect.any(Number),
      request: { timestamp: sentValue.request.timestamp },
      response: { timestamp: sentValue.response.timestamp },
    });
    reportIds.push(a.json.id);
    const back = await call('GET /api/reporting/v2/requests/:id', 'GET', `/api/reporting/v2/requests/${a.json.id}`);
    expect(back.status, `${ctx}; read back → ${show(back)}`).toBe(200);
    expect(back.json.id).toBe(a.json.id);
  } else if (ep === 'save') {
    expect(a.status, ctx).toBe(201);
    expect(a.json, ctx).toEqual({ hash: cacheHash(sentValue.request), exp: expect.any(String) });
    expect(Number.isFinite(Date.parse(a.json.exp)), ctx).toBe(true);
  } else if (a.status === 200) {
    expect(a.json, ctx).toMatchObject({ hit: true });
  } else {
    expectRelayError(a, 404, 'RELAY_ERR_CACHE_MISS', label);
    expect(a.json, ctx).toMatchObject({ hit: false, data: null });
  }
}

// ───────────────────────────── /api JSON endpoints ─────────────────────────────

describe('POST /api/reporting/v2/request, /api/cache/v1/request/save, /retrieve', () => {
  it(
    'hostile bodies (malformed, invalid UTF-8, too deep, forbidden keys, wrong content type, oversized, empty, odd but valid) get their documented answer',
    async () => {
      const arb = fc
        .constantFrom<Ep>('report', 'save', 'retrieve')
        .chain((ep) => validBodyFor(ep).chain((base) => hostileBodies(base).map((bc) => ({ ep, ...bc }))));
      await fc.assert(
        fc.asyncProperty(arb, async (bc) => {
          const headers: Record<string, string> = bc.contentType === undefined ? {} : { 'content-type': bc.contentType };
          const a = await call(`POST ${EP_PATH[bc.ep]}`, 'POST', EP_PATH[bc.ep], { headers, body: bc.body });
          const label = `${bc.ep}: ${bc.label}`;
          if (bc.expect === 'valid') await expectValidAnswer(bc.ep, a, bc.body.toString('utf8'), label);
          else expectRelayError(a, bc.expect.status, bc.expect.code, label);
        }),
        { numRuns: 450 },
      );
    },
    PROP_TIMEOUT,
  );

  for (const ep of ['report', 'save', 'retrieve'] as const) {
    it(
      `${EP_PATH[ep]}: numbers out of range (1e400, -1e400, a 250-digit mantissa with e60, …) are a 400, never a 500 or a silent null`,
      async () => {
        const arb = fc.record({ lit: fc.constantFrom(...HUGE_NUMBERS), where: fc.constantFrom('top', 'inside request') });
        await fc.assert(
          fc.asyncProperty(arb, async ({ lit, where }) => {
            const top = where === 'top' ? `"n":${lit},` : '';
            const inner = where === 'top' ? '' : `"n":${lit}`;
            const body =
              ep === 'report'
                ? `{${top}"request":{"timestamp":"${T_REQ}","body":{${inner}}},"response":{"timestamp":"${T_RES}"}}`
                : ep === 'save'
                  ? `{${top}"request":{${inner}},"response":{}}`
                  : `{${top}"request":{${inner}}}`;
            const a = await call(`POST ${EP_PATH[ep]}`, 'POST', EP_PATH[ep], { body });
            expectRelayError(a, 400, 'RELAY_ERR_VALIDATION', `${lit.length > 24 ? `${lit.slice(0, 12)}…${lit.slice(-8)} (${lit.length} chars)` : lit} ${where}`);
          }),
          // The literals the relay's pre-check misses (no 300-digit run, a 2-digit exponent) always run first.
          { numRuns: 15, examples: SNEAKY_HUGE.flatMap((lit) => [[{ lit, where: 'inside request' }], [{ lit, where: 'top' }]]) },
        );
      },
      PROP_TIMEOUT,
    );
  }
});

// ───────────────────────────── POST /api/reporting/v2/request ─────────────────────────────

type JsonType = 'object' | 'array' | 'string' | 'number' | 'boolean' | 'null';
const typeOf = (v: unknown): JsonType =>
  v === null ? 'null' : Array.isArray(v) ? 'array' : (typeof v as JsonType);
const anyValue = fc.oneof(hostileString, hostileNumber, fc.boolean(), fc.constant(null), fc.array(safeTree, { maxLength: 3 }), hostileObject);

const REPORT_FIELDS: Array<{ path: string[]; allowed: JsonType[] }> = [
  { path: [], allowed: ['object'] },
  { path: ['metadata'], allowed: ['object'] },
  { path: ['metadata', 'client'], allowed: ['string'] },
  { path: ['metadata', 'clientVersion'], allowed: ['string'] },
  { path: ['metadata', 'environment'], allowed: ['string'] },
  { path: ['metadata', 'promptId'], allowed: ['string'] },
  { path: ['request'], allowed: ['object'] },
  { path: ['request', 'timestamp'], allowed: ['string'] },
  { path: ['request', 'body'], allowed: ['object'] },
  { path: ['response'], allowed: ['object'] },
  { path: ['response', 'timestamp'], allowed: ['string'] },
  { path: ['response', 'body'], allowed: ['object'] },
  { path: ['properties'], allowed: ['object'] },
  { path: ['cacheEnabled'], allowed: ['boolean', 'null'] },
  { path: ['cacheHit'], allowed: ['boolean', 'null'] },
];
const REQUIRED = [['request'], ['response'], ['request', 'timestamp'], ['response', 'timestamp']];

function setPath(obj: Record<string, any>, path: string[], value: unknown, remove = false): Record<string, any> {
  if (path.length === 0) return value as Record<string, any>;
  let o = obj;
  for (const k of path.slice(0, -1)) o = o[k] = typeof o[k] === 'object' && o[k] !== null ? o[k] : {};
  if (remove) delete o[path.at(-1)!];
  else o[path.at(-1)!] = value;
  return obj;
}

const BAD_TIMESTAMPS = [
  '', 'yesterday', 'now', '2024-05-01', '2024-05-01T12:00:00', '2024-05-01T12:00Z', '2024-13-01T12:00:00Z',
  '2024-00-10T00:00:00Z', '2024-05-00T00:00:00Z', '2024-05-32T00:00:00Z', '2024-02-30T12:00:00Z',
  '2023-02-29T00:00:00Z', '2024-05-01T24:00:00Z', '2024-05-01T12:60:00Z', '2024-05-01T12:00:61Z',
  '2024-05-01T12:00:00+25:00', '2024-05-01T12:00:00+05:60', '+002024-05-01T12:00:00Z', '10000-01-01T00:00:00Z',
  '2024-05-01T12:00:00.Z', '2024-05-01T12:00:00,5Z', '2024-W18-3T12:00:00Z', '2024-5-1T12:00:00Z', '1714564800000',
  '２０２４-05-01T12:00:00Z', ` ${T_REQ}`, `${T_REQ} `, `${T_REQ}\n`, `${T_REQ}\u0000`, 'Wed, 01 May 2024 12:00:00 GMT',
  '2024-05-01T12:00:00.000ZZ', 'T12:00:00Z', '-2024-05-01T12:00:00Z',
];
const badTimestamp = fc.oneof(
  fc.constantFrom(...BAD_TIMESTAMPS),
  fc.string({ unit: 'binary', maxLength: 30 }).filter((s) => !/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}/.test(s)),
  fc
    .record({ mo: fc.oneof(fc.integer({ min: 13, max: 99 }), fc.constant(0)), d: fc.integer({ min: 1, max: 28 }) })
    .map(({ mo, d }) => `2024-${pad2(mo)}-${pad2(d)}T00:00:00Z`),
  fc.record({ h: fc.integer({ min: 24, max: 99 }), m: fc.integer({ min: 0, max: 59 }) }).map(({ h, m }) => `2024-05-01T${pad2(h)}:${pad2(m)}:00Z`),
  fc.integer({ min: 60, max: 99 }).map((m) => `2024-05-01T12:${pad2(m)}:00Z`),
  fc.integer({ min: 32, max: 99 }).map((d) => `2024-01-${pad2(d)}T00:00:00Z`),
);

describe('POST /api/reporting/v2/request', () => {
  it(
    'a wrong type (or a missing required field) at every field of the Report schema is a 400 naming the field',
    async () => {
      const arb = fc.oneof(
        fc
          .record({ field: fc.constantFrom(...REPORT_FIELDS), base: reportArb, value: anyValue })
          .filter(({ field, value }) => !field.allowed.includes(typeOf(value)))
          .map(({ field, base, value }) => ({ path: field.path, body: setPath(base, field.path, value), missing: false })),
        fc
          .record({ path: fc.constantFrom(...REQUIRED), base: reportArb })
          .map(({ path, base }) => ({ path, body: setPath(base, path, undefined, true), missing: true })),
      );
      await fc.assert(
        fc.asyncProperty(arb, async ({ path, body, missing }) => {
          const a = await call('POST /api/reporting/v2/request', 'POST', '/api/reporting/v2/request', { body: JSON.stringify(body) });
          const field = ['body', ...path].join('/');
          expectRelayError(a, 400, 'RELAY_ERR_VALIDATION', `${missing ? 'missing' : 'wrong type at'} ${field}`);
          expect(a.json.message, show(a)).toContain(field);
        }),
        { numRuns: 120 },
      );
    },
    PROP_TIMEOUT,
  );

  it(
    'bad timestamps (not RFC 3339, impossible dates, not strings) are a 400 naming the timestamp',
    async () => {
      const arb = fc.record({
        base: reportArb,
        value: fc.oneof({ weight: 4, arbitrary: badTimestamp }, { weight: 1, arbitrary: fc.oneof(hostileNumber, fc.boolean(), fc.constant(null), hostileObject) }),
        where: fc.constantFrom<string[]>(['request', 'timestamp'], ['response', 'timestamp']),
      });
      await fc.assert(
        fc.asyncProperty(arb, async ({ base, value, where }) => {
          const a = await call('POST /api/reporting/v2/request', 'POST', '/api/reporting/v2/request', {
            body: JSON.stringify(setPath(base, where, value)),
          });
          expectRelayError(a, 400, 'RELAY_ERR_VALIDATION', `timestamp ${JSON.stringify(value)}`);
          expect(a.json.message, show(a)).toContain(`body/${where.join('/')}`);
        }),
        { numRuns: 70 },
      );
    },
    PROP_TIMEOUT,
  );
});

// ───────────────────────────── POST /api/cache/v1/request/save and /retrieve ─────────────────────────────

const HEADER_CHARS = [...Array.from({ length: 0x7e - 0x20 + 1 }, (_, i) => String.fromCharCode(0x20 + i)), ...Array.from({ length: 0x60 }, (_, i) => String.fromCharCode(0xa0 + i))];
/** A header value undici will send as is: latin1 bytes, no CR/LF/NUL, no leading/trailing whitespace. */
const headerValue = fc
  .oneof(
    fc.string({ unit: fc.constantFrom(...HEADER_CHARS), minLength: 1, maxLength: 40 }),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }).map(asHeaderBytes),
    fc.integer({ min: 200, max: 600 }).map((n) => 'v'.repeat(n)),
  )
  .map((s) => s.replace(/^[\s\u0085]+|[\s\u0085]+$/g, ''))
  .filter((s) => s.length > 0 && !/[\u0000-\u0008\u000a-\u001f\u007f]/.test(s));
const validNamespace = fc.stringMatching(/^[A-Za-z0-9._-]{1,128}$/);
const badNamespace = fc.oneof(
  fc.integer({ min: 129, max: 1000 }).map((n) => 'n'.repeat(n)),
  fc.tuple(validNamespace, fc.constantFrom(' ', '/', ':', '*', '@', '!', '~', '\u00e9', 'Ã©', '"', '%', '+', '\t'), validNamespace).map(([a, b, c]) => `${a}${b}${c}`),
  headerValue.filter((v) => !NAMESPACE.test(v)),
);
const TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz".split('');
const tokenName = fc.string({ unit: fc.constantFrom(...TOKEN_CHARS), minLength: 1, maxLength: 20 });
const BAD_TTLS = ['-1', '1.5', 'abc', '1e3', '0x10', '9999999999', '+5', '5s', '５', '1 2', 'Infinity', 'NaN', '-0', '0.0', '٣'];

describe('POST /api/cache/v1/request/save and /retrieve', () => {
  it(
    'wrong types and bad x-relay-cache-namespace / x-relay-cache-ttl headers are a 400 naming the field or header',
    async () => {
      const arb = fc.oneof(
        fc
          .record({ ep: fc.constantFrom<Ep>('save', 'retrieve'), field: fc.constantFrom('', 'request', 'response'), value: anyValue })
          .filter(({ ep, field, value }) => !(ep === 'retrieve' && field === 'response') && typeOf(value) !== 'object')
          .map(({ ep, field, value }) => {
            const body: Record<string, unknown> = { request: { model: 'm' }, ...(ep === 'save' ? { response: { ok: 1 } } : {}) };
            return { ep, body: field === '' ? value : { ...body, [field]: value }, headers: {}, names: field === '' ? 'body' : `body/${field}` };
          }),
        fc
          .record({ ep: fc.constantFrom<Ep>('save', 'retrieve'), field: fc.constantFrom('request', 'response') })
          .filter(({ ep, field }) => ep === 'save' || field === 'request')
          .map(({ ep, field }) => {
            const body: Record<string, unknown> = { request: { model: 'm' }, ...(ep === 'save' ? { response: { ok: 1 } } : {}) };
            delete body[field];
            return { ep, body, headers: {}, names: `body/${field}` };
          }),
        fc.record({ ep: fc.constantFrom<Ep>('save', 'retrieve'), ns: badNamespace, body: saveArb }).map(({ ep, ns, body }) => ({
          ep,
          body,
          headers: { 'x-relay-cache-namespace': ns },
          names: 'x-relay-cache-namespace',
        })),
        fc.record({ ttl: fc.oneof(fc.constantFrom(...BAD_TTLS).map(asHeaderBytes), headerValue.filter((v) => !/^[0-9]{1,9}$/.test(v))), body: saveArb }).map(({ ttl, body }) => ({
          ep: 'save' as Ep,
          body,
          headers: { 'x-relay-cache-ttl': ttl },
          names: 'x-relay-cache-ttl',
        })),
      );
      await fc.assert(
        fc.asyncProperty(arb, async ({ ep, body, headers, names }) => {
          const a = await call(`POST ${EP_PATH[ep]}`, 'POST', EP_PATH[ep], {
            headers: { 'content-type': JSON_CT, ...headers },
            body: JSON.stringify(body),
          });
          expectRelayError(a, 400, 'RELAY_ERR_VALIDATION', `${ep} ${names}`);
          expect(a.json.message, show(a)).toContain(names);
        }),
        { numRuns: 90 },
      );
    },
    PROP_TIMEOUT,
  );

  it(
    'a hostile but valid entry saves (201, the sha256 of its request) and is retrieved unchanged in its namespace',
    async () => {
      const arb = fc.record(
        {
          request: hostileObject,
          response: hostileObject,
          ns: validNamespace,
          ttl: fc.integer({ min: 5, max: 999_999_999 }).map(String),
          project: headerValue,
        },
        { requiredKeys: ['request', 'response'] },
      );
      await fc.assert(
        fc.asyncProperty(arb, async ({ request, response, ns, ttl, project }) => {
          const headers: Record<string, string> = { 'content-type': JSON_CT };
          if (ns !== undefined) headers['x-relay-cache-namespace'] = ns;
          if (ttl !== undefined) headers['x-relay-cache-ttl'] = ttl;
          if (project !== undefined) headers['x-pezzo-project-id'] = project;
          const before = Date.now();
          const saved = await call('POST /api/cache/v1/request/save', 'POST', EP_PATH.save, { headers, body: JSON.stringify({ request, response }) });
          expect(saved.status, show(saved)).toBe(201);
          expect(saved.json, show(saved)).toEqual({ hash: cacheHash(request), exp: expect.any(String) });
          const ttlMs = (ttl === undefined ? relay.config.cacheTtl : Math.max(1, Number(ttl))) * 1000;
          const exp = Date.parse(saved.json.exp);
          expect(exp, show(saved)).toBeGreaterThanOrEqual(before + ttlMs - 1000);
          expect(exp, show(saved)).toBeLessThanOrEqual(Date.now() + ttlMs + 1000);

          const got = await call('POST /api/cache/v1/request/retrieve', 'POST', EP_PATH.retrieve, { headers, body: JSON.stringify({ request }) });
          expect(got.status, show(got)).toBe(200);
          expect(got.json.hit).toBe(true);
          expect(JSON.stringify(got.json.data)).toBe(JSON.stringify(response));
        }),
        { numRuns: 60 },
      );
    },
    PROP_TIMEOUT,
  );

  it(
    'retrieve of a request never saved is a 404 miss ({hit:false, data:null}), or a 200 miss for the Pezzo client',
    async () => {
      const arb = fc.record({
        request: hostileObject,
        nonce: fc.uuid(),
        pezzo: fc.option(headerValue, { nil: undefined }),
        ns: fc.option(validNamespace, { nil: undefined }),
      });
      await fc.assert(
        fc.asyncProperty(arb, async ({ request, nonce, pezzo, ns }) => {
          const headers: Record<string, string> = { 'content-type': JSON_CT };
          if (pezzo !== undefined) headers['x-pezzo-api-key'] = pezzo;
          if (ns !== undefined) headers['x-relay-cache-namespace'] = ns;
          const a = await call('POST /api/cache/v1/request/retrieve', 'POST', EP_PATH.retrieve, {
            headers,
            body: JSON.stringify({ request: { ...request, [HK]: nonce } }),
          });
          if (pezzo !== undefined) {
            expect(a.status, show(a)).toBe(200);
            expect(a.json, show(a)).toEqual({ hit: false, data: null });
          } else {
            expectRelayError(a, 404, 'RELAY_ERR_CACHE_MISS', 'miss');
            expect(a.json, show(a)).toMatchObject({ hit: false, data: null });
          }
        }),
        { numRuns: 60 },
      );
    },
    PROP_TIMEOUT,
  );

  it(
    'an entry over RELAY_CACHE_MAX_ENTRY_BYTES is a 413 RELAY_ERR_ENTRY_TOO_LARGE',
    async () => {
      const small = await startRelay({ cacheUrl: 'memory', maxBodyBytes: MAX_BODY, cacheMaxEntryBytes: 4096, upstreamUrl: up.url });
      try {
        await fc.assert(
          fc.asyncProperty(fc.integer({ min: 4_200, max: 60_000 }), fc.constantFrom('x', 'é', '\u0000'), async (n, ch) => {
            const a = await call('POST /api/cache/v1/request/save', 'POST', EP_PATH.save, {
              base: small.url,
              body: JSON.stringify({ request: { n }, response: { text: ch.repeat(Math.ceil(n / (Buffer.byteLength(JSON.stringify(ch)) - 2))) } }),
            });
            expectRelayError(a, 413, 'RELAY_ERR_ENTRY_TOO_LARGE', `entry of ~${n} bytes`);
          }),
          { numRuns: 15 },
        );
        expect(small.logs.filter((l) => l.includes('"level":50'))).toEqual([]);
      } finally {
        await small.close();
      }
    },
    PROP_TIMEOUT,
  );
});

// ───────────────────────────── GET /api/reporting/v2/requests (query strings) ─────────────────────────────

const enc = encodeURIComponent;
const KNOWN_QUERY = new Set(['limit', 'cursor', 'from', 'to', 'environment', 'promptId', 'client', 'model', 'status', 'cacheHit']);
const safeDecode = (s: string) => {
  try {
    return decodeURIComponent(s.replaceAll('+', ' '));
  } catch {
    return s;
  }
};
/** A query value, already in its wire form (percent-encoded, or deliberately badly encoded). */
const queryValue = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }).filter((s) => wellFormed(s)).map(enc) },
  { weight: 2, arbitrary: fc.constantFrom('%ff', '%', '%00', '%ED%A0%80', '%C0%AF', '+', '%2B', 'a+b', '%26', '%3D', '=', '==', '', '%u0041', '..%2F..%2F') },
  { weight: 1, arbitrary: fc.integer({ min: 200, max: 1500 }).map((n) => 'q'.repeat(n)) },
);
const isoDate = fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }).map((d) => d.toISOString());
const propertyName = fc.stringMatching(/^[A-Za-z0-9_.-]{1,64}$/);
const unknownKey = fc
  .oneof(
    fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }).filter((s) => wellFormed(s)).map(enc),
    fc.constantFrom('__proto__', 'constructor', 'prototype', '__proto__[x]', 'constructor[prototype][x]', 'a[]', 'a[b]', '%ff', '%', 'toString', 'hasOwnProperty', 'LIMIT', 'Status', 'property', 'propertyx.a', 'groupBy'),
  )
  .filter((k) => {
    const d = safeDecode(k);
    return !KNOWN_QUERY.has(d) && !d.startsWith('property.') && !k.includes('&') && !k.includes('#') && d !== '';
  });
const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64url');

interface QueryCase {
  pairs: Array<[string, string]>;
  bad?: { what: string; codes: string[] };
  limit: number;
}

const validQuery = fc.record(
  {
    limit: fc.integer({ min: 1, max: 1000 }).map(String),
    status: fc.integer({ min: 100, max: 599 }).map(String),
    cacheHit: fc.constantFrom('true', 'false'),
    from: isoDate.map(enc),
    to: isoDate.map(enc),
    environment: queryValue,
    promptId: queryValue,
    client: queryValue,
    model: queryValue,
    cursor: fc.oneof(
      fc.constant('REAL'),
      fc.tuple(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), fc.string({ unit: 'binary', maxLength: 30 })).map(([t, id]) => b64(JSON.stringify([t, id]))),
    ),
    props: fc.dictionary(propertyName, queryValue, { maxKeys: 3 }),
    unknown: fc.array(fc.tuple(unknownKey, queryValue), { maxLength: 4 }),
  },
  { requiredKeys: [] },
);
const VALIDATION = ['RELAY_ERR_VALIDATION'];
interface BadQuery {
  pairs: Array<[string, string]>;
  what: string;
  codes: string[];
}
const bq = (pairs: Array<[string, string]>, what: string, codes: string[]): BadQuery => ({ pairs, what, codes });
const badQueryPairs: fc.Arbitrary<BadQuery> = fc.oneof(
  fc.constantFrom('0', '-1', '1001', 'abc', '1e400', '', 'NaN', 'Infinity', '99999999999999999999', '5abc', '1%2C2', '%ff').map((v) => bq([['limit', v]], `limit=${v}`, VALIDATION)),
  fc.constant(bq([['limit', '1'], ['limit', '2']], 'limit twice', VALIDATION)),
  fc.constantFrom('99', '600', 'abc', '', 'NaN', '1e400', '-200', '%ff').map((v) => bq([['status', v]], `status=${v}`, VALIDATION)),
  fc.constantFrom('yes', 't', '', '2', 'on', 'null', '%ff', 'truee', 'TRUE%00').map((v) => bq([['cacheHit', v]], `cacheHit=${v}`, VALIDATION)),
  fc.tuple(fc.constantFrom('from', 'to'), badTimestamp.filter((s) => wellFormed(s))).map(([k, v]) => bq([[k, enc(v)]], `${k}=${v}`, VALIDATION)),
  fc
    .oneof(
      fc.string({ unit: 'binary', maxLength: 100 }).filter((s) => wellFormed(s)),
      fc.constantFrom(b64('[1]'), b64('[1.5,"x"]'), b64('["x",1]'), b64('{}'), b64('[9007199254740993,"x"]'), b64('[1,"x",2]'), b64('null'), '%ff', '!!!!', '====')
    )
    .map((v) => bq([['cursor', enc(v)]], `cursor=${v}`, ['RELAY_ERR_INVALID_CURSOR'])),
  fc.integer({ min: 513, max: 2000 }).map((n) => bq([['cursor', 'A'.repeat(n)]], `cursor of ${n} chars`, VALIDATION)),
  fc
    .oneof(
      fc.constant(''),
      fc.integer({ min: 65, max: 200 }).map((n) => 'p'.repeat(n)),
      fc.tuple(propertyName, fc.constantFrom(' ', '"', '\\', '$', '[', ']', "'", '/', '\u00e9', '*', '\u0000')).map(([a, b]) => a + b),
    )
    .map((name) => bq([[`property.${enc(name)}`, 'x']], `property.${name}`, VALIDATION)),
  propertyName.map((name) => bq([[`property.${name}`, 'a'], [`property.${name}`, 'b']], `property.${name} twice`, VALIDATION)),
  fc.constantFrom('from', 'to', 'environment', 'promptId', 'client', 'model', 'status', 'cacheHit', 'cursor').map((k) =>
    bq(
      [[k, k === 'from' || k === 'to' ? enc(T_REQ) : k === 'status' ? '200' : k === 'cacheHit' ? 'true' : k === 'cursor' ? 'REAL' : 'a'], [k, k === 'from' || k === 'to' ? enc(T_RES) : k === 'status' ? '201' : k === 'cacheHit' ? 'false' : k === 'cursor' ? 'REAL' : 'b']],
      `${k} twice`,
      [...VALIDATION, 'RELAY_ERR_INVALID_CURSOR'],
    ),
  ),
);
const queryCase: fc.Arbitrary<QueryCase> = fc
  .record({ valid: validQuery, bad: fc.option(badQueryPairs, { nil: undefined }), shuffle: fc.nat() })
  .map(({ valid, bad, shuffle }) => {
    const pairs: Array<[string, string]> = [];
    for (const k of ['limit', 'status', 'cacheHit', 'from', 'to', 'environment', 'promptId', 'client', 'model', 'cursor'] as const) {
      const v = valid[k];
      if (v !== undefined && !bad?.pairs.some(([bk]) => bk === k)) pairs.push([k, v]);
    }
    for (const [name, v] of Object.entries(valid.props ?? {})) if (!bad?.pairs.some(([bk]) => bk === `property.${name}`)) pairs.push([`property.${name}`, v]);
    for (const p of valid.unknown ?? []) pairs.push(p);
    if (bad) pairs.splice(shuffle % (pairs.length + 1), 0, ...bad.pairs);
    const limit = Number(valid.limit ?? 50);
    return { pairs, limit, ...(bad ? { bad: { what: bad.what, codes: bad.codes } } : {}) };
  })
  .filter((q) => q.pairs.reduce((n, [k, v]) => n + k.length + v.length + 2, 0) < 12_000);

describe('GET /api/reporting/v2/requests', () => {
  it(
    'hostile query strings: a valid one lists (200 {items, nextCursor}), one bad parameter is a 400 naming it',
    async () => {
      await fc.assert(
        fc.asyncProperty(queryCase, async (q) => {
          const qs = q.pairs.map(([k, v]) => `${k}=${v === 'REAL' ? realCursor : v}`).join('&');
          const a = await call('GET /api/reporting/v2/requests', 'GET', `/api/reporting/v2/requests?${qs}`);
          if (q.bad) {
            expectRelayError(a, 400, q.bad.codes, q.bad.what);
          } else {
            const ctx = `?${qs.slice(0, 300)} → ${show(a)}`;
            expect(a.status, ctx).toBe(200);
            expect(Array.isArray(a.json.items), ctx).toBe(true);
            expect(a.json.items.length, ctx).toBeLessThanOrEqual(q.limit);
            expect(a.json.nextCursor === null || typeof a.json.nextCursor === 'string', ctx).toBe(true);
          }
        }),
        { numRuns: 200 },
      );
    },
    PROP_TIMEOUT,
  );
});

// ───────────────────────────── GET /api/reporting/v2/requests/:id ─────────────────────────────

const BAD_PERCENT = ['%', '%f', '%zz', '%ff', '%C0%AF', '%ED%A0%80', '%F4%90%80%80', '%80', 'a%', 'abc%2', '%E2%82', '%%', '%G0'];

describe('GET /api/reporting/v2/requests/:id', () => {
  it(
    'hostile ids: unknown → 404, too long → 400/404, stored → 200 with that id',
    async () => {
      const arb = fc.oneof(
        { weight: 5, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 64 }).filter((s) => wellFormed(s) && s.length <= 64 && !['.', '..', 'export'].includes(s)).map((id) => ({ id: enc(id), kind: 'unknown' as const })) },
        { weight: 1, arbitrary: fc.constantFrom('%00', 'null', 'undefined', '0', '-1', "1'%20OR%20'1'%3D'1", '%2F', '..%2F..%2Fetc%2Fpasswd', '%252e', 'a%2Fb', '__proto__', 'constructor', '%E2%80%AE').map((id) => ({ id, kind: 'unknown' as const })) },
        { weight: 1, arbitrary: fc.integer({ min: 65, max: 400 }).map((n) => ({ id: 'i'.repeat(n), kind: 'long' as const })) },
        { weight: 2, arbitrary: fc.nat().map((i) => ({ id: 'STORED', kind: 'stored' as const, i })) },
      );
      await fc.assert(
        fc.asyncProperty(arb, async (c) => {
          const id = c.kind === 'stored' ? reportIds[(c as { i: number }).i % reportIds.length]! : c.id;
          const a = await call('GET /api/reporting/v2/requests/:id', 'GET', `/api/reporting/v2/requests/${id}`);
          if (c.kind === 'stored') {
            expect(a.status, show(a)).toBe(200);
            expect(a.json.id).toBe(id);
          } else if (c.kind === 'long') {
            expectRelayError(a, [400, 404], ['RELAY_ERR_VALIDATION', 'RELAY_ERR_NOT_FOUND'], `id of ${id.length} chars`);
          } else {
            expectRelayError(a, 404, 'RELAY_ERR_NOT_FOUND', `id ${id}`);
          }
        }),
        { numRuns: 130 },
      );
    },
    PROP_TIMEOUT,
  );

  it(
    'an id (or a proxied path) that is not valid percent-encoding is answered in the RELAY_ERR_* shape, never FST_ERR_*',
    async () => {
      const arb = fc.record({ bad: fc.constantFrom(...BAD_PERCENT), pre: fc.stringMatching(/^[a-z0-9]{0,5}$/), post: fc.stringMatching(/^[a-z0-9]{0,5}$/), proxy: fc.boolean() });
      await fc.assert(
        fc.asyncProperty(arb, async ({ bad, pre, post, proxy }) => {
          const path = proxy ? `/v1/chat/${pre}${bad}${post}` : `/api/reporting/v2/requests/${pre}${bad}${post}`;
          const a = await call(proxy ? 'POST /v1/chat/completions (proxy)' : 'GET /api/reporting/v2/requests/:id', proxy ? 'POST' : 'GET', path, proxy ? { body: '{}' } : {});
          expect(a.status, `${path} → ${show(a)}`).toBeLessThan(500);
          if (a.headers.get('x-relay-cache') === null) expectRelayError(a, [400, 404], ['RELAY_ERR_BAD_REQUEST', 'RELAY_ERR_NOT_FOUND', 'RELAY_ERR_VALIDATION'], path);
        }),
        { numRuns: 20 },
      );
    },
    PROP_TIMEOUT,
  );
});

// ───────────────────────────── POST /api/cache/v1/import (NDJSON) ─────────────────────────────

const hex64 = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex'));
const entryKey = fc.tuple(validNamespace, hex64).map(([ns, h]) => `${ns}:${h}`);
const safeHeaders = fc.dictionary(
  fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789-'.split('')), minLength: 1, maxLength: 16 }).map((s) => `x-${s}`),
  fc.string({ unit: fc.constantFrom(...HEADER_CHARS.slice(1, 95)), minLength: 1, maxLength: 30 }).map((s) => s.trim()).filter((s) => s.length > 0),
  { maxKeys: 3 },
);
const cachedValue = fc.record(
  {
    v: fc.constant(1),
    status: fc.integer({ min: 200, max: 299 }),
    headers: safeHeaders,
    body: safeTree,
    sse: hostileString,
    reportId: hostileString,
    costUsd: fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constant(null)),
  },
  { requiredKeys: ['v', 'status', 'headers', 'body'] },
);
const liveEntry = fc
  .record({ key: entryKey, createdAt: fc.integer({ min: 0, max: NOW }), ttl: fc.integer({ min: 3_600_000, max: 10 * 365 * 86_400_000 }), value: cachedValue })
  .map(({ key, createdAt, ttl, value }) => ({ key, createdAt, expiresAt: NOW + ttl, value }));
const expiredEntry = fc
  .record({ key: entryKey, expiresAt: fc.integer({ min: 0, max: NOW - 60_000 }), back: fc.nat(), value: cachedValue })
  .map(({ key, expiresAt, back, value }) => ({ key, createdAt: Math.max(0, expiresAt - back), expiresAt, value }));
const HUGE = '"__HUGE__"';
const badLine: fc.Arbitrary<string> = fc.oneof(
  liveEntry.map((e) => JSON.stringify(e)).chain((t) => fc.integer({ min: 1, max: t.length - 1 }).map((i) => t.slice(0, i))),
  fc.constantFrom('1', '"s"', 'null', '[]', 'true', '[{}]', '{', '}', 'NaN', "{'key':1}", '\u0000', 'garbage', '{"key":"a:b",}'),
  liveEntry.map((e) => JSON.stringify({ ...e, extra: 1 })),
  fc
    .tuple(liveEntry, hex64, fc.constantFrom('missing', 5, null, '', 'nocolon', 'upper', 'short', 'long', 'badns', 'longns', 'emptyns', 'newline', 'double', 'nonhex'))
    .map(([e, h, k]) => {
      const ns = 'ns';
      const key =
        k === 'missing' ? undefined : k === 'upper' ? `${ns}:${'A'.repeat(64)}` : k === 'short' ? `${ns}:${h.slice(1)}` : k === 'long' ? `${ns}:${h}0`
          : k === 'badns' ? `bad ns!:${h}` : k === 'longns' ? `${'a'.repeat(129)}:${h}` : k === 'emptyns' ? `:${h}` : k === 'newline' ? `${ns}:${h}\n`
            : k === 'double' ? `${ns}::${h}` : k === 'nonhex' ? `${ns}:g${h.slice(1)}` : k;
      return JSON.stringify({ ...e, key });
    }),
  fc
    .tuple(liveEntry, fc.constantFrom('createdAt', 'expiresAt'), fc.constantFrom<unknown>(-1, 1.5, '1', null, 2 ** 53, true, {}, HUGE, 'missing'))
    .map(([e, field, v]) => {
      const o: Record<string, unknown> = { ...e, [field]: v };
      if (v === 'missing') delete o[field];
      return JSON.stringify(o).replace(JSON.stringify(HUGE), '1e400');
    }),
  liveEntry.map((e) => JSON.stringify({ ...e, createdAt: e.expiresAt + 1 })),
  fc
    .tuple(
      liveEntry,
      fc.constantFrom<Record<string, unknown> | string>(
        'missing', 'array', 'string', 'null', { v: 2 }, { v: '1' }, { v: undefined }, { status: 199 }, { status: 300 }, { status: 404 },
        { status: 500 }, { status: 200.5 }, { status: '200' }, { status: null }, { status: undefined }, { headers: [] }, { headers: null },
        { headers: 'x' }, { headers: { a: 1 } }, { headers: { a: null } }, { headers: undefined }, { sse: 5 }, { sse: {} }, { reportId: 5 },
        { costUsd: '1' }, { costUsd: {} },
      ),
    )
    .map(([e, m]) => {
      const value = m === 'missing' ? undefined : m === 'array' ? [e.value] : m === 'string' ? 'x' : m === 'null' ? null : { ...e.value, ...(m as Record<string, unknown>) };
      return JSON.stringify({ ...e, value });
    }),
);
const blankLine = fc.constantFrom('', '   ', '\t', '\r');
type ImportLine = { kind: 'live' | 'expired' | 'blank'; text: string };
const importLine: fc.Arbitrary<ImportLine> = fc.oneof(
  { weight: 4, arbitrary: liveEntry.map((e) => ({ kind: 'live' as const, text: JSON.stringify(e) })) },
  { weight: 1, arbitrary: expiredEntry.map((e) => ({ kind: 'expired' as const, text: JSON.stringify(e) })) },
  { weight: 1, arbitrary: blankLine.map((text) => ({ kind: 'blank' as const, text })) },
);

describe('POST /api/cache/v1/import', () => {
  it(
    'hostile NDJSON: valid lines import ({imported, skipped} exact), one bad line is a 400 naming it, nothing else is accepted',
    async () => {
      const arb = fc.oneof(
        { weight: 6, arbitrary: fc.record({ lines: fc.array(importLine, { maxLength: 8 }), bad: fc.option(fc.tuple(badLine, fc.nat()), { nil: undefined }), crlf: fc.boolean(), finalNewline: fc.boolean(), ct: fc.constantFrom(NDJSON_CT, `${NDJSON_CT}; charset=utf-8`) }) },
        { weight: 1, arbitrary: fc.record({ lines: fc.array(importLine, { minLength: 1, maxLength: 3 }), ct: fc.constantFrom(JSON_CT, 'text/plain', '', 'application/x-ndjsonx', 'multipart/form-data; boundary=x', undefined, 'application/jsonl') }) },
        { weight: 1, arbitrary: fc.integer({ min: MAX_BODY + 1, max: 3 * MAX_BODY }).map((n) => ({ oversize: n })) },
      );
      await fc.assert(
        fc.asyncProperty(arb, async (c) => {
          if ('oversize' in c) {
            const a = await call('POST /api/cache/v1/import', 'POST', '/api/cache/v1/import', { headers: { 'content-type': NDJSON_CT }, body: `${'\n'.repeat(c.oversize)}` });
            expectRelayError(a, 413, 'RELAY_ERR_BODY_TOO_LARGE', 'oversized NDJSON');
            return;
          }
          const lines = [...c.lines];
          let badAt: number | undefined;
          if ('bad' in c && c.bad) {
            badAt = c.bad[1] % (lines.length + 1);
            lines.splice(badAt, 0, { kind: 'blank', text: c.bad[0] });
          }
          const eol = 'crlf' in c && c.crlf ? '\r\n' : '\n';
          const text = lines.map((l) => l.text).join(eol) + ('finalNewline' in c && c.finalNewline ? eol : '');
          const headers: Record<string, string> = c.ct === undefined ? {} : { 'content-type': c.ct };
          const a = await call('POST /api/cache/v1/import', 'POST', '/api/cache/v1/import', { headers, body: Buffer.from(text, 'utf8') });
          if (!('bad' in c)) {
            expectRelayError(a, 415, 'RELAY_ERR_UNSUPPORTED_MEDIA_TYPE', `content-type ${c.ct}`);
          } else if (badAt !== undefined) {
            expectRelayError(a, 400, 'RELAY_ERR_VALIDATION', `bad line ${badAt + 1}: ${lines[badAt]!.text.slice(0, 100)}`);
            expect(a.json.message, show(a)).toMatch(new RegExp(`^line ${badAt + 1}: `));
          } else {
            expect(a.status, show(a)).toBe(200);
            expect(a.json).toEqual({
              imported: lines.filter((l) => l.kind === 'live').length,
              skipped: lines.filter((l) => l.kind === 'expired').length,
            });
          }
        }),
        { numRuns: 150 },
      );
    },
    PROP_TIMEOUT,
  );

  const IMPORT_RULES = {
    'invalid UTF-8': 'utf8',
    'a number out of range': 'huge',
    'nesting past the import depth limit': 'deep',
    'a __proto__ key': 'proto',
    'a constructor.prototype key': 'constructor',
  } as const;
  for (const [what, kind] of Object.entries(IMPORT_RULES)) {
    it(
      `an NDJSON line with ${what} is a 400, as on the rest of /api`,
      async () => {
        // Lines nest deeper than API bodies may (an entry carries an upstream answer): LINE_MAX_DEPTH.
        const arb = fc.record({ entry: liveEntry, bytes: invalidUtf8Bytes, lit: fc.constantFrom(...HUGE_NUMBERS), depth: fc.integer({ min: LINE_MAX_DEPTH, max: 2_000 }) });
        await fc.assert(
          fc.asyncProperty(arb, async ({ entry, bytes, lit, depth }) => {
            const marker = '"__MARK__"';
            const line = JSON.stringify({ ...entry, value: { ...entry.value, body: { x: '__MARK__' } } });
            const [head, tail] = line.split(marker) as [string, string];
            const middle =
              kind === 'utf8' ? Buffer.concat([Buffer.from('"a'), bytes, Buffer.from('b"')])
                : kind === 'huge' ? Buffer.from(lit)
                  : kind === 'deep' ? Buffer.from(nested(depth, 'mixed'))
                    : kind === 'proto' ? Buffer.from('{"__proto__":{"polluted":true}}')
                      : Buffer.from('{"constructor":{"prototype":{"polluted":true}}}');
            const a = await call('POST /api/cache/v1/import', 'POST', '/api/cache/v1/import', {
              headers: { 'content-type': NDJSON_CT },
              body: Buffer.concat([Buffer.from(head), middle, Buffer.from(tail)]),
            });
            expectRelayError(a, 400, ['RELAY_ERR_VALIDATION', 'RELAY_ERR_INVALID_JSON', 'RELAY_ERR_JSON_TOO_DEEP', 'RELAY_ERR_FORBIDDEN_KEY'], `import line with ${what}`);
          }),
          { numRuns: 10 },
        );
      },
      PROP_TIMEOUT,
    );
  }

  it(
    'an imported entry is either refused or replayable: a proxy hit on it is a complete 2xx, never a 500 or a dropped connection',
    async () => {
      const badHeader = fc.oneof(
        fc.tuple(fc.constantFrom('bad name', '', 'a:b', 'é', '(x)', 'x\u0000', 'x\r\ny'), fc.constant('v')),
        fc.tuple(fc.constant('x-bad'), fc.constantFrom('a\r\nb: c', 'a\nb', 'a\u0000b', '\u0100', '😀', 'a\rb')),
        fc.tuple(fc.constantFrom('transfer-encoding', 'content-length', 'connection', 'content-encoding'), fc.constantFrom('chunked', '999', '-1', 'close, x', 'gzip', 'abc')),
      );
      await fc.assert(
        fc.asyncProperty(badHeader, fc.uuid(), async ([name, value], nonce) => {
          const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: nonce }] };
          const hash = cacheHash(proxyKeyObject('POST', '/v1/chat/completions', body, {}));
          const line = JSON.stringify({
            key: `anonymous:${hash}`,
            createdAt: NOW,
            expiresAt: NOW + 3_600_000,
            value: { v: 1, status: 200, headers: { 'content-type': 'application/json', [name]: value }, body: { ok: nonce } },
          });
          const imp = await call('POST /api/cache/v1/import', 'POST', '/api/cache/v1/import', { headers: { 'content-type': NDJSON_CT }, body: line });
          if (imp.status === 400) return expectRelayError(imp, 400, 'RELAY_ERR_VALIDATION', `header ${JSON.stringify(name)}: ${JSON.stringify(value)}`);
          expect(imp.status, show(imp)).toBe(200);
          let a: Answer;
          try {
            a = await call('POST /v1/chat/completions (proxy)', 'POST', '/v1/chat/completions', { body: JSON.stringify(body) });
          } catch (e) {
            throw new Error(`replaying an imported entry with header ${JSON.stringify(name)}: ${JSON.stringify(value)} dropped the connection: ${(e as Error).cause ?? e}`);
          }
          expect(a.status, `imported header ${JSON.stringify(name)}: ${JSON.stringify(value)} → ${show(a)}`).toBe(200);
          expect(JSON.parse(a.text)).toEqual({ ok: nonce });
        }),
        { numRuns: 30 },
      );
    },
    PROP_TIMEOUT,
  );
});

// ───────────────────────────── the proxy ─────────────────────────────

/** What test/helpers/fake-upstream.ts answers for these body bytes (no failure set). */
function fakeUpstreamStatus(body: Buffer): number {
  const raw = body.toString('utf8');
  if (!raw) return 200;
  try {
    JSON.parse(raw);
    return 200;
  } catch {
    return 400;
  }
}

const chatBase = fc
  .record(
    {
      model: fc.oneof(fc.constantFrom('gpt-4o-mini', 'gpt-4o', 'claude-3-5-haiku'), hostileString),
      messages: fc.array(fc.record({ role: fc.constantFrom('user', 'system', 'assistant'), content: fc.oneof(hostileString, safeTree) }), { minLength: 1, maxLength: 3 }),
      stream: fc.boolean(),
      temperature: hostileNumber,
      extra: safeTree,
    },
    { requiredKeys: ['model', 'messages'] },
  )
  .map((b) => JSON.parse(JSON.stringify(b)) as Record<string, unknown>);

const proxyHeaders = fc.record(
  {
    'x-relay-cache-namespace': fc.oneof(validNamespace, badNamespace),
    'x-relay-cache-ttl': fc.oneof(fc.integer({ min: 0, max: 99_999_999_999 }).map(String), fc.constantFrom(...BAD_TTLS).map(asHeaderBytes), headerValue),
    'cache-control': fc.oneof(
      fc.constantFrom('no-store', 'no-cache', 'max-age=0', 'max-age=abc', 'max-age=99999999999', 'no-cache, no-store', 'NO-STORE', '=,,=', 'max-age="5"', 'private, max-age=-1', 'max-age'),
      headerValue,
    ),
    'x-relay-cache': fc.constantFrom('on', 'off', 'ON', 'maybe', 'x'),
    'x-relay-client': headerValue,
    'x-relay-client-version': headerValue,
    'x-relay-environment': headerValue,
    'x-relay-prompt-id': headerValue,
    'x-relay-user-id': headerValue,
    'x-relay-trace-id': headerValue,
    authorization: headerValue,
    'openai-beta': headerValue,
    'anthropic-version': headerValue,
    properties: fc.dictionary(tokenName, headerValue, { maxKeys: 3 }),
    other: fc.dictionary(tokenName.map((n) => `x-h-${n}`), headerValue, { maxKeys: 3 }),
  },
  { requiredKeys: [] },
);

describe('the proxy (POST /v1/chat/completions)', () => {
  it(
    'hostile bodies and headers are forwarded unchanged: the answer is the upstream\'s (or a hit), or a documented relay 4xx',
    async () => {
      const arb = fc.record({
        // Unparsable content-type headers: see the test after this one.
        bc: chatBase.chain(hostileBodies).filter((bc) => bc.contentType === undefined || !UNPARSABLE_TYPES.includes(bc.contentType)),
        h: proxyHeaders,
        fail: fc.option(fc.constantFrom(400, 401, 404, 429, 500, 502, 503, 504), { nil: undefined, freq: 4 }),
      });
      await fc.assert(
        fc.asyncProperty(arb, async ({ bc, h, fail }) => {
          up.reset();
          if (fail !== undefined) up.failWith(fail, { error: { message: `upstream says ${fail}`, type: 'fake' } });
          const headers: Record<string, string> = {};
          if (bc.contentType !== undefined) headers['content-type'] = bc.contentType;
          const { properties, other, ...plain } = h;
          for (const [k, v] of Object.entries(plain)) if (v !== undefined && !/only-if-cached/i.test(v)) headers[k] = v;
          for (const [k, v] of Object.entries(properties ?? {})) headers[`x-relay-property-${k}`] = v;
          for (const [k, v] of Object.entries(other ?? {})) headers[k] = v;
          const calls = up.calls.length;
          let a: Answer;
          try {
            a = await call('POST /v1/chat/completions (proxy)', 'POST', '/v1/chat/completions', { headers, body: bc.body });
          } catch (e) {
            throw new Error(`${bc.label}: the relay dropped the connection: ${(e as Error).cause ?? e}`);
          }
          const ns = headers['x-relay-cache-namespace'];
          const ctx = `${bc.label}, upstream ${fail ?? 'normal'} → ${show(a)}`;
          if (bc.body.length > MAX_BODY) {
            expectRelayError(a, 413, 'RELAY_ERR_BODY_TOO_LARGE', ctx);
          } else if (ns !== undefined && !NAMESPACE.test(ns)) {
            expectRelayError(a, 400, 'RELAY_ERR_VALIDATION', ctx);
            expect(a.json.message).toContain('x-relay-cache-namespace');
            expect(up.calls.length, 'a refused call never reaches the upstream').toBe(calls);
          } else {
            const cache = a.headers.get('x-relay-cache');
            expect(['HIT', 'MISS', 'BYPASS', 'REFRESH', 'COALESCED'], ctx).toContain(cache);
            expect(a.headers.get('x-relay-report-id'), ctx).toEqual(expect.any(String));
            if (cache === 'HIT' || cache === 'COALESCED') {
              expect(a.status, ctx).toBe(200);
            } else {
              expect(up.calls.length, ctx).toBe(calls + 1);
              expect(Buffer.from(up.calls.at(-1)!.body, 'utf8').equals(Buffer.from(bc.body.toString('utf8'), 'utf8')), `${ctx}: body changed on the way`).toBe(true);
              expect(a.status, ctx).toBe(fail ?? fakeUpstreamStatus(bc.body));
              if (fail !== undefined) expect(a.json, ctx).toEqual({ error: { message: `upstream says ${fail}`, type: 'fake' } });
            }
          }
        }),
        { numRuns: 260 },
      );
      up.reset();
    },
    PROP_TIMEOUT,
  );

  it(
    'a malformed content-type header does not stop the proxy: the body is forwarded like any other',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...UNPARSABLE_TYPES), fc.uuid(), async (ct, nonce) => {
          up.reset();
          const a = await call('POST /v1/chat/completions (proxy)', 'POST', '/v1/chat/completions', {
            headers: { 'content-type': ct },
            body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"${nonce}"}]}`,
          });
          expect(a.status, `content-type ${JSON.stringify(ct)} → ${show(a)}`).toBe(200);
          expect(up.calls.length).toBe(1);
        }),
        { numRuns: 12 },
      );
    },
    PROP_TIMEOUT,
  );

  it(
    'numbers out of range in a JSON body are forwarded (the upstream decides), never a relay 500',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...HUGE_NUMBERS), fc.uuid(), async (lit, nonce) => {
          up.reset();
          const a = await call('POST /v1/chat/completions (proxy)', 'POST', '/v1/chat/completions', {
            body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"${nonce}"}],"temperature":${lit}}`,
          });
          expect(a.status, `temperature ${lit.slice(0, 20)}… → ${show(a)}`).toBe(200);
        }),
        { numRuns: 20 },
      );
    },
    PROP_TIMEOUT,
  );
});

// ───────────────────────────── raw sockets: what undici refuses to send ─────────────────────────────

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Writes the bytes, reads until the server closes (or `ms` pass), and parses every HTTP response in order. */
function rawExchange(bytes: Buffer, halfClose: boolean, ms = 5_000): Promise<{ responses: RawResponse[]; rest: string; timedOut: boolean }> {
  count('raw socket (malformed HTTP)');
  const port = Number(new URL(relay.url).port);
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, ms);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ ...parseResponses(Buffer.concat(chunks)), timedOut });
    });
    socket.write(bytes, () => {
      if (halfClose) socket.end();
    });
  });
}

function parseResponses(buf: Buffer): { responses: RawResponse[]; rest: string } {
  const responses: RawResponse[] = [];
  let at = 0;
  for (;;) {
    const headEnd = buf.indexOf('\r\n\r\n', at);
    if (headEnd < 0) break;
    const [statusLine, ...lines] = buf.subarray(at, headEnd).toString('latin1').split('\r\n');
    const m = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine ?? '');
    if (!m) break;
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    let bodyStart = headEnd + 4;
    let body = '';
    const status = Number(m[1]);
    if (status === 100) {
      at = bodyStart;
      continue;
    }
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (buf.length < bodyStart + n) break;
      body = buf.subarray(bodyStart, bodyStart + n).toString('utf8');
      bodyStart += n;
    } else if (headers['transfer-encoding'] === 'chunked') {
      let p = bodyStart;
      const parts: Buffer[] = [];
      for (;;) {
        const eol = buf.indexOf('\r\n', p);
        if (eol < 0) return { responses, rest: buf.subarray(at).toString('latin1') };
        const size = parseInt(buf.subarray(p, eol).toString('latin1'), 16);
        if (!Number.isFinite(size)) return { responses, rest: buf.subarray(at).toString('latin1') };
        if (size === 0) {
          p = eol + 4;
          break;
        }
        parts.push(buf.subarray(eol + 2, eol + 2 + size));
        p = eol + 2 + size + 2;
      }
      body = Buffer.concat(parts).toString('utf8');
      bodyStart = p;
    } else {
      body = buf.subarray(bodyStart).toString('utf8');
      bodyStart = buf.length;
    }
    responses.push({ status, headers, body });
    at = bodyStart;
  }
  return { responses, rest: buf.subarray(at).toString('latin1') };
}

function expectRawRelayError(r: RawResponse, status: number | number[], codes: string | string[], what: string): void {
  const ctx = `${what} → HTTP ${r.status} ${r.body.slice(0, 200)}`;
  expect([status].flat(), ctx).toContain(r.status);
  let json: any;
  expect(() => (json = JSON.parse(r.body)), ctx).not.toThrow();
  expect(json, ctx).toMatchObject({ statusCode: r.status, error: STATUS_CODES[r.status], message: expect.any(String) });
  expect([codes].flat(), ctx).toContain(json.code);
}

const RAW_TARGETS = ['/healthz', '/api/reporting/v2/request', '/api/cache/v1/request/save', '/api/reporting/v2/requests', '/v1/chat/completions'];
const VALID_REPORT = JSON.stringify({ request: { timestamp: T_REQ }, response: { timestamp: T_RES } });
const latin1 = (s: string) => Buffer.from(s, 'latin1');
const BAD_REQUEST = 'RELAY_ERR_BAD_REQUEST';

interface RawCase {
  label: string;
  bytes: Buffer;
  halfClose: boolean;
  /** the status of each response, in order; 'api' = the /api answer for a truncated JSON body (a 4xx) */
  expect: Array<{ status: number | number[]; codes: string[] }>;
}

const rawTarget = fc.constantFrom(...RAW_TARGETS);
const byteString = (min: number, max: number, lo: number, hi: number) =>
  fc.uint8Array({ minLength: min, maxLength: max, min: lo, max: hi }).map((a) => Buffer.from(a).toString('latin1'));
const badOne: RawCase['expect'] = [{ status: 400, codes: [BAD_REQUEST] }];

const rawCase: fc.Arbitrary<RawCase> = fc.oneof(
  // a request line whose method is not a method
  fc
    .tuple(byteString(1, 12, 0x00, 0xff), rawTarget)
    .filter(([m]) => /[^A-Z]/.test(m) && !/^[\r\n]/.test(m) && !m.includes('\r\n'))
    .map(([m, t]) => ({ label: `method ${JSON.stringify(m)}`, bytes: latin1(`${m} ${t} HTTP/1.1\r\nHost: x\r\n\r\n`), halfClose: false, expect: badOne })),
  // control or non-ASCII bytes in the request target
  fc
    .tuple(rawTarget, fc.constantFrom(...[...Array(32).keys()].filter((b) => b !== 10 && b !== 13), 0x7f, 0x80, 0xa0, 0xff), fc.stringMatching(/^[a-z]{0,4}$/))
    .map(([t, b, s]) => ({ label: `byte 0x${b.toString(16)} in the target`, bytes: Buffer.concat([latin1(`GET ${t}`), Buffer.from([b]), latin1(`${s} HTTP/1.1\r\nHost: x\r\n\r\n`)]), halfClose: false, expect: badOne })),
  // a version that is not HTTP/1.x
  fc
    .tuple(rawTarget, fc.constantFrom('HTTP/3', 'HTTP/1.1x', 'HTTP/1', 'HTTPS/1.1', 'http/1.1', 'HTTP/01.1', 'HTTP/9.9', 'HTTP/1.1 extra', 'HTTP/\u00ff'))
    .map(([t, v]) => ({ label: `version ${v}`, bytes: latin1(`GET ${t} ${v}\r\nHost: x\r\n\r\n`), halfClose: false, expect: badOne })),
  // a head over RELAY_MAX_HEADER_BYTES (16 KiB): one big header, or a long target
  fc
    .tuple(rawTarget, fc.integer({ min: 16 * 1024 + 1, max: 40 * 1024 }), fc.constantFrom('header', 'x-relay-cache-namespace', 'target'))
    .map(([t, n, how]) => ({
      label: `head of ${n} bytes (${how})`,
      bytes: latin1(
        how === 'target' ? `GET ${t}?${'a'.repeat(n)} HTTP/1.1\r\nHost: x\r\n\r\n` : `GET ${t} HTTP/1.1\r\nHost: x\r\n${how === 'header' ? 'X-Big' : how}: ${'v'.repeat(n)}\r\n\r\n`,
      ),
      halfClose: false,
      expect: [{ status: 431, codes: ['RELAY_ERR_HEADERS_TOO_LARGE'] }],
    })),
  // invalid chunked encoding
  fc
    .tuple(
      rawTarget.filter((t) => t !== '/healthz'),
      fc.oneof(
        byteString(1, 6, 0x21, 0x7e).filter((s) => /[^0-9a-fA-F;]/.test(s[0]!) ).map((s) => ({ what: `size ${JSON.stringify(s)}`, chunks: `${s}\r\n{}\r\n0\r\n\r\n`, half: false })),
        fc.integer({ min: 17, max: 40 }).map((n) => ({ what: `size of ${n} hex digits`, chunks: `${'f'.repeat(n)}\r\n{}\r\n0\r\n\r\n`, half: false })),
        fc.constant({ what: 'data longer than its size', chunks: '2\r\n{}XX\r\n0\r\n\r\n', half: false }),
        fc.constant({ what: 'no CRLF after the data', chunks: '2\r\n{}0\r\n\r\n', half: false }),
        fc.constant({ what: 'no final chunk (then EOF)', chunks: '2\r\n{}\r\n', half: true }),
        fc.constant({ what: 'bad trailer', chunks: '2\r\n{}\r\n0\r\nX-T: \u0001\r\n\r\n', half: false }),
        fc.constant({ what: 'negative size', chunks: '-2\r\n{}\r\n0\r\n\r\n', half: false }),
      ),
    )
    .map(([t, c]) => ({
      label: `chunked: ${c.what}`,
      bytes: latin1(`POST ${t} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${c.chunks}`),
      halfClose: c.half,
      expect: badOne,
    })),
  // wrong content-length
  fc
    .tuple(
      rawTarget,
      fc.oneof(
        fc.constantFrom('abc', '-1', '1.5', '5 5', '0x10', '+5', '99999999999999999999999', '', '1e3', '٣').map((v) => ({ what: `content-length ${JSON.stringify(v)}`, cl: [v], extra: '', half: false })),
        fc.tuple(fc.nat(40), fc.integer({ min: 41, max: 99 })).map(([a, b]) => ({ what: `two content-lengths ${a}, ${b}`, cl: [String(a), String(b)], extra: '', half: false })),
        fc.integer({ min: 0, max: 99 }).map((n) => ({ what: 'content-length with transfer-encoding', cl: [String(n)], extra: 'Transfer-Encoding: chunked\r\n', half: false })),
        fc.integer({ min: 1, max: 5_000 }).map((n) => ({ what: `content-length ${n} more than sent, then EOF`, cl: [String(VALID_REPORT.length + n)], extra: '', half: true })),
      ),
    )
    .map(([t, c]) => ({
      label: c.what,
      bytes: latin1(`POST ${t} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${c.cl.map((v) => `Content-Length: ${v}\r\n`).join('')}${c.extra}\r\n${VALID_REPORT}`),
      halfClose: c.half,
      expect: badOne,
    })),
  // header bytes that are not allowed
  fc
    .tuple(
      rawTarget,
      fc.oneof(
        fc.constantFrom(0x00, 0x01, 0x08, 0x0b, 0x0c, 0x7f, 0x1f).map((b) => ({ what: `byte 0x${b.toString(16)} in a value`, line: `X-V: a${String.fromCharCode(b)}b` })),
        fc.constantFrom(' ', '(', ')', ',', '/', '@', '[', '"', '{', '\u00e9', '\u0000').map((c) => ({ what: `${JSON.stringify(c)} in a name`, line: `X${c}Y: v` })),
        fc.constant({ what: 'CR inside a value', line: 'X-V: a\rb' }),
        fc.constant({ what: 'an obs-fold line', line: 'X-V: a\r\n folded' }),
        fc.constant({ what: 'an empty name', line: ': v' }),
        fc.constant({ what: 'a line without colon', line: 'NoColonHere' }),
        fc.constant({ what: 'a space before the colon', line: 'X-V : v' }),
      ),
    )
    .map(([t, c]) => ({ label: c.what, bytes: latin1(`GET ${t} HTTP/1.1\r\nHost: x\r\n${c.line}\r\n\r\n`), halfClose: false, expect: badOne })),
);

describe('raw sockets: malformed HTTP', () => {
  it(
    'every malformed request gets a complete HTTP answer in the RELAY_ERR_* shape (never a dropped connection)',
    async () => {
      await fc.assert(
        fc.asyncProperty(rawCase, async (c) => {
          const { responses, rest, timedOut } = await rawExchange(c.bytes, c.halfClose);
          const ctx = `${c.label}: ${JSON.stringify(c.bytes.toString('latin1').slice(0, 160))}`;
          expect(timedOut, `${ctx}: no answer within 5 s`).toBe(false);
          expect(responses.length, `${ctx}: got ${responses.length} complete responses (unparsed: ${JSON.stringify(rest.slice(0, 200))})`).toBe(c.expect.length);
          c.expect.forEach((e, i) => expectRawRelayError(responses[i]!, e.status, e.codes, `${ctx} [response ${i + 1}]`));
        }),
        { numRuns: 110 },
      );
    },
    PROP_TIMEOUT,
  );

  it(
    'content-length shorter than the body: the request it delimits still gets its own answer before the 400 for the rest',
    async () => {
      const arb = fc.tuple(
        fc.constantFrom('/api/reporting/v2/request', '/api/cache/v1/request/save', '/api/cache/v1/request/retrieve'),
        fc.integer({ min: 1, max: VALID_REPORT.length - 2 }),
      );
      await fc.assert(
        fc.asyncProperty(arb, async ([t, n]) => {
          const bytes = latin1(`POST ${t} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${n}\r\n\r\n${VALID_REPORT}`);
          const { responses, timedOut } = await rawExchange(bytes, false);
          const ctx = `content-length ${n} < body on ${t}`;
          expect(timedOut, `${ctx}: no answer within 5 s`).toBe(false);
          // The delimited request gets its own answer first; the garbage after it gets a 400 too, unless that
          // first answer already closed the connection (Node marks it `connection: close` after a parse error).
          const answers = responses.map((r) => `${r.status} ${JSON.parse(r.body).code}`);
          expect(answers[0], `${ctx}: the truncated body's own answer comes first`).toBe('400 RELAY_ERR_INVALID_JSON');
          expect(answers.slice(1), `${ctx}: at most one more answer, for the garbage`).toEqual(
            answers.length > 1 ? ['400 RELAY_ERR_BAD_REQUEST'] : [],
          );
        }),
        { numRuns: 10 },
      );
    },
    PROP_TIMEOUT,
  );

  it(
    'CONNECT, and a body on a connection that asks to Upgrade, still get an HTTP answer',
    async () => {
      const cases: Array<{ label: string; bytes: string }> = [
        { label: 'CONNECT', bytes: 'CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n' },
        { label: 'CONNECT to the relay itself', bytes: `CONNECT ${new URL(relay.url).host} HTTP/1.1\r\nHost: x\r\n\r\n` },
        { label: 'Upgrade: websocket on /healthz', bytes: 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n' },
      ];
      for (const c of cases) {
        const { responses, timedOut } = await rawExchange(latin1(c.bytes), false, 3_000);
        expect(responses.length, `${c.label}: ${timedOut ? 'no answer within 3 s' : 'connection closed without an answer'}`).toBeGreaterThanOrEqual(1);
        expect(responses[0]!.status, c.label).toBeLessThan(500);
      }
    },
    PROP_TIMEOUT,
  );
});

// ───────────────────────────── afterwards ─────────────────────────────

describe('after the hostile run', () => {
  it('≥ 1,000 hostile requests were sent, the relay is healthy and still works, and it logged no error', async () => {
    const total = Object.entries(sent).reduce((s, [k, n]) => (k === 'setup' ? s : s + n), 0);
    expect(total, JSON.stringify(sent)).toBeGreaterThanOrEqual(1_000);

    const health = await call('setup', 'GET', '/healthz');
    expect(health.status).toBe(200);
    expect(health.json).toEqual({ status: 'ok' });
    const ready = await call('setup', 'GET', '/readyz');
    expect(ready.status, show(ready)).toBe(200);
    const ok = await call('setup', 'POST', '/api/reporting/v2/request', { body: VALID_REPORT });
    expect(ok.status, show(ok)).toBe(201);
    up.reset();
    const proxied = await call('setup', 'POST', '/v1/chat/completions', { body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `after ${createHash('sha1').update(String(Date.now())).digest('hex')}` }] }) });
    expect(proxied.status, show(proxied)).toBe(200);

    const errors = relay.logs.filter((l) => l.includes('"level":50') || l.includes('"level":60'));
    const summary = [
      ...new Set(
        errors.map((l) => {
          const j = JSON.parse(l);
          return `${j.msg}: ${j.err?.type ?? ''} ${String(j.err?.message ?? '').slice(0, 120)}`;
        }),
      ),
    ];
    expect(summary, `${errors.length} error lines in the relay log`).toEqual([]);
  });
});
