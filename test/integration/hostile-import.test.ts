// Hostile input (see test/helpers/hostile.ts): POST /api/cache/v1/import — hostile NDJSON (bad lines, blank lines,
// CRLF, wrong content types, oversized), lines the JSON rules of /api refuse, and imported entries that must
// either be refused or replay as a complete answer through the proxy.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cacheHash, proxyKeyObject } from '../../src/core/cache-key.js';
import { LINE_MAX_DEPTH } from '../../src/core/cache-transfer.js';
import {
  type Answer,
  JSON_CT,
  MAX_BODY,
  MIN_HOSTILE_REQUESTS,
  NDJSON_CT,
  NOW,
  PROP_TIMEOUT,
  expectHealthyAfterHostileRun,
  expectRelayError,
  show,
  useHostileRelay,
} from '../helpers/hostile.js';
import { HUGE_NUMBERS, invalidUtf8Bytes, nested } from '../helpers/hostile-bodies.js';
import { HEADER_CHARS, hostileString, safeTree, validNamespace } from '../helpers/hostile-values.js';

const run = useHostileRelay('import');
const { call } = run;

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

describe('after the hostile run', () => {
  it(`≥ ${MIN_HOSTILE_REQUESTS.import} hostile requests were sent (the floors of all hostile files add up to ≥ 1,000), the relay is healthy and still works, and it logged no error`, () =>
    expectHealthyAfterHostileRun(run, 'import'));
});
