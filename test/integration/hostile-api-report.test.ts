// Hostile input (see test/helpers/hostile.ts): POST /api/reporting/v2/request with a wrong type or a missing
// field anywhere in the Report schema, and with bad timestamps; each is a 400 naming the field.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MIN_HOSTILE_REQUESTS,
  PROP_TIMEOUT,
  expectHealthyAfterHostileRun,
  expectRelayError,
  show,
  useHostileRelay,
} from '../helpers/hostile.js';
import { reportArb } from '../helpers/hostile-bodies.js';
import { type JsonType, anyValue, badTimestamp, hostileNumber, hostileObject, typeOf } from '../helpers/hostile-values.js';

const run = useHostileRelay('api-report');
const { call } = run;

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

describe('after the hostile run', () => {
  it(`≥ ${MIN_HOSTILE_REQUESTS['api-report']} hostile requests were sent (the floors of all hostile files add up to ≥ 1,000), the relay is healthy and still works, and it logged no error`, () =>
    expectHealthyAfterHostileRun(run, 'api-report'));
});
