// The README's settings table and the configuration say the same thing: every setting of src/config.ts has
// its row (variable, flag, the default --help shows), and the table has no row for a setting that is gone.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SETTINGS, defaultShown, flagName } from '../../src/config.js';

describe("the README's settings table", () => {
  const readme = readFileSync(join(__dirname, '../../README.md'), 'utf8');
  // | `RELAY_X` | `--x` | `default` (words) | meaning |
  const rows = new Map(
    [...readme.matchAll(/^\| `([A-Z_]+)` \| `(--[a-z-]+)` \| ([^|]+) \|/gm)].map((m) => [
      m[1]!,
      { flag: m[2]!, default: m[3]!.replace(/`/g, '').trim() },
    ]),
  );

  it('has a row for every setting, with its flag and the default --help shows', () => {
    const expected = Object.fromEntries(SETTINGS.map((s) => [s.env, { flag: flagName(s), default: defaultShown(s) }]));
    expect(Object.fromEntries(rows)).toEqual(expected);
  });
});
