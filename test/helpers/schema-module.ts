// Writes the text of src/http/schemas.generated.ts from src/http/schemas.ts: every exported schema as JSON
// (typed as the TypeBox schema it comes from), and for the request parts the routes check (CHECKED), TypeBox's
// standalone check (typebox/compile's Code) after registerAjvFormats(), as the route compiler has them.
// test/unit/schemas-generated.test.ts compares the file with this text (and writes it with UPDATE_GENERATED=1).
import { registerAjvFormats } from '@fastify/type-provider-typebox';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { Code } from 'typebox/compile';
import * as S from '../../src/http/schemas.js';

/** The schemas a request part is checked against, with that part. */
export const CHECKED = {
  ReportBody: 'body',
  SaveBody: 'body',
  RetrieveBody: 'body',
  CacheHeaders: 'headers',
  ListQuery: 'querystring',
  FilterQuery: 'querystring',
  StatsQuery: 'querystring',
  IdParams: 'params',
} as const;

export const GENERATED_FILE = new URL('../../src/http/schemas.generated.ts', import.meta.url);
export const UPDATE_COMMAND = 'UPDATE_GENERATED=1 npx vitest run test/unit/schemas-generated.test.ts';

const formatValidators = fullFormats as unknown as Record<string, { validate?: unknown }>;

/** The source of one value TypeBox's code reads from its `External` list: a pattern or a format's validator. */
function externalSource(name: string, value: unknown): string {
  if (value instanceof RegExp) return `new RegExp(${JSON.stringify(value.source)}, ${JSON.stringify(value.flags)})`;
  const format = Object.keys(formatValidators).find((f) => formatValidators[f]!.validate === value);
  if (format === undefined) throw new Error(`${name}'s check reads an external that is neither a pattern nor one of ajv-formats' validators: ${String(value)}`);
  return `(fullFormats[${JSON.stringify(format)}] as { validate: (s: string) => boolean }).validate`;
}

/** TypeBox's check functions of one schema, as an expression of the check itself. */
function checkSource(name: keyof typeof CHECKED): string {
  const schema = S[name];
  const { Code: code, External } = Code(schema);
  const lines = code.split('\n').filter((line) => line !== '' && line !== '// @ts-ignore');
  const entry = /^export function Check\(value\) \{ return (check_\d+)\(value\) \}$/.exec(lines.at(-1) ?? '')?.[1];
  if (!entry) throw new Error(`TypeBox's code for ${name} no longer ends with the Check this generator expects`);
  const checks = lines.filter((line) => /^const check_\d+ = /.test(line));
  for (const line of lines) {
    const known =
      checks.includes(line) ||
      /^import \{ \w+ \} from "typebox\/\w+"$/.test(line) ||
      line === 'let External = []' ||
      line === 'export function SetExternal(external) { External = external.variables }' ||
      line === lines.at(-1);
    if (!known) throw new Error(`TypeBox's code for ${name} has a line this generator does not know: ${line}`);
  }
  // The checks may not need TypeBox at run time (the point of generating them), except its guards
  // (typebox/guard: a few modules of plain functions, ~7 ms; a string's length in code points, say).
  for (const m of code.matchAll(/^import \{ (\w+) \} from "(typebox\/\w+)"$/gm)) {
    if (m[2] !== 'typebox/guard' && checks.some((line) => line.includes(`${m[1]}.`))) throw new Error(`${name}'s check needs ${m[1]} from ${m[2]} at run time`);
  }
  const externals = External.variables.map((value: unknown) => externalSource(name, value));
  return [
    `((External: readonly unknown[]) => {`,
    ...checks.flatMap((line) => ['    // @ts-ignore: TypeBox\'s code', `    ${line}`]),
    `    return ${entry} as (value: unknown) => boolean;`,
    `  })([${externals.join(', ')}])`,
  ].join('\n');
}

export function generateSchemaModule(): string {
  registerAjvFormats();
  const out = [
    '// Generated from src/http/schemas.ts by test/helpers/schema-module.ts: do not edit. After a change to the',
    `// schemas, \`${UPDATE_COMMAND}\` writes it again.`,
    '// The route schemas as JSON, without TypeBox\'s compiler (~0.5 s and ~30 MB to load; a check may call its',
    '// guards, typebox/guard); their types are those of schemas.ts. CHECKS holds TypeBox\'s standalone checks',
    '// (typebox/compile\'s Code, with the formats of registerAjvFormats) of the request parts the routes take,',
    '// keyed by part and schema text (http/site-validation.ts).',
    "import { fullFormats } from 'ajv-formats/dist/formats.js';",
    "import type * as S from './schemas.js';",
    '',
  ];
  for (const [name, schema] of Object.entries(S)) {
    out.push(`export const ${name} = ${JSON.stringify(schema, null, 2)} as unknown as typeof S.${name};`, '');
  }
  out.push('/** A schema\'s check, by `<part> <schema as JSON>` (schemaKey). */');
  out.push('export const CHECKS: ReadonlyMap<string, (value: unknown) => boolean> = new Map([');
  for (const [name, part] of Object.entries(CHECKED)) {
    out.push(`  [schemaKey(${JSON.stringify(part)}, ${name}), ${checkSource(name as keyof typeof CHECKED)}],`);
  }
  out.push(']);', '');
  // TypeBox's guards, where a check calls them (imported at the top, with the others).
  if (out.some((line) => line.includes('Guard.'))) out.splice(out.indexOf("import type * as S from './schemas.js';"), 0, "import { Guard } from 'typebox/guard';");
  out.push('/** The key of a schema a request part is checked against. */');
  out.push('export function schemaKey(part: string, schema: unknown): string {');
  out.push('  return `${part} ${JSON.stringify(schema)}`;');
  out.push('}', '');
  return out.join('\n');
}
