// The site's validator compiler, without TypeBox until a request needs it. TypeBox (~700 modules) takes
// ~0.5 s and ~30 MB to load; a Pezzo client with caching on, or a first look at the dashboard, would pay that
// on its first call. So a request part whose schema has a generated check (schemas.generated.ts: TypeBox's
// own standalone code, kept in the tree by a test) is checked by it, and TypeBox's compiler — the one the
// routes have always used — is loaded only for what those checks do not cover: the messages of a value a
// check refuses, and values TypeBox would convert in ways this module does not. TypeBox converts the
// querystring, path parameters and headers before it checks them (`limit=10` to the number 10); this module
// converts what is written plainly the same way itself (an integer's digits, `true` or `false`, a string as
// it is) and leaves anything else (`cacheHit=1`, `limit=10.5`, a repeated parameter) to TypeBox: a route with
// such a value waits for TypeBox before its validation (an onRoute hook adds the wait), so that value is
// validated and converted by TypeBox's compiler, as before.
import type { FastifySchemaCompiler, FastifySchemaValidationError, RouteOptions } from 'fastify';
import { CHECKS, schemaKey } from './schemas.generated.js';

/**
 * A part's validator: the value (converted, for some parts) or TypeBox's errors. Before TypeBox is loaded, a
 * value the generated check does not settle gets a promise: rejected with TypeBox's errors, or resolved with
 * TypeBox's result (the value as it converts it).
 */
export type Validate = (value: unknown) => { value?: unknown; error?: FastifySchemaValidationError[] } | Promise<unknown>;
type Compiler = (route: { schema: unknown; method: string; url: string; httpPart?: string }) => Validate;
type Hook = (request: Record<string, unknown>, reply: unknown, done: (err?: Error) => void) => void;

export interface SiteValidation {
  compiler: FastifySchemaCompiler<unknown>;
  /** the same, typed for the API edge (api-edge.ts), which validates as fastify's routes do */
  validator: Compiler;
  /** an onRoute hook: a route whose request may need TypeBox gets a preValidation hook that loads it first */
  onRoute(route: RouteOptions): void;
  /** TypeBox's compiler, loaded once (the first refusal, or the first request of a route that needs it) */
  loadTypeBox(): Promise<Compiler>;
}

/** The request parts fastify validates, as its compiler and a route's schema name them, and the request's property. */
const PARTS = { body: 'body', headers: 'headers', querystring: 'query', params: 'params' } as const;

/**
 * How this module converts a part's values where TypeBox's Value.Convert gives the same: `plain` says whether
 * every property the schema declares is written plainly (a string; for an integer, its digits without a
 * leading zero, at most 15; for a boolean, `true` or `false`), `apply` converts them in place, as TypeBox
 * does. Undefined for a schema with other kinds of property (TypeBox then converts every value).
 */
interface Conversion {
  plain(value: unknown): boolean;
  apply(value: Record<string, unknown>): void;
}

const PLAIN_INTEGER = /^(?:0|-?[1-9][0-9]{0,14})$/;

function conversionOf(schema: unknown): Conversion | undefined {
  const s = schema as { type?: unknown; properties?: Record<string, { type?: unknown; enum?: unknown[] }> };
  if (s.type !== 'object' || typeof s.properties !== 'object') return undefined;
  const integers: string[] = [];
  const booleans: string[] = [];
  const strings: string[] = [];
  for (const [name, p] of Object.entries(s.properties)) {
    if (p.type === 'integer') integers.push(name);
    else if (p.type === 'boolean') booleans.push(name);
    else if (p.type === 'string' || (p.type === undefined && Array.isArray(p.enum) && p.enum.every((e) => typeof e === 'string'))) strings.push(name);
    else return undefined;
  }
  const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
  return {
    plain(value) {
      if (!isObject(value)) return false;
      for (const name of strings) if (value[name] !== undefined && typeof value[name] !== 'string') return false;
      for (const name of integers) if (value[name] !== undefined && !(typeof value[name] === 'string' && PLAIN_INTEGER.test(value[name]))) return false;
      for (const name of booleans) if (value[name] !== undefined && value[name] !== 'true' && value[name] !== 'false') return false;
      return true;
    },
    apply(value) {
      for (const name of integers) if (value[name] !== undefined) value[name] = Number(value[name]);
      for (const name of booleans) if (value[name] !== undefined) value[name] = value[name] === 'true';
    },
  };
}

/** A body is checked as it is (TypeBox does not convert bodies). */
const AS_IS: Conversion = { plain: () => true, apply: () => {} };

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

  /** A part's generated check and conversion, where it has both. */
  const generatedOf = (part: string, schema: unknown): { check: (value: unknown) => boolean; conversion: Conversion } | undefined => {
    const check = CHECKS.get(schemaKey(part, schema));
    const conversion = part === 'body' ? AS_IS : conversionOf(schema);
    return check && conversion ? { check, conversion } : undefined;
  };

  const compiler: Compiler = (route) => {
    let full: Validate | undefined;
    const fullOf = (compile: Compiler): Validate => (full ??= compile(route));
    const generated = generatedOf(route.httpPart ?? 'body', route.schema);
    // (the route's onRoute wait has loaded TypeBox by the time this runs)
    if (!generated) return (value) => fullOf(typebox!)(value);
    const { check, conversion } = generated;
    return (value) => {
      if (conversion.plain(value)) {
        conversion.apply(value as Record<string, unknown>);
        if (check(value)) return { value };
      }
      if (typebox) return fullOf(typebox)(value);
      // Before TypeBox is loaded: a refusal, or (where no onRoute wait ran first, as for a caller of the
      // validator itself) a value not written plainly. fastify takes a promise as pass or fail: a rejection
      // with TypeBox's errors as the validation error it would have made of them (the same 400 and message),
      // a resolution with TypeBox's result as the value it converted. Were the two ever to disagree,
      // TypeBox's compiler decides, as for the API edge.
      return loadTypeBox().then((compile) => {
        const result = fullOf(compile)(value) as { value?: unknown; error?: FastifySchemaValidationError[] };
        if (result.error) throw Object.assign(new Error('validation failed'), { validation: result.error });
        return result;
      });
    };
  };

  const waitForTypeBox = async (): Promise<void> => {
    if (!typebox) await loadTypeBox();
  };

  return {
    compiler: compiler as unknown as FastifySchemaCompiler<unknown>,
    validator: compiler,
    loadTypeBox,
    onRoute(route) {
      const schema = route.schema as Record<string, unknown> | undefined;
      if (!schema) return;
      const parts = (Object.keys(PARTS) as (keyof typeof PARTS)[]).filter((part) => schema[part] !== undefined);
      let wait: Hook | typeof waitForTypeBox | undefined;
      if (parts.some((part) => !generatedOf(part, schema[part]))) wait = waitForTypeBox;
      else {
        // Values TypeBox must convert: only a request that has one waits.
        const converted = parts.filter((part) => part !== 'body').map((part) => [PARTS[part], generatedOf(part, schema[part])!.conversion] as const);
        if (converted.length > 0)
          wait = (request, _reply, done) => {
            if (typebox || converted.every(([property, conversion]) => conversion.plain(request[property]))) return done();
            loadTypeBox().then(() => done(), done);
          };
      }
      if (!wait) return;
      const hooks = route.preValidation;
      route.preValidation = (hooks === undefined ? [wait] : [...(Array.isArray(hooks) ? hooks : [hooks]), wait]) as RouteOptions['preValidation'];
    },
  };
}
