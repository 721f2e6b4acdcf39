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
          const check = () => {
            const parts = c.parts();
            const got = c.bytes();
            if (size > limit) {
              expect(parts).toBeUndefined();
              expect(got).toBeUndefined();
            } else {
              expect(Buffer.concat(parts!).equals(Buffer.concat(seen))).toBe(true);
              expect(got!.equals(Buffer.concat(seen))).toBe(true);
            }
          };
          for (const [bytes, readNow] of steps) {
            const chunk = Buffer.from(bytes);
            c.add(chunk);
            seen.push(chunk);
            size += chunk.length;
            expect(c.size).toBe(size);
            if (readNow) check();
          }
          check();
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps the copy in blocks a quarter of its size (4 KB to 64 KB), never copied again while it grows', () => {
    const c = captureBody(1 << 20);
    // 62 events of 244 bytes, as the bench's mock streams them: 15,128 bytes in four 4 KB blocks (blocks
    // doubling from 4 KB took 28 KB for it)
    for (let i = 0; i < 62; i++) c.add(Buffer.alloc(244, i));
    const blocks = (c as unknown as { blocks: Buffer[] }).blocks;
    expect(blocks.map((b) => b.length)).toEqual([4096, 4096, 4096, 4096]);
    // the parts are the blocks themselves, the last one cut to what it holds
    const parts = c.parts()!;
    expect(parts.map((p) => p.length)).toEqual([4096, 4096, 4096, 15128 - 3 * 4096]);
    parts.forEach((p, i) => expect(p.buffer).toBe(blocks[i]!.buffer));
    expect(parts[0]![0]).toBe(0);
    expect(parts[3]!.at(-1)).toBe(61);
    // a long answer's blocks grow with it: never more than a quarter of what is held, nor over 64 KB
    const long = captureBody(1 << 22);
    for (let i = 0; i < 4000; i++) long.add(Buffer.alloc(1000, i));
    const sizes = (long as unknown as { blocks: Buffer[] }).blocks.map((b) => b.length);
    let held = 0;
    for (const size of sizes) {
      expect(size === 4096 || size <= held / 2).toBe(true);
      expect(size).toBeLessThanOrEqual(65536);
      held += size;
    }
    expect(sizes.at(-1)).toBe(65536);
    expect(held - 4_000_000).toBeLessThan(65536);
  });

  it('joins the blocks once when read whole, and goes on after the joined copy', () => {
    const c = captureBody(1 << 20);
    for (let i = 0; i < 60; i++) c.add(Buffer.alloc(150, i));
    const whole = c.bytes()!;
    expect(whole.length).toBe(9000);
    expect(whole[0]).toBe(0);
    expect(whole[8999]).toBe(59);
    // joined once: the blocks are let go
    expect((c as unknown as { blocks: Buffer[] }).blocks).toEqual([whole]);
    c.add(Buffer.from('end'));
    expect(c.parts()!.map((p) => p.length)).toEqual([9000, 3]);
    expect(Buffer.concat(c.parts()!).subarray(9000).toString()).toBe('end');
  });
});
