import { describe, expect, it } from 'vitest';
import { uuidv7 } from '../../../src/core/ids.js';

describe('uuidv7', () => {
  it('is an RFC 9562 version 7 UUID carrying the time, and sorts by it', () => {
    const id = uuidv7(0x0190_1234_5678);
    expect(id).toMatch(/^01901234-5678-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const ids = [uuidv7(1000), uuidv7(2000), uuidv7(3000)];
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(Array.from({ length: 1000 }, () => uuidv7(5))).size).toBe(1000);
    // each id carries its own time, whichever id came just before it
    for (const [ms, hex] of [[2000, '00000000-07d0'], [1000, '00000000-03e8'], [1000, '00000000-03e8'], [2 ** 48 + 1, '00000000-0001']] as const)
      expect(uuidv7(ms).slice(0, 15)).toBe(`${hex}-7`);
  });

  it('draws every random character from the pool: across ids of one millisecond each takes all its values', () => {
    const ids = Array.from({ length: 2000 }, () => uuidv7(7)); // several refills of the pool
    for (const id of ids) expect(id).toMatch(/^00000000-0007-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    for (const at of [15, 16, 17, 20, 21, 22, ...Array.from({ length: 12 }, (_, k) => 24 + k)])
      expect(new Set(ids.map((id) => id[at])).size, `character ${at}`).toBe(16);
    expect(new Set(ids.map((id) => id[19])).size).toBe(4);
  });
});
