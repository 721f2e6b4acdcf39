// The relay's own BPE counter gives gpt-tokenizer's countTokens to the token, on both encodings: random
// texts of every kind (ASCII, words, unicode with lone surrogates and combining marks, numbers, whitespace
// runs, contractions), fixed samples, and a special token throws as it does there. The one place they part
// is a U+FEFF (a byte order mark): gpt-tokenizer keys its ranks by their text decoded with TextDecoder, which
// drops a leading BOM, so it never finds the BOM's tokens and miscounts; the relay counts those texts as
// OpenAI's tiktoken does (its counts, below, taken with the tiktoken npm package, OpenAI's Rust core).
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ENCODINGS, type Encoding, type Ranks, createBpeCounter, loadRanks, packRanks, rankFile, rankOfBytes, readTiktoken, unpackRanks } from '../../../src/core/bpe-count.js';

const require = createRequire(import.meta.url);

const pieces = fc.constantFrom(
  'the', ' the', 'The', ' quick', 'brown', ' fox', "'s", "'LL", "'re", ' naïve', ' café', '日本語', 'Привет', ' مرحبا',
  '😀', '🇩🇪', '👩‍👩‍👧', '\u0301', '\u200b', '\u00a0', 'İ', 'ǅ', 'ß', '٣', '12', '345', '6789', '3.14', ' ', '  ', '\n',
  '\r\n', '\n\n\n', '\t', '...', '!?', '/', '//', '->', '{"a":1}', '<|', '|>', '<|im', 'http://x.io/a?b=c',
  '\uD800', '\uDC00', '\uD83D', 'x'.repeat(40), 'ab'.repeat(30),
);
const texts = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.array(pieces, { maxLength: 30 }).map((p) => p.join('')),
  fc.array(fc.oneof(pieces, fc.string({ unit: 'grapheme-composite', maxLength: 5 })), { maxLength: 20 }).map((p) => p.join('')),
  fc.lorem({ maxCount: 40, mode: 'sentences' }),
);

/** Texts gpt-tokenizer counts right: none holds a U+FEFF (see the top). */
const withoutBom = texts.filter((text) => !text.includes('\uFEFF'));

/** tiktoken's counts of texts with a U+FEFF (`get_encoding(e).encode(text).length`, tiktoken 1.0.22). */
const TIKTOKEN_BOM: Record<Encoding, [string, number][]> = {
  cl100k_base: [['\uFEFF', 1], ['\uFEFFimport', 2], ['a\uFEFF', 2], [' \uFEFF', 1], ['\uFEFF\uFEFF', 2], ['x\uFEFFy', 3]],
  o200k_base: [['\uFEFF', 1], ['\uFEFFimport', 2], ['a\uFEFF', 2], [' \uFEFF', 1], ['\uFEFF\uFEFF', 1], ['x\uFEFFy', 3]],
};

function libraryCount(encoding: Encoding, text: string): number | 'throws' {
  const lib = require(`gpt-tokenizer/encoding/${encoding}`) as { countTokens(t: string): number };
  try {
    return lib.countTokens(text);
  } catch {
    return 'throws';
  }
}

describe.each(ENCODINGS)('BPE counter (%s)', (encoding) => {
  const counter = createBpeCounter(encoding);
  const ours = (text: string): number | 'throws' => {
    try {
      return counter.count(text);
    } catch {
      return 'throws';
    }
  };

  it('counts random texts as gpt-tokenizer does', () => {
    fc.assert(
      fc.property(withoutBom, (text) => {
        expect(ours(text)).toBe(libraryCount(encoding, text));
      }),
      { numRuns: 4000 },
    );
  });

  it('counts fixed samples as gpt-tokenizer does', () => {
    const samples = [
      '',
      'a',
      'Hello, world!',
      'The quick brown fox jumps over the lazy dog. '.repeat(20),
      'x'.repeat(300),
      '1234567890'.repeat(10),
      "I'm sure they'll say it's fine; WE'VE DONE IT'S BEST",
      '    indented\n\tcode();\r\n\r\n  }\n',
      'Ünïcödé 日本語のテキスト 한국어 текст עברית العربية हिन्दी',
      'emoji 😀😃😄 flags 🇩🇪🇫🇷 family 👨‍👩‍👧‍👦',
      'lone \uD800 surrogate \uDFFF here',
      '\uFFFD replacement',
      '{"role":"assistant","content":"Sure! Here is the JSON: {\\"a\\": [1, 2, 3]}"}',
      'say <|endoftext|> now',
      '<|im_start|>user',
      '<|fim_prefix|>',
    ];
    for (const text of samples) expect(ours(text), JSON.stringify(text)).toBe(libraryCount(encoding, text));
  });

  it('counts texts with a byte order mark as tiktoken does, where gpt-tokenizer miscounts', () => {
    for (const [text, tokens] of TIKTOKEN_BOM[encoding]) expect(ours(text), JSON.stringify(text)).toBe(tokens);
    // (gpt-tokenizer's count of a lone BOM, two byte-level tokens: what the filter above keeps out)
    expect(libraryCount(encoding, '\uFEFF')).toBe(2);
  });

  it('throws on a special token, as countTokens does', () => {
    expect(() => counter.count('a <|endoftext|> b')).toThrow('Disallowed special token found: <|endoftext|>');
  });
});

describe.each(ENCODINGS)('the rank tables file the build writes (%s)', (encoding) => {
  const parsed = readTiktoken(readFileSync(rankFile(encoding)));
  const bytesOf = (a: ArrayBufferView): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  const sameTables = (a: Ranks, b: Ranks): boolean =>
    a.mask === b.mask && a.rankBits === b.rankBits && (['bytes', 'starts', 'table'] as const).every((k) => bytesOf(a[k]).equals(bytesOf(b[k])));
  const dir = mkdtempSync(join(tmpdir(), 'relay-ranks-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('finds every token of the rank file by its bytes, and no other bytes; the table is at most 80% full', () => {
    const byBytes = new Map<string, number>();
    for (const line of readFileSync(rankFile(encoding), 'utf8').split('\n')) {
      const [b64, rank] = line.split(' ');
      if (b64 && rank) byBytes.set(Buffer.from(b64, 'base64').toString('latin1'), Number(rank));
    }
    expect(byBytes.size).toBeGreaterThan(99_000);
    for (const [bytes, rank] of byBytes) expect(rankOfBytes(parsed, Buffer.from(bytes, 'latin1'))).toBe(rank);
    // short byte strings are often tokens, longer ones seldom: both answers are checked against the file
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 8 }), (bytes) => {
        expect(rankOfBytes(parsed, bytes)).toBe(byBytes.get(Buffer.from(bytes).toString('latin1')));
      }),
      { numRuns: 20_000 },
    );
    const used = parsed.table.reduce((sum, entry) => sum + (entry === 0 ? 0 : 1), 0);
    expect(used).toBe(byBytes.size);
    expect(parsed.table.length).toBeGreaterThanOrEqual(used * 1.25);
    expect(parsed.table.length / 2).toBeLessThan(used * 1.25);
  });

  it('holds exactly the parsed tables, and loadRanks takes them from it (views of the one buffer read)', () => {
    // (npm test builds first: dist/ranks is the build's)
    const built = new URL(`../../../dist/ranks/${encoding}.bin`, import.meta.url);
    const file = readFileSync(built);
    expect(sameTables(unpackRanks(encoding, file)!, parsed)).toBe(true);
    const loaded = loadRanks(encoding, built);
    expect(sameTables(loaded, parsed)).toBe(true);
    expect(loaded.starts.buffer).toBe(loaded.bytes.buffer);
    expect(loaded.bytes.buffer.byteLength).toBe(file.byteLength);
  });

  it('a file made from other ranks, of another format, cut short or missing is not used: the rank file is parsed', () => {
    const good = packRanks(encoding, parsed);
    const other = encoding === 'o200k_base' ? 'cl100k_base' : 'o200k_base';
    const withWord = (index: number, value: number): Buffer => {
      const copy = Buffer.from(good);
      copy.writeUInt32LE(value, index * 4);
      return copy;
    };
    const files: Record<string, Buffer> = {
      magic: withWord(0, 0x12345678),
      'format 1 (lengths of their own, entries without hash bits)': withWord(1, 1),
      'rank bits that do not fit the ranks': withWord(7, parsed.rankBits + 1),
      'rank file size': withWord(5, statSync(rankFile(encoding)).size + 1),
      "gpt-tokenizer's version": withWord(6, (good.readUInt32LE(24) ^ 1) >>> 0),
      'cut short': good.subarray(0, good.length - 8),
      'one word too many': Buffer.concat([good, Buffer.alloc(4)]),
      "the other encoding's": packRanks(other, readTiktoken(readFileSync(rankFile(other)))),
      empty: Buffer.alloc(0),
    };
    for (const [name, bytes] of Object.entries(files)) {
      const file = join(dir, `${name}.bin`);
      writeFileSync(file, bytes);
      expect(unpackRanks(encoding, readFileSync(file)), name).toBeUndefined();
      const loaded = loadRanks(encoding, pathToFileURL(file));
      expect(sameTables(loaded, parsed), name).toBe(true);
      expect(loaded.starts.buffer, name).not.toBe(loaded.bytes.buffer);
    }
    const missing = loadRanks(encoding, pathToFileURL(join(dir, 'none.bin')));
    expect(sameTables(missing, parsed)).toBe(true);
  });
});
