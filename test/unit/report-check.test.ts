// The direct-API report route's schema check without TypeBox at run time: src/http/report-check.generated.ts
// is TypeBox's own standalone code for ReportBody (typebox/compile's Code, with the date-time format that
// registerAjvFormats gives the route), kept in the tree. These tests keep it what it says it is: the same text
// TypeBox makes today, and the same answers as the compiler fastify's route uses.
//   UPDATE_GENERATED=1 npx vitest run test/unit/report-check.test.ts      rewrites it after ReportBody changed
import { readFileSync, writeFileSync } from 'node:fs';
import { TypeBoxValidatorCompiler, registerAjvFormats } from '@fastify/type-provider-typebox';
import ajvFormats from 'ajv-formats/dist/formats.js';
import fc from 'fast-check';
import { Code } from 'typebox/compile';
import { describe, expect, it } from 'vitest';
import { Check, EXTERNAL_FORMATS, SetExternal } from '../../src/http/report-check.generated.js';
import { ReportBody } from '../../src/http/schemas.js';

const FILE = new URL('../../src/http/report-check.generated.ts', import.meta.url);
const { fullFormats } = ajvFormats as unknown as { fullFormats: Record<string, { validate: (s: string) => boolean }> };

/** The module's text: TypeBox's code, its unused imports left out, and which format each external is. */
function generate(): string {
  registerAjvFormats();
  const { Code: code, External } = Code(ReportBody);
  // Each external is a format's validator; the module names them so that the route can hand over the same ones.
  const formats = External.variables.map((fn: unknown) => {
    const name = Object.keys(fullFormats).find((f) => fullFormats[f]!.validate === fn);
    if (!name) throw new Error(`an external of ReportBody's code is not one of ajv-formats' validators: ${String(fn)}`);
    return name;
  });
  // An import whose name the code never uses only costs its load (typebox/system: ~50 ms, 10 MB).
  const lines = code.split('\n').filter((line) => {
    const m = /^import \{ (\w+) \} from "typebox\/\w+"$/.exec(line);
    return !m || code.split(m[1]!).length > 2;
  });
  return [
    '// Generated from src/http/schemas.ts (ReportBody) by test/unit/report-check.test.ts with TypeBox\'s Code',
    '// (typebox/compile) after registerAjvFormats(): do not edit; `UPDATE_GENERATED=1 npx vitest run',
    '// test/unit/report-check.test.ts` writes it again. report-edge.ts hands SetExternal the validators named',
    '// in EXTERNAL_FORMATS, from ajv-formats, as the route\'s compiler has them.',
    '// @ts-nocheck',
    ...lines,
    '',
    `export const EXTERNAL_FORMATS = ${JSON.stringify(formats)};`,
    '',
  ].join('\n');
}

describe('the report route check generated from ReportBody', () => {
  it('is what TypeBox generates from the schema today', () => {
    const text = generate();
    if (process.env.UPDATE_GENERATED) writeFileSync(FILE, text);
    expect(readFileSync(FILE, 'utf8'), 'ReportBody changed: UPDATE_GENERATED=1 npx vitest run test/unit/report-check.test.ts').toBe(text);
  });

  it('answers as the route compiler does, on chosen bodies and on generated ones', () => {
    SetExternal({ variables: EXTERNAL_FORMATS.map((name: string) => fullFormats[name]!.validate) });
    registerAjvFormats();
    const route = TypeBoxValidatorCompiler({ schema: ReportBody, method: 'POST', url: '/api/reporting/v2/request', httpPart: 'body' }) as (v: unknown) => { error?: unknown };
    const agree = (value: unknown): void => expect(Check(value), JSON.stringify(value)).toBe(route(value).error === undefined);
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
