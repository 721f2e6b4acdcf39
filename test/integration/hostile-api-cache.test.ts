// Hostile input (see test/helpers/hostile.ts): POST /api/cache/v1/request/save and /retrieve — wrong types, bad
// namespace and TTL headers, hostile but valid entries that must round-trip, misses, and entries over the size limit.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cacheHash } from '../../src/core/cache-key.js';
import {
  HK,
  JSON_CT,
  MAX_BODY,
  MIN_HOSTILE_REQUESTS,
  PROP_TIMEOUT,
  expectHealthyAfterHostileRun,
  expectRelayError,
  show,
  useHostileRelay,
} from '../helpers/hostile.js';
import { EP_PATH, type Ep, saveArb } from '../helpers/hostile-bodies.js';
import {
  BAD_TTLS,
  anyValue,
  asHeaderBytes,
  badNamespace,
  headerValue,
  hostileObject,
  typeOf,
  validNamespace,
} from '../helpers/hostile-values.js';
import { startRelay } from '../helpers/relay.js';

const run = useHostileRelay('api-cache');
const { call } = run;

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
          const ttlMs = (ttl === undefined ? run.relay.config.cacheTtl : Math.max(1, Number(ttl))) * 1000;
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
      const small = await startRelay({ cacheUrl: 'memory', maxBodyBytes: MAX_BODY, cacheMaxEntryBytes: 4096, upstreamUrl: run.up.url });
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

describe('after the hostile run', () => {
  it(`≥ ${MIN_HOSTILE_REQUESTS['api-cache']} hostile requests were sent (the floors of all hostile files add up to ≥ 1,000), the relay is healthy and still works, and it logged no error`, () =>
    expectHealthyAfterHostileRun(run, 'api-cache'));
});
