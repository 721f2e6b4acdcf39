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

/** Parts of the schemas this long or longer, met more than once, are written once, as a const of their own. */
const SHARED_MIN_CHARS = 60;

/**
 * The schemas as JSON, a part met more than once (the filter properties of three querystrings, the stored report
 * in the list's page) written once, as a const named after where it is first met, and named where it recurs:
 * the text JSON.stringify makes of each schema is the same, only the file is shorter.
 */
function schemaConsts(): string[] {
  const count = new Map<string, number>();
  const firstAt = new Map<string, string>();
  // (a property is named after its object: StatsBody_totals_costUsd, not …_properties_totals_properties_costUsd)
  const walk = (value: unknown, at: string, isProperties = false): void => {
    if (typeof value !== 'object' || value === null) return;
    const text = JSON.stringify(value);
    count.set(text, (count.get(text) ?? 0) + 1);
    if (!firstAt.has(text)) firstAt.set(text, at);
    for (const [key, child] of Object.entries(value)) {
      const name = key.replace(/\W/g, '_');
      walk(child, isProperties ? `${at.slice(0, -'_properties'.length)}_${name}` : `${at}_${name}`, !isProperties && key === 'properties');
    }
  };
  for (const [name, schema] of Object.entries(S)) walk(schema, name);
  // Shorter first: a part's own parts are declared before it.
  const shared = [...count].filter(([text, n]) => n > 1 && text.length >= SHARED_MIN_CHARS).map(([text]) => text).sort((a, b) => a.length - b.length);
  // A part that is a whole schema is named as that schema (the first of that text) and exported where it is declared.
  const exported = new Map<string, string>();
  for (const [name, schema] of Object.entries(S)) if (!exported.has(JSON.stringify(schema))) exported.set(JSON.stringify(schema), name);
  // Any other, after where it is first met (StatsBody_totals_costUsd).
  // (were two met at the same name, the second gets `_2`)
  const taken = new Set(exported.values());
  const names = new Map<string, string>();
  for (const text of shared) {
    let name = exported.get(text);
    if (name === undefined) {
      name = firstAt.get(text)!;
      for (let n = 2; taken.has(name); n++) name = `${firstAt.get(text)!}_${n}`;
      taken.add(name);
    }
    names.set(text, name);
  }
  const write = (value: unknown, indent: string, self?: string): string => {
    if (typeof value !== 'object' || value === null) return JSON.stringify(value);
    const text = JSON.stringify(value);
    if (text !== self && names.has(text)) return names.get(text)!;
    const inner = `${indent}  `;
    if (Array.isArray(value)) return value.length === 0 ? '[]' : `[\n${value.map((v) => inner + write(v, inner)).join(',\n')}\n${indent}]`;
    const entries = Object.entries(value);
    return entries.length === 0 ? '{}' : `{\n${entries.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${write(v, inner)}`).join(',\n')}\n${indent}}`;
  };
  const out = shared.map((text) => {
    const name = names.get(text)!;
    const value = write(JSON.parse(text), '', text);
    return exported.get(text) === name ? `export const ${name} = ${value} as unknown as typeof S.${name};` : `const ${name} = ${value};`;
  });
  if (out.length > 0) out.push('');
  for (const [name, schema] of Object.entries(S)) {
    if (names.get(JSON.stringify(schema)) === name) continue; // (declared above)
    out.push(`export const ${name} = ${write(schema, '')} as unknown as typeof S.${name};`, '');
  }
  return out;
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
  out.push(...schemaConsts());
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
