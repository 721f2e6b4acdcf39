// The error catalogue, the code list and the README's error table say the same thing.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as errors from '../../src/errors.js';

describe('error catalogue', () => {
  const readme = readFileSync(join(__dirname, '../../README.md'), 'utf8');
  const table = new Map(
    [...readme.matchAll(/^\| `(RELAY_ERR_[A-Z_]+)` \| (\d{3}) \|/gm)].map((m) => [m[1]!, Number(m[2])]),
  );

  it('every exported error is in ERROR_CODES with its status, and the other way round', () => {
    const exported = Object.entries(errors)
      .filter(([name]) => name.startsWith('RELAY_ERR_'))
      .map(([name, ctor]) => [name, new (ctor as new (...a: unknown[]) => { statusCode: number; code: string })('x', 'y').statusCode] as const);
    expect(Object.fromEntries(exported)).toEqual(errors.ERROR_CODES);
    for (const [name] of exported) expect(new (errors as any)[name]('x', 'y').code).toBe(name);
  });

  it('the README table lists exactly the codes, with their statuses', () => {
    expect(Object.fromEntries(table)).toEqual(errors.ERROR_CODES);
  });
});
