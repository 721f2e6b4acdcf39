import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { captureBody } from '../../../src/core/captured-body.js';
import type { DeferredBytes, WireBytes } from '../../../src/core/exchange-record.js';

/**
 * The wire form written as the report's batch writes it: into its span of a larger buffer (a view exactly that
 * long). The bytes on either side must come back untouched.
 */
function throughBatch(w: WireBytes): Buffer {
  const blocks = Array.isArray(w) ? (w as readonly Uint8Array[]) : undefined;
  const deferred = w instanceof Uint8Array || blocks ? undefined : (w as DeferredBytes);
  const size = w instanceof Uint8Array ? w.length : blocks ? blocks.reduce((n, b) => n + b.length, 0) : deferred!.size;
  const batch = Buffer.alloc(size + 14, 0xa5);
  const span = batch.subarray(7, 7 + size);
  if (w instanceof Uint8Array) span.set(w);
  else if (blocks) Buffer.concat(blocks).copy(span);
  else deferred!.writeInto(span);
  expect(batch.subarray(0, 7).every((b) => b === 0xa5) && batch.subarray(7 + size).every((b) => b === 0xa5)).toBe(true);
  return Buffer.from(span);
}

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
        fc.array(fc.tuple(fc.uint8Array({ maxLength: 9000, size: 'max' }), fc.boolean()), { maxLength: 60, size: 'max' }),
        fc.integer({ min: 0, max: 200_000 }),
        (steps, limit) => {
          const c = captureBody(limit);
          const seen: Buffer[] = [];
          let size = 0;
          const check = () => {
            const wire = c.wire();
            const text = c.text();
            const got = c.bytes();
            if (size > limit) {
              expect(wire).toBeUndefined();
              expect(text).toBeUndefined();
              expect(got).toBeUndefined();
            } else {
              const all = Buffer.concat(seen);
              // a plain copy crosses as its blocks
              expect(Array.isArray(wire)).toBe(true);
              expect(Buffer.concat(wire as Buffer[]).equals(all)).toBe(true);
              expect(throughBatch(wire!).equals(all)).toBe(true);
              expect(text).toBe(all.toString('utf8'));
              expect(got!.equals(all)).toBe(true);
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
    // the report's batch takes the blocks themselves, the last one cut to what it holds
    const parts = c.wire() as Buffer[];
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
    const parts = c.wire() as Buffer[];
    expect(parts.map((p) => p.length)).toEqual([9000, 3]);
    expect(Buffer.concat(parts).subarray(9000).toString()).toBe('end');
  });
});

/** OpenAI chat chunks as a provider streams them: the same envelope around a few characters each. */
function openAiEvents(n: number, id = 'chatcmpl-9xYz'): Buffer[] {
  const words = ['The', ' quick', ' brown', ' fox', ' jumps', ' over', ' the', ' lazy', ' dog', '.', ' Ünïcödé', ' ✓'];
  return Array.from({ length: n }, (_, i) =>
    Buffer.from(
      `data: {"id":"${id}","object":"chat.completion.chunk","created":1764300000,"model":"gpt-4o-mini-2024-07-18",` +
        `"system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":"${words[i % words.length]}"},` +
        `"logprobs":null,"finish_reason":null}]}\n\n`,
    ),
  );
}

describe('captured SSE stream (events)', () => {
  it('is every chunk, in order, however the bytes are cut and whatever they are, and read at any point', () => {
    const sse = fc
      .array(fc.tuple(fc.constantFrom('data: ', 'event: delta\ndata: ', ''), fc.string({ maxLength: 40 }), fc.constantFrom('\n\n', '\n', '')), {
        maxLength: 400,
        size: 'max',
      })
      .map((events) => Buffer.from(events.map(([a, b, c]) => `${a}{"id":"x","text":${JSON.stringify(b)}}${c}`).join('')));
    const bytes = fc.uint8Array({ maxLength: 12_000, size: 'max' }).map((b) => Buffer.from(b));
    fc.assert(
      fc.property(
        fc.oneof(sse, bytes),
        fc.array(fc.oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 400 }), fc.integer({ min: 4000, max: 9000 })), {
          minLength: 1,
          maxLength: 200,
          size: 'max',
        }),
        fc.oneof(fc.constant(1 << 22), fc.integer({ min: 0, max: 15_000 })),
        fc.array(fc.boolean(), { maxLength: 200, size: 'max' }),
        (body, cuts, limit, reads) => {
          const c = captureBody(limit, { events: true });
          let at = 0;
          let step = 0;
          const check = () => {
            const wire = c.wire();
            // (read before the copies below, as the batch reads it: after everything else at the end)
            const sent = wire && throughBatch(wire);
            const text = c.text();
            const got = c.bytes();
            if (at > limit) {
              expect(got).toBeUndefined();
              expect(wire).toBeUndefined();
              expect(text).toBeUndefined();
            } else {
              const all = body.subarray(0, at);
              expect(got!.equals(all)).toBe(true);
              expect(sent!.equals(all)).toBe(true);
              expect(text).toBe(all.toString('utf8'));
            }
          };
          while (at < body.length) {
            const n = cuts[step % cuts.length]!;
            const chunk = Buffer.from(body.subarray(at, at + n));
            c.add(chunk);
            at += chunk.length;
            expect(c.size).toBe(at);
            if (reads[step++]) check();
          }
          check();
        },
      ),
      { numRuns: 400 },
    );
  });

  it('keeps the first 4 KB as they came, and each event after them as what differs from the one before', () => {
    const events = openAiEvents(62);
    const total = events.reduce((n, e) => n + e.length, 0);
    const c = captureBody(1 << 20, { events: true });
    for (const e of events) c.add(e);
    const held = c as unknown as { head: Buffer; blocks: Buffer[]; encoded: number; last: Buffer };
    expect(total).toBeGreaterThan(15_000);
    expect(held.head.length).toBe(4096);
    // the rest (~11 KB, 45 events) costs a few bytes each: the word, and where it sits in the envelope
    expect(held.encoded).toBeLessThan(45 * 16);
    expect(held.blocks.map((b) => b.length)).toEqual([1024]);
    const whole = Buffer.concat(events);
    expect(c.bytes()!.equals(whole)).toBe(true);
    // the report's batch takes the copy itself and rebuilds it in its own buffer; the cache entry reads it as
    // text: neither makes a copy of its own of the 15 KB
    expect(c.wire()).toBe(c);
    expect(throughBatch(c.wire()!).equals(whole)).toBe(true);
    expect(c.text()).toBe(whole.toString('utf8'));
    // all it holds is the head, one block of differences and the last event: 5.4 KB of 15 KB (the plain copy:
    // four 4 KB blocks)
    expect(held.head.length + held.blocks[0]!.length + held.last.length).toBe(4096 + 1024 + 256);

    // a stream that stays within its start is its head, not copied on reading
    const short = captureBody(1 << 20, { events: true });
    for (const e of openAiEvents(10)) short.add(e);
    expect(short.bytes()!.buffer).toBe((short as unknown as { head: Buffer }).head.buffer);
    expect((short.wire() as Buffer).buffer).toBe((short as unknown as { head: Buffer }).head.buffer);
    expect(short.text()).toBe(Buffer.concat(openAiEvents(10)).toString('utf8'));
  });

  it('finds the events in chunks that hold several of them, or part of one', () => {
    const events = openAiEvents(200);
    const whole = Buffer.concat(events);
    for (const size of [1, 7, 100, 1000, 5000]) {
      const c = captureBody(1 << 22, { events: true });
      for (let at = 0; at < whole.length; at += size) c.add(whole.subarray(at, at + size));
      expect(c.bytes()!.equals(whole)).toBe(true);
    }
    // three events a chunk: still a few bytes an event once past the start
    const c = captureBody(1 << 22, { events: true });
    for (let i = 0; i < events.length; i += 3) c.add(Buffer.concat(events.slice(i, i + 3)));
    expect((c as unknown as { encoded: number }).encoded).toBeLessThan(200 * 16);
    expect(c.bytes()!.equals(whole)).toBe(true);
  });

  it('drops the copy past its limit, as the plain copy does, and keeps counting', () => {
    const c = captureBody(10_000, { events: true });
    for (const e of openAiEvents(60)) c.add(e);
    expect(c.size).toBeGreaterThan(10_000);
    expect(c.bytes()).toBeUndefined();
    expect(c.wire()).toBeUndefined();
    expect(c.text()).toBeUndefined();
    expect(c.size).toBe(Buffer.concat(openAiEvents(60)).length);
    expect((c as unknown as { blocks: Buffer[] }).blocks).toEqual([]);
  });
});
