// Hostile input (see test/helpers/hostile.ts): raw sockets, for what undici refuses to send — malformed request
// lines, targets, versions, heads, chunked encodings, content-lengths and header bytes, plus CONNECT and Upgrade.
// Every one must get a complete HTTP answer in the RELAY_ERR_* shape, never a dropped connection.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MIN_HOSTILE_REQUESTS,
  PROP_TIMEOUT,
  VALID_REPORT,
  expectHealthyAfterHostileRun,
  useHostileRelay,
} from '../helpers/hostile.js';
import { type RawResponse, expectRawRelayError, latin1, rawExchange as rawExchangeWith } from '../helpers/raw-http.js';

const run = useHostileRelay('http');

/** A raw exchange with this file's relay, counted as one hostile request. */
function rawExchange(bytes: Buffer, halfClose: boolean, ms?: number): Promise<{ responses: RawResponse[]; rest: string; timedOut: boolean }> {
  run.count('raw socket (malformed HTTP)');
  return rawExchangeWith(run.relay.url, bytes, halfClose, ms);
}

const RAW_TARGETS = ['/healthz', '/api/reporting/v2/request', '/api/cache/v1/request/save', '/api/reporting/v2/requests', '/v1/chat/completions'];
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
        { label: 'CONNECT to the relay itself', bytes: `CONNECT ${new URL(run.relay.url).host} HTTP/1.1\r\nHost: x\r\n\r\n` },
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

describe('after the hostile run', () => {
  it(`≥ ${MIN_HOSTILE_REQUESTS.http} hostile requests were sent (the floors of all hostile files add up to ≥ 1,000), the relay is healthy and still works, and it logged no error`, () =>
    expectHealthyAfterHostileRun(run, 'http'));
});
