// The SQLite report row's packed form: any report JSON comes back exactly (same JSON text, key order and
// odd values included), with its request and response bodies written as 0; and it is small.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KnownTime, packReport, packTemplate, packVariant, unpackReport } from '../../../src/storage/report-row-codec.js';
import { VARIANT_PATHS } from '../../../src/storage/report-variant.js';

const key = fc.oneof(
  fc.string(),
  fc.constantFrom('__proto__', 'constructor', 'body', 'request', 'response', 'model', 'status', 'é世🎉', ''),
);

/** Strings the codec writes in a form of its own, and near misses of those forms. */
const special = fc.oneof(
  fc.constantFrom(
    'llm-relay',
    'POST',
    '/v1/chat/completions',
    'a'.repeat(64),
    'A'.repeat(64),
    '01a213cb-0240-779e-8786-30ec0001a31c',
    '01A213CB-0240-779E-8786-30EC0001A31C',
    '2026-11-25T17:40:01.217Z',
    '2026-11-25T17:40:01.2170Z',
    '+275760-09-13T00:00:00.000Z',
    '2026-02-30T17:40:01.217Z',
    '\ud800',
    'a\udc00b',
  ),
  fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex')),
  fc.uuid(),
  fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
  // the timestamp's shape with any digits: years 0000-0099 and leap days, months and days out of range
  fc
    .tuple(
      fc.oneof(fc.integer({ min: 0, max: 9999 }), fc.constantFrom(0, 1, 99, 100, 1900, 2000, 2024, 2100, 2400)),
      fc.integer({ min: 0, max: 13 }),
      fc.integer({ min: 0, max: 32 }),
      fc.integer({ min: 0, max: 24 }),
      fc.integer({ min: 0, max: 60 }),
      fc.integer({ min: 0, max: 60 }),
      fc.integer({ min: 0, max: 999 }),
    )
    .map(([y, mo, d, h, mi, s, ms]) => {
      const p = (n: number, w: number) => String(n).padStart(w, '0');
      return `${p(y, 4)}-${p(mo, 2)}-${p(d, 2)}T${p(h, 2)}:${p(mi, 2)}:${p(s, 2)}.${p(ms, 3)}Z`;
    }),
);

const json: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(null, true, false, 0, -0, 1.5, -7, 1e21, 2 ** 53, -(2 ** 53) - 2, 2 ** 52, Number.MIN_VALUE, ''),
    fc.string({ unit: 'grapheme' }),
    fc.string({ unit: 'binary' }),
    special,
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.array(fc.tuple(key, tie('value')), { maxLength: 5 }).map((entries) => Object.fromEntries(entries)),
  ),
})).value;

/** A report: request and response objects (bodies anywhere in their key order) among any other keys. */
const report = fc
  .tuple(
    fc.array(fc.tuple(key, json), { maxLength: 6 }),
    fc.array(fc.tuple(key, json), { maxLength: 3 }),
    fc.array(fc.tuple(key, json), { maxLength: 3 }),
    fc.option(json),
    fc.option(json),
  )
  .map(([top, req, res, reqBody, resBody]) => {
    const request = Object.fromEntries(reqBody === null ? req : [...req, ['body', reqBody]]);
    const response = Object.fromEntries(resBody === null ? res : [['body', resBody], ...res]);
    return Object.fromEntries([['request', request], ...top.filter(([k]) => k !== 'request' && k !== 'response'), ['response', response]]);
  });

/** What the row must read back as: the report's JSON text with each body that JSON keeps written as 0. */
function expected(r: Record<string, unknown>): string {
  const request = r['request'];
  const response = r['response'];
  return JSON.stringify(r, function (this: unknown, k: string, v: unknown) {
    return k === 'body' && (this === request || this === response) && v !== undefined ? 0 : v;
  });
}

describe('report row codec', () => {
  it('reads back any report exactly, bodies written as 0 (property)', () => {
    fc.assert(
      fc.property(report, (r) => {
        const back = unpackReport(packReport(r));
        expect(JSON.stringify(back)).toBe(expected(r));
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps -0, integers past 2^53, lone surrogates, __proto__ keys and non-canonical timestamps exactly', () => {
    const r = {
      request: { timestamp: '2026-11-25T17:40:01.2170Z', body: { a: 1 } },
      response: { timestamp: '2026-11-25T17:40:01.217Z', status: 200 },
      z: -0,
      big: 2 ** 60,
      s: 'x\ud800y',
      upper: 'A'.repeat(64),
      ['__proto__']: { polluted: true },
    };
    Object.defineProperty(r, '__proto__', { value: { polluted: true }, enumerable: true });
    const back = unpackReport(packReport(r)) as Record<string, unknown>;
    expect(Object.is(back['z'], -0)).toBe(true);
    expect(back['big']).toBe(2 ** 60);
    expect(back['s']).toBe('x\ud800y');
    expect(back['upper']).toBe('A'.repeat(64));
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.prototype.hasOwnProperty.call(back, '__proto__')).toBe(true);
    expect((back['request'] as Record<string, unknown>)['timestamp']).toBe('2026-11-25T17:40:01.2170Z');
    expect((back['request'] as Record<string, unknown>)['body']).toBe(0);
  });

  it('reads rows of older relays (plain JSON text) as they are', () => {
    const text = '{"id":"x","request":{"timestamp":"t","body":{"m":1}},"response":{"timestamp":"t"}}';
    expect(unpackReport(text)).toEqual(JSON.parse(text));
  });

  it('refuses a row of a version it does not know, instead of reading it wrong', () => {
    expect(() => unpackReport(Buffer.from([1, 0]))).toThrow(/unknown version 1/);
  });

  it('keeps a proxied call’s report in about a quarter of its JSON', () => {
    const r = {
      metadata: { client: 'llm-relay', clientVersion: '0.1.0', environment: 'development' },
      request: { timestamp: '2026-11-25T17:40:01.216Z', body: { model: 'gpt-4o-mini' } },
      response: { timestamp: '2026-11-25T17:40:01.217Z', status: 200, streamed: false, body: { id: 'x' } },
      properties: {},
      cacheEnabled: true,
      cacheHit: true,
      proxy: {
        method: 'POST',
        path: '/v1/chat/completions',
        upstream: 'https://api.openai.com',
        cacheStatus: 'HIT',
        cacheKey: 'fc75772af619e74574790a5ee165c320429b588cc1a876d6aa857d717ceb2f90',
        outcome: 'complete',
      },
      originReportId: '01a213cb-00cb-7389-9894-ba24fbd2cd25',
      id: '01a213cb-0240-779e-8786-30ec0001a31c',
      receivedAt: '2026-11-25T17:40:01.217Z',
      durationMs: 1,
      status: 200,
      model: 'gpt-4o-mini',
      provider: 'openai',
      usage: { inputTokens: 7, outputTokens: 132, totalTokens: 139, cachedInputTokens: 0 },
      costUsd: 0,
      requestBytes: 137,
      responseBytes: 987,
      requestSha256: '1e4e3d8c9c002a6bceed846d84c2d7cbef8da3a2d9b7c8c891253ab3b3fe9e7e',
      responseSha256: '5eb820b7769797f81a39ec292895f39a0ea6a5c9ada0ea8d711bb9a4892e3541',
      costSavedUsd: 8.025e-5,
    };
    const packed = packReport(r);
    expect(JSON.stringify(unpackReport(packed))).toBe(expected(r));
    expect(packed.length).toBeLessThan(Buffer.byteLength(expected(r)) / 3.5);
  });

  it("packs a variant from its base's template byte for byte as packReport would (property)", () => {
    const scalar = fc.oneof(special, fc.string(), fc.integer(), fc.double(), fc.constantFrom(null, true, false, -0, 2 ** 60));
    fc.assert(
      fc.property(report, scalar, scalar, scalar, scalar, scalar, fc.array(scalar, { minLength: 5, maxLength: 5 }), (r, id, received, reqTs, resTs, duration, next) => {
        const base = { ...r, id, receivedAt: received, durationMs: duration } as Record<string, unknown>;
        base['request'] = { ...(r['request'] as object), timestamp: reqTs };
        base['response'] = { timestamp: resTs, ...(r['response'] as object) };
        const template = packTemplate(base, VARIANT_PATHS);
        expect(template).toBeDefined();
        const [vId, vReceived, vReq, vRes, vDuration] = next;
        const v = { ...base, id: vId, receivedAt: vReceived, durationMs: vDuration } as Record<string, unknown>;
        v['request'] = { ...(base['request'] as object), timestamp: vReq };
        v['response'] = { ...(base['response'] as object), timestamp: vRes };
        expect(packVariant(template!, v).equals(packReport(v))).toBe(true);
        expect(packVariant(template!, base).equals(packReport(base))).toBe(true);
        // the values given in VARIANT_PATHS' order rather than read from the report
        expect(packVariant(template!, v, [vId, vReceived, vReq, vRes, vDuration]).equals(packReport(v))).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('packs a variant whose times are given as known ms as packReport packs their texts (property)', () => {
    // from before year 0 to after 9999: texts of other lengths than 24 are kept as text
    const ms = fc.integer({ min: -70_000_000_000_000, max: 300_000_000_000_000 });
    fc.assert(
      fc.property(report, ms, ms, (r, received, requested) => {
        const iso = (t: number) => new Date(t).toISOString();
        const base = { ...r, id: 'b', receivedAt: iso(0), durationMs: 1 } as Record<string, unknown>;
        base['request'] = { ...(r['request'] as object), timestamp: iso(0) };
        base['response'] = { timestamp: iso(0), ...(r['response'] as object) };
        const template = packTemplate(base, VARIANT_PATHS)!;
        const v = { ...base, id: 'v', receivedAt: iso(received), durationMs: received - requested } as Record<string, unknown>;
        v['request'] = { ...(base['request'] as object), timestamp: iso(requested) };
        v['response'] = { ...(base['response'] as object), timestamp: iso(received) };
        const at = new KnownTime(received, iso(received));
        const values = ['v', at, new KnownTime(requested, iso(requested)), at, received - requested];
        expect(packVariant(template, v, values).equals(packReport(v))).toBe(true);
        expect(JSON.stringify(unpackReport(packVariant(template, v, values)))).toBe(expected(v));
      }),
      { numRuns: 500 },
    );
  });

  it('makes no template of a report whose variant fields are missing or not scalars, and packs a variant whose are not in full', () => {
    const base = { request: { timestamp: 't' }, response: { timestamp: 't' }, id: 'a', receivedAt: 'r', durationMs: 1 };
    expect(packTemplate({ ...base, durationMs: undefined }, VARIANT_PATHS)).toBeUndefined();
    expect(packTemplate({ ...base, id: { x: 1 } }, VARIANT_PATHS)).toBeUndefined();
    expect(packTemplate({ ...base, request: 'x' }, VARIANT_PATHS)).toBeUndefined();
    const template = packTemplate(base, VARIANT_PATHS)!;
    const odd = { ...base, durationMs: undefined };
    expect(packVariant(template, odd).equals(packReport(odd))).toBe(true);
  });
});
