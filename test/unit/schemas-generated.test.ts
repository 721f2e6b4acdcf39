// The route schemas without TypeBox at run time: src/http/schemas.generated.ts holds them as JSON, with
// TypeBox's own standalone checks (typebox/compile's Code) of the request bodies and headers the routes take
// (see test/helpers/schema-module.ts, which writes it). These tests keep it what it says it is: the text
// the generator makes from schemas.ts today, and checks that answer as the compiler fastify's routes used
// before does (TypeBoxValidatorCompiler, which site-validation.ts still loads for the messages of a refusal).
//   UPDATE_GENERATED=1 npx vitest run test/unit/schemas-generated.test.ts      rewrites it after a schema changed
import { readFileSync, writeFileSync } from 'node:fs';
import { TypeBoxValidatorCompiler, registerAjvFormats } from '@fastify/type-provider-typebox';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as G from '../../src/http/schemas.generated.js';
import * as S from '../../src/http/schemas.js';
import { CHECKED, GENERATED_FILE, UPDATE_COMMAND, generateSchemaModule } from '../helpers/schema-module.js';

/** The route compiler's verdict on a value of a part, and the generated check's. */
function verdicts(name: keyof typeof CHECKED) {
  registerAjvFormats();
  const part = CHECKED[name];
  const route = TypeBoxValidatorCompiler({ schema: S[name], method: 'POST', url: '/', httpPart: part }) as (v: unknown) => { error?: unknown };
  const check = G.CHECKS.get(G.schemaKey(part, G[name]));
  if (!check) throw new Error(`no generated check for ${part} ${name}`);
  return (value: unknown): void => {
    expect(check(value), `${name}: ${JSON.stringify(value)}`).toBe(route(value).error === undefined);
  };
}

describe('the generated schema module', () => {
  it('is what the generator makes from schemas.ts today', () => {
    const text = generateSchemaModule();
    if (process.env.UPDATE_GENERATED) writeFileSync(GENERATED_FILE, text);
    expect(readFileSync(GENERATED_FILE, 'utf8'), `a schema changed: ${UPDATE_COMMAND}`).toBe(text);
  });

  it('holds every schema as the JSON of its TypeBox source, and a check for each part the routes check', () => {
    for (const [name, schema] of Object.entries(S)) expect(G[name as keyof typeof G], name).toEqual(JSON.parse(JSON.stringify(schema)));
    expect([...G.CHECKS.keys()].map((key) => key.slice(0, key.indexOf(' ')))).toEqual(Object.values(CHECKED));
  });

  it('checks the cache routes\' bodies and headers as the route compiler does', () => {
    const save = verdicts('SaveBody');
    const retrieve = verdicts('RetrieveBody');
    for (const value of [{ request: {}, response: {} }, { request: { model: 'm' }, response: { a: [1] }, extra: 1 }, { request: [] , response: {} }, { request: {} }, { response: {} }, { request: null, response: {} }, {}, [], null, 'x', 1]) {
      save(value);
      retrieve(value);
    }
    const headers = verdicts('CacheHeaders');
    for (const value of [
      {},
      { 'x-relay-cache-namespace': 'team-a.b_c', 'x-relay-cache-ttl': '60', 'x-pezzo-project-id': 'p', host: 'h' },
      { 'x-relay-cache-namespace': 'a b' },
      { 'x-relay-cache-namespace': 'x'.repeat(128) },
      { 'x-relay-cache-namespace': 'x'.repeat(129) },
      { 'x-relay-cache-namespace': '' },
      { 'x-relay-cache-namespace': 'ns\n' },
      { 'x-relay-cache-ttl': '1234567890' },
      { 'x-relay-cache-ttl': '-1' },
      { 'x-relay-cache-ttl': '１２' },
      { 'x-relay-cache-ttl': '' },
      { 'set-cookie': ['a', 'b'] },
    ])
      headers(value);
    fc.assert(
      fc.property(
        fc.record({ 'x-relay-cache-namespace': fc.string(), 'x-relay-cache-ttl': fc.oneof(fc.string(), fc.stringMatching(/^\d{0,11}$/)), 'x-pezzo-project-id': fc.string() }, { requiredKeys: [] }),
        (value) => headers(value),
      ),
      { numRuns: 500 },
    );
  });

  it('checks report bodies as the route compiler does, on chosen bodies and on generated ones', () => {
    const agree = verdicts('ReportBody');
    const ok = { request: { timestamp: '2026-11-25T12:00:00.000Z' }, response: { timestamp: '2026-11-25T12:00:01Z' } };
    const chosen: unknown[] = [
      ok,
      { ...ok, metadata: { client: 'x', environment: 'e', promptId: 'p', clientVersion: '1' }, properties: { a: 1 }, cacheEnabled: null, cacheHit: true, extra: 1 },
      { ...ok, request: { timestamp: '2026-11-25T12:00:00+02:00', body: { model: 'm' } }, response: { timestamp: '2026-02-29T23:59:60Z', body: {} } },
      { ...ok, request: { timestamp: '2026-11-25 12:00:00Z' } },
      { ...ok, request: { timestamp: '2026-11-25t12:00:00z' } },
      { ...ok, request: { timestamp: '2026-13-25T12:00:00Z' } },
      { ...ok, request: { timestamp: '2026-11-25T12:00:00' } },
      { ...ok, request: { timestamp: '2026-11-25' } },
      { ...ok, request: { timestamp: 1 } },
      { ...ok, request: { timestamp: '2026-11-25T12:00:00Z', body: [] } },
      { ...ok, response: { timestamp: '2026-11-25T12:00:00Z', body: 'text' } },
      { ...ok, metadata: { client: 1 } },
      { ...ok, metadata: [] },
      { ...ok, properties: null },
      { ...ok, cacheEnabled: 'yes' },
      { request: ok.request },
      { response: ok.response },
      [],
      null,
      'report',
    ];
    for (const value of chosen) agree(value);
    const timestamp = fc.oneof(
      fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
      fc.stringMatching(/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,3})?([Zz]|[+-]\d{2}:\d{2})?$/),
      fc.string(),
      fc.integer(),
    );
    const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
    const part = fc.record({ timestamp, body: maybe(fc.oneof(fc.object(), fc.array(fc.anything()), fc.string())) }, { requiredKeys: [] });
    const body = fc.record(
      {
        metadata: maybe(fc.oneof(fc.dictionary(fc.constantFrom('client', 'clientVersion', 'environment', 'promptId', 'other'), fc.oneof(fc.string(), fc.integer())), fc.constant(null))),
        request: part,
        response: part,
        properties: maybe(fc.oneof(fc.object(), fc.constant(null), fc.array(fc.string()))),
        cacheEnabled: maybe(fc.oneof(fc.boolean(), fc.constant(null), fc.string())),
        cacheHit: maybe(fc.oneof(fc.boolean(), fc.constant(null), fc.integer())),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(body, (value) => {
        agree(value);
      }),
      { numRuns: 2000 },
    );
  });
});
