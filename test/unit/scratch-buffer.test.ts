// The thread's scratch bytes: a cache value's UTF-8 on its way to DEFLATE, a stream's copy rebuilt to be read.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SCRATCH_MAX, scratchBytes, scratchUtf8 } from '../../src/scratch-buffer.js';

describe('scratch bytes', () => {
  it('hold any text as Buffer.from writes it, lone surrogates included, however long', () => {
    const text = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 3000 }),
      fc.string({ unit: 'grapheme', maxLength: 500 }),
      // around the scratch buffer's limit ('é' is one UTF-16 unit and two bytes: from where the length is
      // counted to past what the scratch buffer takes, where the text gets a buffer of its own)
      fc
        .tuple(fc.string({ unit: 'binary', maxLength: 20 }), fc.integer({ min: Math.floor(SCRATCH_MAX / 3) - 10, max: SCRATCH_MAX / 2 + 10 }))
        .map(([s, n]) => s + 'é'.repeat(n) + s),
    );
    fc.assert(
      fc.property(fc.array(text, { minLength: 1, maxLength: 5 }), (texts) => {
        for (const t of texts) expect(scratchUtf8(t).equals(Buffer.from(t))).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('are one buffer for the thread up to their limit, and a buffer of its own above it', () => {
    const a = scratchBytes(100);
    const b = scratchBytes(SCRATCH_MAX);
    expect(a.length).toBe(100);
    expect(b.length).toBe(SCRATCH_MAX);
    // grown once to the limit, then reused: the same memory for every call after
    expect(scratchBytes(10).buffer).toBe(b.buffer);
    expect(scratchUtf8('hello').buffer).toBe(b.buffer);
    const big = scratchBytes(SCRATCH_MAX + 1);
    expect(big.length).toBe(SCRATCH_MAX + 1);
    expect(big.buffer).not.toBe(b.buffer);
    expect(scratchUtf8('x'.repeat(SCRATCH_MAX + 1)).buffer).not.toBe(b.buffer);
  });
});
