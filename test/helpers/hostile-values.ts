// Generators of hostile values for the hostile-input suite: JSON strings, numbers and trees, timestamps, and
// header values, namespaces and names (see test/helpers/hostile.ts for what each answer must be).
import fc from 'fast-check';
import { HK, NAMESPACE, T_REQ } from './hostile.js';

export function hasForbiddenKey(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(hasForbiddenKey);
  if (typeof v !== 'object' || v === null) return false;
  for (const [k, x] of Object.entries(v)) {
    if (k === '__proto__') return true;
    if (k === 'constructor' && typeof x === 'object' && x !== null && Object.hasOwn(x, 'prototype')) return true;
    if (hasForbiddenKey(x)) return true;
  }
  return false;
}

export function depthOf(v: unknown): number {
  if (typeof v !== 'object' || v === null) return 0;
  return 1 + Math.max(0, ...Object.values(v).map(depthOf));
}

/** No lone surrogates (encodeURIComponent throws on them). */
export function wellFormed(s: string): boolean {
  try {
    encodeURIComponent(s);
    return true;
  } catch {
    return false;
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
export function validUtf8(b: Uint8Array): boolean {
  try {
    utf8.decode(b);
    return true;
  } catch {
    return false;
  }
}

/** Unicode text sent as its UTF-8 bytes in a header value (undici sends header strings as latin1 bytes). */
export const asHeaderBytes = (s: string) => Buffer.from(s, 'utf8').toString('latin1');

export const pad2 = (n: number) => String(n).padStart(2, '0');

// ───────────────────────────── JSON values ─────────────────────────────

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
export const hostileString = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 24 }) },
  { weight: 2, arbitrary: fc.constantFrom(...WEIRD_STRINGS) },
);
export const hostileNumber = fc.oneof(
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
export const hostileObject = fc
  .dictionary(hostileKey, tree, { maxKeys: 5 })
  .filter((o) => !hasForbiddenKey(o) && depthOf(o) <= 20)
  .map((o) => JSON.parse(JSON.stringify(o)) as Record<string, unknown>);
export const safeTree = tree.filter((v) => !hasForbiddenKey(v) && depthOf(v) <= 20);
/** Sometimes a very long string (kept under the body limit by the bodies that use it). */
export const longString = fc
  .tuple(fc.integer({ min: 1_000, max: 5_000 }), fc.constantFrom('x', 'é', '€', '😀', '\u0000'))
  .map(([n, c]) => c.repeat(n));

export type JsonType = 'object' | 'array' | 'string' | 'number' | 'boolean' | 'null';
export const typeOf = (v: unknown): JsonType =>
  v === null ? 'null' : Array.isArray(v) ? 'array' : (typeof v as JsonType);
export const anyValue = fc.oneof(hostileString, hostileNumber, fc.boolean(), fc.constant(null), fc.array(safeTree, { maxLength: 3 }), hostileObject);

// ───────────────────────────── timestamps ─────────────────────────────

/** RFC 3339 date-times as a client may write them. */
export const validTimestamp = fc
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

const BAD_TIMESTAMPS = [
  '', 'yesterday', 'now', '2024-05-01', '2024-05-01T12:00:00', '2024-05-01T12:00Z', '2024-13-01T12:00:00Z',
  '2024-00-10T00:00:00Z', '2024-05-00T00:00:00Z', '2024-05-32T00:00:00Z', '2024-02-30T12:00:00Z',
  '2023-02-29T00:00:00Z', '2024-05-01T24:00:00Z', '2024-05-01T12:60:00Z', '2024-05-01T12:00:61Z',
  '2024-05-01T12:00:00+25:00', '2024-05-01T12:00:00+05:60', '+002024-05-01T12:00:00Z', '10000-01-01T00:00:00Z',
  '2024-05-01T12:00:00.Z', '2024-05-01T12:00:00,5Z', '2024-W18-3T12:00:00Z', '2024-5-1T12:00:00Z', '1714564800000',
  '２０２４-05-01T12:00:00Z', ` ${T_REQ}`, `${T_REQ} `, `${T_REQ}\n`, `${T_REQ}\u0000`, 'Wed, 01 May 2024 12:00:00 GMT',
  '2024-05-01T12:00:00.000ZZ', 'T12:00:00Z', '-2024-05-01T12:00:00Z',
];
export const badTimestamp = fc.oneof(
  fc.constantFrom(...BAD_TIMESTAMPS),
  fc.string({ unit: 'binary', maxLength: 30 }).filter((s) => !/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}/.test(s)),
  fc
    .record({ mo: fc.oneof(fc.integer({ min: 13, max: 99 }), fc.constant(0)), d: fc.integer({ min: 1, max: 28 }) })
    .map(({ mo, d }) => `2024-${pad2(mo)}-${pad2(d)}T00:00:00Z`),
  fc.record({ h: fc.integer({ min: 24, max: 99 }), m: fc.integer({ min: 0, max: 59 }) }).map(({ h, m }) => `2024-05-01T${pad2(h)}:${pad2(m)}:00Z`),
  fc.integer({ min: 60, max: 99 }).map((m) => `2024-05-01T12:${pad2(m)}:00Z`),
  fc.integer({ min: 32, max: 99 }).map((d) => `2024-01-${pad2(d)}T00:00:00Z`),
);

// ───────────────────────────── headers ─────────────────────────────

export const HEADER_CHARS = [...Array.from({ length: 0x7e - 0x20 + 1 }, (_, i) => String.fromCharCode(0x20 + i)), ...Array.from({ length: 0x60 }, (_, i) => String.fromCharCode(0xa0 + i))];
/** A header value undici will send as is: latin1 bytes, no CR/LF/NUL, no leading/trailing whitespace. */
export const headerValue = fc
  .oneof(
    fc.string({ unit: fc.constantFrom(...HEADER_CHARS), minLength: 1, maxLength: 40 }),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }).map(asHeaderBytes),
    fc.integer({ min: 200, max: 600 }).map((n) => 'v'.repeat(n)),
  )
  .map((s) => s.replace(/^[\s\u0085]+|[\s\u0085]+$/g, ''))
  .filter((s) => s.length > 0 && !/[\u0000-\u0008\u000a-\u001f\u007f]/.test(s));
export const validNamespace = fc.stringMatching(/^[A-Za-z0-9._-]{1,128}$/);
export const badNamespace = fc.oneof(
  fc.integer({ min: 129, max: 1000 }).map((n) => 'n'.repeat(n)),
  fc.tuple(validNamespace, fc.constantFrom(' ', '/', ':', '*', '@', '!', '~', '\u00e9', 'Ã©', '"', '%', '+', '\t'), validNamespace).map(([a, b, c]) => `${a}${b}${c}`),
  headerValue.filter((v) => !NAMESPACE.test(v)),
);
const TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz".split('');
export const tokenName = fc.string({ unit: fc.constantFrom(...TOKEN_CHARS), minLength: 1, maxLength: 20 });
export const BAD_TTLS = ['-1', '1.5', 'abc', '1e3', '0x10', '9999999999', '+5', '5s', '５', '1 2', 'Infinity', 'NaN', '-0', '0.0', '٣'];
