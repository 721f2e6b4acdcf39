// Hostile input (see test/helpers/hostile.ts): the proxy (POST /v1/chat/completions) — hostile bodies and headers
// are forwarded unchanged, so the answer is the fake upstream's (or a cache hit), or a documented relay 4xx.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Answer,
  MAX_BODY,
  MIN_HOSTILE_REQUESTS,
  NAMESPACE,
  PROP_TIMEOUT,
  expectHealthyAfterHostileRun,
  expectProxyError,
  show,
  useHostileRelay,
} from '../helpers/hostile.js';
import { HUGE_NUMBERS, UNPARSABLE_TYPES, hostileBodies } from '../helpers/hostile-bodies.js';
import {
  BAD_TTLS,
  asHeaderBytes,
  badNamespace,
  headerValue,
  hostileNumber,
  hostileString,
  safeTree,
  tokenName,
  validNamespace,
} from '../helpers/hostile-values.js';

const run = useHostileRelay('proxy');
const { call } = run;

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
          run.up.reset();
          if (fail !== undefined) run.up.failWith(fail, { error: { message: `upstream says ${fail}`, type: 'fake' } });
          const headers: Record<string, string> = {};
          if (bc.contentType !== undefined) headers['content-type'] = bc.contentType;
          const { properties, other, ...plain } = h;
          for (const [k, v] of Object.entries(plain)) if (v !== undefined && !/only-if-cached/i.test(v)) headers[k] = v;
          for (const [k, v] of Object.entries(properties ?? {})) headers[`x-relay-property-${k}`] = v;
          for (const [k, v] of Object.entries(other ?? {})) headers[k] = v;
          const calls = run.up.calls.length;
          let a: Answer;
          try {
            a = await call('POST /v1/chat/completions (proxy)', 'POST', '/v1/chat/completions', { headers, body: bc.body });
          } catch (e) {
            throw new Error(`${bc.label}: the relay dropped the connection: ${(e as Error).cause ?? e}`);
          }
          const ns = headers['x-relay-cache-namespace'];
          const ctx = `${bc.label}, upstream ${fail ?? 'normal'} → ${show(a)}`;
          if (bc.body.length > MAX_BODY) {
            expectProxyError(a, 413, 'RELAY_ERR_BODY_TOO_LARGE', ctx);
          } else if (ns !== undefined && !NAMESPACE.test(ns)) {
            expectProxyError(a, 400, 'RELAY_ERR_VALIDATION', ctx);
            expect(a.json.message).toContain('x-relay-cache-namespace');
            expect(run.up.calls.length, 'a refused call never reaches the upstream').toBe(calls);
          } else {
            const cache = a.headers.get('x-relay-cache');
            expect(['HIT', 'MISS', 'BYPASS', 'REFRESH', 'COALESCED'], ctx).toContain(cache);
            expect(a.headers.get('x-relay-report-id'), ctx).toEqual(expect.any(String));
            if (cache === 'HIT' || cache === 'COALESCED') {
              expect(a.status, ctx).toBe(200);
            } else {
              expect(run.up.calls.length, ctx).toBe(calls + 1);
              expect(Buffer.from(run.up.calls.at(-1)!.body, 'utf8').equals(Buffer.from(bc.body.toString('utf8'), 'utf8')), `${ctx}: body changed on the way`).toBe(true);
              expect(a.status, ctx).toBe(fail ?? fakeUpstreamStatus(bc.body));
              if (fail !== undefined) expect(a.json, ctx).toEqual({ error: { message: `upstream says ${fail}`, type: 'fake' } });
            }
          }
        }),
        { numRuns: 260 },
      );
      run.up.reset();
    },
    PROP_TIMEOUT,
  );

  it(
    'a malformed content-type header does not stop the proxy: the body is forwarded like any other',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...UNPARSABLE_TYPES), fc.uuid(), async (ct, nonce) => {
          run.up.reset();
          const a = await call('POST /v1/chat/completions (proxy)', 'POST', '/v1/chat/completions', {
            headers: { 'content-type': ct },
            body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"${nonce}"}]}`,
          });
          expect(a.status, `content-type ${JSON.stringify(ct)} → ${show(a)}`).toBe(200);
          expect(run.up.calls.length).toBe(1);
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
          run.up.reset();
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

describe('after the hostile run', () => {
  it(`≥ ${MIN_HOSTILE_REQUESTS.proxy} hostile requests were sent (the floors of all hostile files add up to ≥ 1,000), the relay is healthy and still works, and it logged no error`, () =>
    expectHealthyAfterHostileRun(run, 'proxy'));
});
