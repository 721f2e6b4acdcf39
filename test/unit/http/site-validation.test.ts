// The site's validator compiler: generated checks for the parts that have one, TypeBox's compiler (loaded
// on first need) for the rest and for the messages of a refusal.
import type { RouteOptions } from 'fastify';
import { expect, it } from 'vitest';
import { CacheHeaders, ListQuery, SaveBody } from '../../../src/http/schemas.generated.js';
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

it('makes a route wait for TypeBox only where a part has no generated check, and converts such a part as TypeBox does', async () => {
  const validation = createSiteValidation();
  const route = (schema: Record<string, unknown>, preValidation?: RouteOptions['preValidation']): RouteOptions =>
    ({ method: 'GET', url: '/', schema, handler: () => undefined, ...(preValidation ? { preValidation } : {}) }) as RouteOptions;
  const cache = route({ body: SaveBody, headers: CacheHeaders });
  validation.onRoute(cache);
  expect(cache.preValidation).toBeUndefined();
  const own = async (): Promise<void> => {};
  const list = route({ querystring: ListQuery }, own);
  validation.onRoute(list);
  expect(list.preValidation).toHaveLength(2);
  expect((list.preValidation as unknown[])[0]).toBe(own);
  const bodyOfItsOwn = route({ body: { type: 'object', properties: { a: { type: 'integer' } } } });
  validation.onRoute(bodyOfItsOwn);
  expect(bodyOfItsOwn.preValidation).toHaveLength(1);

  const wait = (list.preValidation as (() => Promise<void>)[])[1]!;
  await wait();
  const validate = validation.compiler({ schema: ListQuery, method: 'GET', url: '/', httpPart: 'querystring' }) as unknown as (v: unknown) => Result;
  expect(validate({ limit: '10', cacheHit: 'true' })).toEqual({ value: { limit: 10, cacheHit: true } });
  expect(validate({ limit: 'ten' })).toMatchObject({ error: [{ instancePath: '/limit', message: 'must be integer' }] });
});
