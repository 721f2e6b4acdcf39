// Hostile input (see test/helpers/hostile.ts): the three JSON body endpoints — POST /api/reporting/v2/request,
// /api/cache/v1/request/save and /retrieve — get malformed, badly encoded, too deep, poisoned, mistyped,
// oversized and odd-but-valid bodies, and numbers out of range; each gets its documented answer.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cacheHash } from '../../src/core/cache-key.js';
import {
  type Answer,
  MIN_HOSTILE_REQUESTS,
  PROP_TIMEOUT,
  T_REQ,
  T_RES,
  expectHealthyAfterHostileRun,
  expectRelayError,
  show,
  useHostileRelay,
} from '../helpers/hostile.js';
import { EP_PATH, type Ep, HUGE_NUMBERS, SNEAKY_HUGE, hostileBodies, validBodyFor } from '../helpers/hostile-bodies.js';

const run = useHostileRelay('api-bodies');
const { call } = run;

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
    run.reportIds.push(a.json.id);
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

describe('after the hostile run', () => {
  it(`≥ ${MIN_HOSTILE_REQUESTS['api-bodies']} hostile requests were sent (the floors of all hostile files add up to ≥ 1,000), the relay is healthy and still works, and it logged no error`, () =>
    expectHealthyAfterHostileRun(run, 'api-bodies'));
});
