import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { captureBody } from '../../../src/core/captured-body.js';

describe('captured body', () => {
  it('has no getter of its own (size is a field), and copies what passes up to the limit', () => {
    const c = captureBody(10);
    expect(Object.getOwnPropertyDescriptor(c, 'size')?.get).toBeUndefined();
    c.add(Buffer.from('hello '));
    c.add(Buffer.from('you'));
    expect(c.size).toBe(9);
    expect(c.bytes()!.toString()).toBe('hello you');
    c.add(Buffer.from('!!'));
    expect(c.size).toBe(11);
    expect(c.bytes()).toBeUndefined();
  });

  it('is every chunk, in order, whatever their sizes and however often it is read meanwhile', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.uint8Array({ maxLength: 9000 }), fc.boolean()), { maxLength: 60 }),
        fc.integer({ min: 0, max: 200_000 }),
        (steps, limit) => {
          const c = captureBody(limit);
          const seen: Buffer[] = [];
          let size = 0;
          for (const [bytes, readNow] of steps) {
            const chunk = Buffer.from(bytes);
            c.add(chunk);
            seen.push(chunk);
            size += chunk.length;
            expect(c.size).toBe(size);
            if (readNow) {
              const got = c.bytes();
              if (size > limit) expect(got).toBeUndefined();
              else expect(got!.equals(Buffer.concat(seen))).toBe(true);
            }
          }
          const got = c.bytes();
          if (size > limit) expect(got).toBeUndefined();
          else expect(got!.equals(Buffer.concat(seen))).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps the copy in blocks while it grows, not in outgrown buffers copied again', () => {
    const c = captureBody(1 << 20);
    // 60 events of 150 bytes, as a streamed answer sends them: 9,000 bytes in a 4 KB and an 8 KB block
    for (let i = 0; i < 60; i++) c.add(Buffer.alloc(150, i));
    const blocks = (c as unknown as { blocks: Buffer[] }).blocks;
    expect(blocks.map((b) => b.length)).toEqual([4096, 8192]);
    const whole = c.bytes()!;
    expect(whole.length).toBe(9000);
    expect(whole[0]).toBe(0);
    expect(whole[8999]).toBe(59);
    // joined once: the blocks are let go
    expect((c as unknown as { blocks: Buffer[] }).blocks).toEqual([whole]);
  });
});
