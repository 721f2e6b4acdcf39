// The SQLite cache's raw DEFLATE: the addon (native/raw-deflate.c, one zlib stream per thread, reset between
// values) and node:zlib write the same format, so a cache file written by either reads with either — a relay
// built without a compiler, or before the addon, and one built with it share files.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deflateRaw, inflateRaw, loadRawDeflateBinding, zlibPath } from '../../../src/storage/raw-deflate.js';

const value = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 3000 }).map((s) => Buffer.from(s)),
  fc.uint8Array({ maxLength: 3000 }).map((a) => Buffer.from(a)),
  // an SSE answer: the same envelope in every event, which is what compresses
  fc.array(fc.string({ maxLength: 12 }), { maxLength: 80 }).map((words) =>
    Buffer.from(words.map((w) => `data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":${JSON.stringify(w)}}}]}\n\n`).join('')),
  ),
);

describe('raw deflate', () => {
  it('runs on the addon, which `npm run build:native` builds at install', () => {
    expect(loadRawDeflateBinding(), 'native/build/Release/raw_deflate.node: `npm run build:native` builds it').toBeDefined();
  });

  it('reads what either path wrote, and writes what either reads (property)', () => {
    fc.assert(
      fc.property(value, (bytes) => {
        const packed = deflateRaw(bytes);
        expect(inflateRaw(packed).equals(bytes)).toBe(true);
        expect(zlibPath.inflateRaw(packed).equals(bytes)).toBe(true);
        expect(inflateRaw(zlibPath.deflateRaw(bytes)).equals(bytes)).toBe(true);
      }),
      { numRuns: 400 },
    );
  });

  it('compresses as node:zlib does at the same level, and grows its output for a value many times its packed size', () => {
    const sse = Buffer.from(Array.from({ length: 60 }, (_, i) => `data: {"choices":[{"delta":{"content":"word ${i}"}}]}\n\n`).join(''));
    expect(deflateRaw(sse).length).toBeLessThanOrEqual(zlibPath.deflateRaw(sse).length + 16);
    const big = Buffer.alloc(3 * 1024 * 1024, 'relay ');
    const packed = deflateRaw(big);
    expect(packed.length).toBeLessThan(big.length / 100);
    expect(inflateRaw(packed).equals(big)).toBe(true);
    expect(inflateRaw(deflateRaw(Buffer.alloc(0))).length).toBe(0);
  });

  it('refuses a cut-short or foreign stream as node:zlib does, and goes on working after', () => {
    const bytes = Buffer.from('an answer long enough to be worth cutting in the middle of its stream, '.repeat(20));
    const packed = deflateRaw(bytes);
    for (const inflate of [inflateRaw, zlibPath.inflateRaw]) {
      expect(() => inflate(packed.subarray(0, packed.length >> 1))).toThrow(/unexpected end of file/);
      expect(() => inflate(Buffer.from('plain text, not deflate'))).toThrow(expect.objectContaining({ code: 'Z_DATA_ERROR' }));
    }
    expect(inflateRaw(packed).equals(bytes)).toBe(true);
  });
});
