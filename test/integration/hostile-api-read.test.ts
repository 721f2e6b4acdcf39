// Hostile input (see test/helpers/hostile.ts): the read endpoints — GET /api/reporting/v2/requests with hostile
// query strings, and GET /api/reporting/v2/requests/:id with hostile ids and bad percent-encoding.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MIN_HOSTILE_REQUESTS,
  PROP_TIMEOUT,
  T_REQ,
  T_RES,
  expectHealthyAfterHostileRun,
  expectProxyError,
  expectRelayError,
  show,
  useHostileRelay,
} from '../helpers/hostile.js';
import { badTimestamp, wellFormed } from '../helpers/hostile-values.js';

const run = useHostileRelay('api-read');
const { call } = run;

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
          const qs = q.pairs.map(([k, v]) => `${k}=${v === 'REAL' ? run.realCursor : v}`).join('&');
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
          const id = c.kind === 'stored' ? run.reportIds[(c as { i: number }).i % run.reportIds.length]! : c.id;
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
          if (a.headers.get('x-relay-cache') !== null) return;
          // A proxied path gets the relay's error in the provider's shape; the relay's own routes in its own.
          if (proxy) expectProxyError(a, 400, 'RELAY_ERR_BAD_REQUEST', path);
          else expectRelayError(a, [400, 404], ['RELAY_ERR_BAD_REQUEST', 'RELAY_ERR_NOT_FOUND', 'RELAY_ERR_VALIDATION'], path);
        }),
        { numRuns: 20 },
      );
    },
    PROP_TIMEOUT,
  );
});

describe('after the hostile run', () => {
  it(`≥ ${MIN_HOSTILE_REQUESTS['api-read']} hostile requests were sent (the floors of all hostile files add up to ≥ 1,000), the relay is healthy and still works, and it logged no error`, () =>
    expectHealthyAfterHostileRun(run, 'api-read'));
});
