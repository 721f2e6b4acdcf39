// Generators of request bodies for the hostile-input suite: a valid body per JSON endpoint, and every hostile
// variant of such a body (malformed, invalid UTF-8, too deep, forbidden keys, wrong content type, oversized,
// empty, odd but valid), each with the answer it must get (see test/helpers/hostile.ts).
import fc from 'fast-check';
import { HK, JSON_CT, MAX_BODY, MAX_DEPTH, NDJSON_CT, NONE } from './hostile.js';
import { hostileObject, hostileString, longString, safeTree, validTimestamp, validUtf8 } from './hostile-values.js';

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

// ───────────────────────────── valid bodies per endpoint ─────────────────────────────

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
export const reportArb = fc
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
export const saveArb = fc.record(
  { request: hostileObject, response: hostileObject, extra: safeTree, longField: longString },
  { requiredKeys: ['request', 'response'] },
);
const retrieveArb = fc.record({ request: hostileObject, extra: safeTree }, { requiredKeys: ['request'] });

export type Ep = 'report' | 'save' | 'retrieve';
export const EP_PATH: Record<Ep, string> = {
  report: '/api/reporting/v2/request',
  save: '/api/cache/v1/request/save',
  retrieve: '/api/cache/v1/request/retrieve',
};
export const validBodyFor = (ep: Ep): fc.Arbitrary<Record<string, unknown>> =>
  ep === 'report' ? reportArb : ep === 'save' ? saveArb : retrieveArb;

// ───────────────────────────── hostile bodies ─────────────────────────────

export interface BodyCase {
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
export const invalidUtf8Bytes = fc.oneof(
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
export function nested(depth: number, kind: 'array' | 'object' | 'mixed'): string {
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
export const UNPARSABLE_TYPES = ['application', 'json', '', 'application/json, text/plain', 'application/ json', ';application/json'];
/** Media type application/json with parameters or in other case: the body is parsed as JSON (always as UTF-8). */
const JSON_EQUIVALENT_TYPES = ['application/json; charset=utf-8', 'Application/JSON', 'application/json;', 'application/json ; charset=UTF-8', 'application/json; charset=latin1'];
/** Out of range, yet without a 3-digit exponent or a 300-digit run (what src/http/json-body.ts looks for). */
export const SNEAKY_HUGE = [`1${'0'.repeat(298)}e99`, `${'9'.repeat(250)}.5e60`];
export const HUGE_NUMBERS = [
  '1e400', '-1e400', '1E+400', '1e309', '-2e308', '1e99999', `1${'0'.repeat(400)}`, `-${'9'.repeat(320)}`,
  ...SNEAKY_HUGE, `0.${'0'.repeat(5)}1e999`,
];

/** Every hostile category that applies to any JSON body endpoint, built around a valid body of that endpoint. */
export function hostileBodies(base: Record<string, unknown>): fc.Arbitrary<BodyCase> {
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
