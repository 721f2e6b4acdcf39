// How a body becomes blobs, for what a conversation's turns cost: a message sent again is the same blob
// (made once, then found by its text), and a skeleton that is mostly hashes is kept as it is rather than run
// through the compressor every turn. What the stores do with the blobs is test/contract/body-store.test.ts's.
import { hash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { brotliCompressSync } from 'node:zlib';
import { COMPRESS_FROM, keptRaw, packBlob, splitBody, unpackBlob } from '../../../src/storage/body-codec.js';

/** A whole value's blob, made here from its definition: 'J' + its JSON text, addressed by sha256. */
function wholeBlob(value: unknown): { hash: string; bytes: Buffer } {
  const bytes = Buffer.concat([Buffer.from('J'), Buffer.from(JSON.stringify(value))]);
  return { hash: hash('sha256', bytes, 'hex'), bytes };
}

const message = fc.record({ role: fc.constantFrom('system', 'user', 'assistant'), content: fc.string({ minLength: 64, unit: 'grapheme' }) });

describe('body codec: the blobs of a conversation', () => {
  it('makes every message blob as its definition says, however often the message was seen before (property)', () => {
    fc.assert(
      fc.property(fc.array(message, { minLength: 1, maxLength: 8 }), fc.nat(), (history, cut) => {
        // Two turns of one conversation: the second repeats the first's messages (new objects, equal text).
        const first = history.slice(0, 1 + (cut % history.length));
        const turns = [{ model: 'm', messages: first }, JSON.parse(JSON.stringify({ model: 'm', messages: history }))];
        for (const body of turns) {
          const split = splitBody(body);
          const children = split.blobs.slice(1);
          expect(children.map((b) => b.hash.toString('hex'))).toEqual(body.messages.map((m: unknown) => wholeBlob(m).hash));
          for (const [i, blob] of children.entries()) expect(blob.bytes.equals(wholeBlob(body.messages[i]).bytes)).toBe(true);
          expect(split.blobs[0]!.hash.toString('hex')).toBe(hash('sha256', split.blobs[0]!.bytes, 'hex'));
        }
      }),
      { numRuns: 200 },
    );
  });

  it('gives a message sent again the blob it made the first time (not copied and hashed again)', () => {
    const history = Array.from({ length: 6 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i} `.repeat(20) }));
    const earlier = splitBody({ model: 'm', messages: history.slice(0, 3) }).blobs.slice(1);
    const later = splitBody(JSON.parse(JSON.stringify({ model: 'm', messages: history }))).blobs.slice(1);
    for (let i = 0; i < 3; i++) expect(later[i]).toBe(earlier[i]);
  });
});

describe('body codec: a short body kept as its text', () => {
  const chat = fc.record({ model: fc.string(), messages: fc.array(fc.oneof(message, fc.jsonValue()), { maxLength: 4 }) });

  it('is the body\'s JSON text exactly when that text is shorter than the limit; else the same blobs as without one (property)', () => {
    fc.assert(
      // (limits around the text's own length, where a miscount would show)
      fc.property(fc.oneof(chat, fc.jsonValue()), fc.integer({ min: -3, max: 3 }), (body, near) => {
        const own = JSON.stringify(body);
        const limit = Math.max(1, own.length + near);
        const split = splitBody(body, limit);
        if (own.length < limit) {
          expect(split).toEqual({ inline: own });
          return;
        }
        const blobs = splitBody(body);
        expect(split.inline).toBeUndefined();
        expect(split.root!.equals(blobs.root)).toBe(true);
        expect(split.blobs!.map((b) => b.bytes.toString('hex'))).toEqual(blobs.blobs.map((b) => b.bytes.toString('hex')));
      }),
      { numRuns: 300 },
    );
  });
});

describe('body codec: what is compressed', () => {
  const longChat = { model: 'm', messages: Array.from({ length: 40 }, (_, i) => ({ role: 'user', content: `message ${i} `.repeat(10) })) };

  it("keeps a long conversation's skeleton as it is: its text is short, the rest is hashes", () => {
    const root = splitBody(longChat).blobs[0]!;
    expect(root.bytes.length).toBeGreaterThan(40 * 32);
    expect(keptRaw(root.bytes)).toBe(true);
    const stored = packBlob(root.bytes);
    expect(stored[0]).toBe(0);
    expect(unpackBlob(stored).equals(root.bytes)).toBe(true);
  });

  it('compresses a skeleton whose own text is long, and every other blob from COMPRESS_FROM bytes on', () => {
    // A structured output's schema stays in the skeleton (it is not split): the skeleton's text is long.
    const properties = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`field_${i}`, { type: 'string', description: 'One fact. '.repeat(3) }]));
    const root = splitBody({ ...longChat, response_format: { type: 'json_schema', json_schema: { name: 'facts', schema: { type: 'object', properties } } } }).blobs[0]!;
    expect(keptRaw(root.bytes)).toBe(false);
    const stored = packBlob(root.bytes);
    expect(stored[0]).toBe(2); // raw DEFLATE
    expect(stored.length).toBeLessThan(root.bytes.length / 2);
    expect(unpackBlob(stored).equals(root.bytes)).toBe(true);

    const small = wholeBlob('x'.repeat(COMPRESS_FROM - 4)).bytes;
    const large = wholeBlob('x'.repeat(COMPRESS_FROM)).bytes;
    expect([keptRaw(small), keptRaw(large)]).toEqual([true, false]);
    expect(unpackBlob(packBlob(large)).equals(large)).toBe(true);
  });

  it('reads blobs as earlier relays kept them: brotli behind flag 1', () => {
    const blob = wholeBlob({ role: 'assistant', content: 'An answer kept before blobs were deflated. '.repeat(20) }).bytes;
    const earlier = Buffer.concat([Buffer.from([1]), brotliCompressSync(blob)]);
    expect(unpackBlob(earlier).equals(blob)).toBe(true);
    expect(unpackBlob(packBlob(blob)).equals(blob)).toBe(true);
    expect(packBlob(blob)[0]).toBe(2);
  });
});
