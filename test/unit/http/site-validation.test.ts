// The site's validator compiler: generated checks for the parts that have one (the values of a querystring,
// path or headers converted as TypeBox converts them, where they are written plainly), TypeBox's compiler
// (loaded on first need) for the rest and for the messages of a refusal.
import { TypeBoxValidatorCompiler, registerAjvFormats } from '@fastify/type-provider-typebox';
import type { RouteOptions } from 'fastify';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { CacheHeaders, FilterQuery, ListQuery, ReportBody, SaveBody, StatsQuery } from '../../../src/http/schemas.generated.js';
import * as Sources from '../../../src/http/schemas.js';
import { createSiteValidation } from '../../../src/http/site-validation.js';

type Result = { value?: unknown; error?: { instancePath: string; message?: string }[] } | Promise<unknown>;

it('answers a body its generated check accepts at once, and a refusal with TypeBox\'s errors, each its own', async () => {
  const validation = createSiteValidation();
  const validate = validation.compiler({ schema: SaveBody, method: 'POST', url: '/save', httpPart: 'body' }) as unknown as (v: unknown) => Result;
  const ok = { request: { a: 1 }, response: {} };
  expect(validate(ok)).toEqual({ value: ok });
  // Two refusals before TypeBox is loaded: promises, rejected with the errors of their own value.
  const first = validate({ request: 1, response: {} });
  const second = validate({ request: {}, response: 'x' });
  expect(first).toBeInstanceOf(Promise);
  const errors = await Promise.allSettled([first, second]);
  expect(errors.map((e) => (e.status === 'rejected' ? (e.reason as { validation: { instancePath: string }[] }).validation[0]!.instancePath : e.status))).toEqual([
    '/request',
    '/response',
  ]);
  // Once it is loaded, a refusal is TypeBox's answer, synchronous, as fastify's routes always had it.
  expect(validate({ request: 1, response: {} })).toMatchObject({ error: [{ instancePath: '/request', message: 'must be object' }] });
  expect(validate(ok)).toEqual({ value: ok });
});

it('makes a request wait for TypeBox only where a part has no generated check or a value is not written plainly', async () => {
  const validation = createSiteValidation();
  const route = (schema: Record<string, unknown>, preValidation?: RouteOptions['preValidation']): RouteOptions =>
    ({ method: 'GET', url: '/', schema, handler: () => undefined, ...(preValidation ? { preValidation } : {}) }) as RouteOptions;
  type Hook = (request: Record<string, unknown>, reply: unknown, done: (err?: Error) => void) => void | Promise<void>;
  /** Runs a route's added hook on a request; whether it was done at once (without waiting for TypeBox). */
  const runs = async (hook: Hook, request: Record<string, unknown>): Promise<boolean> => {
    let doneAtOnce = false;
    let returned = false;
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    const result = hook(request, undefined, () => {
      doneAtOnce = !returned;
      finished();
    });
    returned = true;
    if (result instanceof Promise) {
      await result;
      return false;
    }
    await done;
    return doneAtOnce;
  };
  // A route of its own with a body no generated check covers: TypeBox first, always.
  const bodyOfItsOwn = route({ body: { type: 'object', properties: { a: { type: 'integer' } } } });
  validation.onRoute(bodyOfItsOwn);
  expect(bodyOfItsOwn.preValidation).toHaveLength(1);
  // A body alone never waits; querystrings and headers wait only when a value is not plain.
  const report = route({ body: ReportBody });
  validation.onRoute(report);
  expect(report.preValidation).toBeUndefined();
  const own = async (): Promise<void> => {};
  const list = route({ querystring: ListQuery }, own);
  validation.onRoute(list);
  expect(list.preValidation).toHaveLength(2);
  expect((list.preValidation as unknown[])[0]).toBe(own);
  const listWait = (list.preValidation as unknown as Hook[])[1]!;
  const cache = route({ body: SaveBody, headers: CacheHeaders });
  validation.onRoute(cache);
  const cacheWait = (cache.preValidation as unknown as Hook[])[0]!;

  expect(await runs(listWait, { query: { limit: '10', cacheHit: 'false', model: 'm', 'property.user': ['a', 'b'] } })).toBe(true);
  expect(await runs(cacheWait, { headers: { 'x-relay-cache-ttl': '60', 'set-cookie': ['a'] } })).toBe(true);
  const list10 = validation.compiler({ schema: ListQuery, method: 'GET', url: '/', httpPart: 'querystring' }) as unknown as (v: unknown) => Result;
  const query = { limit: '10', cacheHit: 'false' };
  expect(list10(query)).toEqual({ value: { limit: 10, cacheHit: false } });
  expect(query).toEqual({ limit: 10, cacheHit: false }); // in place, as TypeBox converts

  // `cacheHit=1` is TypeBox's to convert: the request waits for it, then TypeBox converts it.
  expect(await runs(listWait, { query: { cacheHit: '1' } })).toBe(false);
  expect(await runs(listWait, { query: { cacheHit: '1' } })).toBe(true); // (loaded now)
  expect(list10({ limit: '10.5', cacheHit: '1' })).toEqual({ value: { limit: 10, cacheHit: true } });
  expect(list10({ limit: 'ten' })).toMatchObject({ error: [{ instancePath: '/limit', message: 'must be integer' }] });
});

it('converts and checks a querystring as TypeBox\'s compiler does, for any value it takes as plain', async () => {
  registerAjvFormats();
  const value = fc.oneof(
    fc.constantFrom('10', '0', '1', '-3', '1000', '1001', '99', '600', '200', '007', '10.5', '1e2', '', ' 5', 'true', 'false', 'TRUE', 'True', 'yes'),
    fc.constantFrom('model', 'day', 'environment', 'nope', '2026-11-27T12:00:00Z', '2026-02-30T00:00:00Z'),
    fc.string(),
    fc.integer({ min: -20, max: 2000 }).map(String),
    fc.array(fc.constantFrom('1', 'a', 'true'), { minLength: 2, maxLength: 3 }),
  );
  for (const name of ['ListQuery', 'FilterQuery', 'StatsQuery'] as const) {
    const json = { ListQuery, FilterQuery, StatsQuery }[name];
    const keys = [...Object.keys((json as unknown as { properties: object }).properties), 'property.user', 'other'];
    const typebox = TypeBoxValidatorCompiler({ schema: Sources[name], method: 'GET', url: '/', httpPart: 'querystring' }) as (v: unknown) => { value?: unknown; error?: unknown };
    const validation = createSiteValidation();
    const site = validation.compiler({ schema: json, method: 'GET', url: '/', httpPart: 'querystring' }) as unknown as (v: unknown) => Result;
    await fc.assert(
      fc.asyncProperty(fc.dictionary(fc.constantFrom(...keys), value, { maxKeys: 4 }), async (query) => {
        const expected = typebox(structuredClone(query));
        const result = site(structuredClone(query));
        if (result instanceof Promise) {
          // before TypeBox was loaded: a refusal rejects with TypeBox's own errors; a value not written plainly
          // that TypeBox takes resolves with TypeBox's result (its conversion)
          if (expected.error) await expect(result).rejects.toMatchObject({ validation: expected.error });
          else expect(await result).toEqual(expected);
          return;
        }
        if (result.error) expect(expected.error).toEqual(result.error);
        else {
          expect(expected.error, JSON.stringify(query)).toBeUndefined();
          expect(result.value).toEqual(expected.value);
        }
      }),
      { numRuns: 1500 },
    );
  }
});

it('before TypeBox is loaded, a value not written plainly that TypeBox takes resolves with TypeBox’s conversion', async () => {
  // (the app's routes wait for TypeBox first, see onRoute; a caller of the validator itself gets the promise)
  const site = createSiteValidation().compiler({ schema: ListQuery, method: 'GET', url: '/', httpPart: 'querystring' }) as unknown as (v: unknown) => unknown;
  const result = site({ other: '-1', limit: 'True' });
  expect(result).toBeInstanceOf(Promise);
  expect(await result).toEqual({ value: { other: '-1', limit: 1 } });
});
