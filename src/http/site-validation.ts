// The site's validator compiler, without TypeBox until a request needs it. TypeBox (~700 modules) takes
// ~0.5 s and ~30 MB to load; a Pezzo client with caching on would pay that on its first call, which only
// needs its body and headers checked. So a request part whose schema has a generated check
// (schemas.generated.ts: TypeBox's own standalone code, kept in the tree by a test) is checked by it, and
// TypeBox's compiler — the one the routes have always used — is loaded only for what those checks do not
// cover: the messages of a value a check refuses, and the querystring and path parameters, whose values it
// converts (a `limit` of "10" to 10). A route with such a part waits for TypeBox before its validation (an
// onRoute hook adds the wait), so its validator is TypeBox's, as before, from its first request on.
import type { FastifySchemaCompiler, FastifySchemaValidationError, RouteOptions } from 'fastify';
import { CHECKS, schemaKey } from './schemas.generated.js';

/** A part's validator: the value (converted, for some parts) or TypeBox's errors; a promise for a refusal before TypeBox is loaded. */
export type Validate = (value: unknown) => { value?: unknown; error?: FastifySchemaValidationError[] } | Promise<unknown>;
type Compiler = (route: { schema: unknown; method: string; url: string; httpPart?: string }) => Validate;

export interface SiteValidation {
  compiler: FastifySchemaCompiler<unknown>;
  /** the same, typed for the API edge (api-edge.ts), which validates as fastify's routes do */
  validator: Compiler;
  /** an onRoute hook: a route with a part no generated check covers loads TypeBox before its validation */
  onRoute(route: RouteOptions): void;
  /** TypeBox's compiler, loaded once (the first refusal, or the first request of a route that needs it) */
  loadTypeBox(): Promise<Compiler>;
}

/** The request parts fastify validates, as its compiler calls them and as a route's schema names them. */
const PARTS = { body: 'body', headers: 'headers', querystring: 'querystring', params: 'params' } as const;

export function createSiteValidation(): SiteValidation {
  let typebox: Compiler | undefined;
  let loading: Promise<Compiler> | undefined;
  const loadTypeBox = (): Promise<Compiler> =>
    (loading ??= Promise.all([import('@fastify/type-provider-typebox'), import('./schemas.js')]).then(([m, sources]) => {
      m.registerAjvFormats();
      // TypeBox compiles the schema a route's JSON comes from: its conversions read TypeBox's own marks on
      // the schema (an optional property's), which JSON leaves out.
      const source = new Map<string, unknown>(Object.values(sources).map((schema) => [JSON.stringify(schema), schema]));
      const compile = m.TypeBoxValidatorCompiler as unknown as Compiler;
      typebox = (route) => compile({ ...route, schema: source.get(JSON.stringify(route.schema)) ?? route.schema });
      return typebox;
    }));
  const checkOf = (part: string, schema: unknown): ((value: unknown) => boolean) | undefined => CHECKS.get(schemaKey(part, schema));
  const waitForTypeBox = async (): Promise<void> => {
    if (!typebox) await loadTypeBox();
  };

  const compiler: Compiler = (route) => {
    let full: Validate | undefined;
    const fullOf = (compile: Compiler): Validate => (full ??= compile(route));
    const check = checkOf(route.httpPart ?? 'body', route.schema);
    // (the route's onRoute wait has loaded TypeBox by the time this runs)
    if (!check) return (value) => fullOf(typebox!)(value);
    return (value) => {
      if (check(value)) return { value };
      if (typebox) return fullOf(typebox)(value);
      // A refusal before TypeBox is loaded: fastify takes a promise as pass or fail, and a rejection with
      // TypeBox's errors as the validation error it would have made of them (the same 400 and message).
      // Were the two ever to disagree, TypeBox's compiler decides, as for the report edge.
      return loadTypeBox().then((compile) => {
        const result = fullOf(compile)(value) as { error?: FastifySchemaValidationError[] };
        if (result.error) throw Object.assign(new Error('validation failed'), { validation: result.error });
        return true;
      });
    };
  };

  return {
    compiler: compiler as unknown as FastifySchemaCompiler<unknown>,
    validator: compiler,
    loadTypeBox,
    onRoute(route) {
      const schema = route.schema as Record<string, unknown> | undefined;
      if (!schema) return;
      const needs = Object.values(PARTS).some((part) => schema[part] !== undefined && !checkOf(part, schema[part]));
      if (!needs) return;
      const hooks = route.preValidation;
      route.preValidation = hooks === undefined ? [waitForTypeBox] : [...(Array.isArray(hooks) ? hooks : [hooks]), waitForTypeBox];
    },
  };
}
