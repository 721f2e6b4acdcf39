// Token counts of OpenAI's BPE encodings (o200k_base, cl100k_base) without gpt-tokenizer's encoder objects.
// gpt-tokenizer keeps an encoding's 200,000 ranks as a module of strings, a Map of them, a sorted array of
// byte arrays and a merge cache of up to 100,000 entries: ~25 MB of the report worker's heap (measured),
// for a count. Here the same ranks (gpt-tokenizer's own copy of the rank file) live in typed arrays: every
// token's bytes end to end in rank order, where each starts (the next one's start is where it ends), and an
// open-addressing hash table from bytes to rank whose entries carry bits of their hash beside the rank, so a
// probe reads the token's bytes only when those bits match: 3.2 MB for o200k, 1.6 for cl100k (4.9 and 2.4
// while the table was at most half full and the lengths were an array; docs/benchmarks.md). The pre-split
// (the encoding's regex, gpt-tokenizer's own), the whole-piece lookup and the merge (the lowest rank first,
// the leftmost of equals) are gpt-tokenizer's countTokens step by step, so the counts are the same (a property
// test compares them on random texts); a text holding one of the encoding's special tokens throws, as
// countTokens does. Except around a U+FEFF: gpt-tokenizer keys its ranks by their decoded text, and
// TextDecoder drops a leading byte order mark, so it never finds the BOM's tokens; looked up by bytes here,
// such a text counts as OpenAI's tiktoken counts it.
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';

export type Encoding = 'o200k_base' | 'cl100k_base';

export const ENCODINGS: readonly Encoding[] = ['o200k_base', 'cl100k_base'];

const require = createRequire(import.meta.url);

export interface Ranks {
  /** every token's bytes, end to end, in rank order */
  bytes: Uint8Array;
  /** where token r starts in `bytes` (n + 1 of them: token r ends where r + 1 starts; a rank the file lacks is empty) */
  starts: Uint32Array;
  /**
   * Slots probed linearly from a hash's low bits (`& mask`): 0 is empty, else rank + 1 in the low `rankBits`
   * bits and the high bits of the token's hash above them (a probe whose bits differ is not this token).
   */
  table: Uint32Array;
  mask: number;
  rankBits: number;
}

const NONE = 0x7fffffff;
/** The hash table is made at least this many times as large as the tokens it holds (at most 80% full). */
const TABLE_SLACK = 1.25;

function hashOf(bytes: Uint8Array, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  return h >>> 0;
}

const BASE64 = new Int8Array(256).fill(-1);
for (let i = 0; i < 64; i++) BASE64['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.charCodeAt(i)] = i;
const SPACE = 0x20;
const NEWLINE = 0x0a;

/**
 * The ranks of a tiktoken file (`<token bytes in base64> <rank>` a line), read from its bytes straight
 * into the tables: no string or array per token is ever made.
 */
export function readTiktoken(file: Uint8Array): Ranks {
  // Two passes over the lines: the first sizes the tables, the second fills them.
  let lines = 0;
  let maxRank = -1;
  let total = 0;
  forEachLine(file, (at, space, rank) => {
    // (a token's end is the next rank's start: the bytes must lie in rank order)
    if (rank <= maxRank) throw new Error(`rank ${rank} follows rank ${maxRank}: the rank file is not in rank order`);
    maxRank = rank;
    total += ((space - at) * 3) >> 2;
    lines++;
  });
  const n = maxRank + 1;
  const rankBits = 32 - Math.clz32(n);
  if (rankBits > 24) throw new Error(`${n} ranks leave too few bits of hash in a table entry`);
  let bytes = new Uint8Array(total);
  const starts = new Uint32Array(n + 1);
  let size = 1;
  while (size < lines * TABLE_SLACK) size <<= 1;
  const table = new Uint32Array(size);
  const mask = size - 1;
  let put = 0;
  let next = 0; // the first rank whose start is not set yet
  forEachLine(file, (at, space, rank) => {
    while (next <= rank) starts[next++] = put;
    const from = put;
    let bits = 0;
    let acc = 0;
    for (let i = at; i < space; i++) {
      const v = BASE64[file[i]!]!;
      if (v < 0) continue; // '=' padding
      acc = (acc << 6) | v;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        bytes[put++] = (acc >> bits) & 0xff;
      }
    }
    const hash = hashOf(bytes, from, put);
    let slot = hash & mask;
    while (table[slot] !== 0) slot = (slot + 1) & mask;
    table[slot] = (((hash >>> rankBits) << rankBits) | (rank + 1)) >>> 0;
  });
  starts[n] = put;
  // (the first pass counted the base64 padding as bytes)
  if (put < total) bytes = bytes.slice(0, put);
  return { bytes, starts, table, mask, rankBits };
}

/** Each `<base64> <rank>` line of a tiktoken file: where it starts, where its space is, and its rank. */
function forEachLine(file: Uint8Array, visit: (at: number, space: number, rank: number) => void): void {
  for (let at = 0; at < file.length; ) {
    let end = file.indexOf(NEWLINE, at);
    if (end < 0) end = file.length;
    const space = file.indexOf(SPACE, at);
    if (space > at && space < end) {
      let rank = 0;
      for (let i = space + 1; i < end; i++) rank = rank * 10 + (file[i]! - 48);
      visit(at, space, rank);
    }
    at = end + 1;
  }
}

// ── The tables as one file, written by the build (build-ranks.ts) ──
// Parsing the rank file takes ~140 ms of the report worker's CPU at its first stream without usage (again
// after every idle stop), and its 3.6 MB of base64 text pass through memory on the way. The build writes the
// tables as they lie in memory instead; loading them is one read whose buffer the tables are views of. The
// file is checked against what it was made from (the rank file's size and gpt-tokenizer's version): anything
// else, and the rank file is parsed as before. Little-endian, as every platform Node runs the relay on.

/** 'BPER' */
const MAGIC = 0x52455042;
/** 2: the lengths derived from the starts, the table's entries tagged with their hash (1: neither). */
const FORMAT = 2;
const HEADER_WORDS = 8;
/** A section's length in the file: each starts 4-byte aligned. */
const padded = (len: number): number => (len + 3) & ~3;

/** gpt-tokenizer's copy of OpenAI's rank file (the same ranks as its JS tables, which would be a module of 200,000 strings on the heap for good). */
export function rankFile(encoding: Encoding): string {
  return require.resolve(`gpt-tokenizer/data/${encoding}.tiktoken`);
}

/** What a tables file must have been made from: the rank file's size and gpt-tokenizer's version, hashed. */
function sourceStamp(encoding: Encoding): [size: number, version: number] {
  const version = (require('gpt-tokenizer/package.json') as { version: string }).version;
  const v = new TextEncoder().encode(version);
  return [statSync(rankFile(encoding)).size, hashOf(v, 0, v.length)];
}

/** Where the build puts the tables: dist/ranks beside the compiled code (under vitest, src/ranks: none). */
export function tablesFile(encoding: Encoding): URL {
  return new URL(`../ranks/${encoding}.bin`, import.meta.url);
}

/** The tables as one buffer: a header, then starts, table and bytes, each 4-byte aligned. */
export function packRanks(encoding: Encoding, ranks: Ranks): Buffer {
  const n = ranks.starts.length - 1;
  const parts = [ranks.starts, ranks.table, ranks.bytes];
  const size = HEADER_WORDS * 4 + parts.reduce((sum, p) => sum + padded(p.byteLength), 0);
  const out = Buffer.alloc(size);
  const [sourceSize, version] = sourceStamp(encoding);
  const header = new Uint32Array(out.buffer, out.byteOffset, HEADER_WORDS);
  header.set([MAGIC, FORMAT, n, ranks.table.length, ranks.bytes.length, sourceSize, version, ranks.rankBits]);
  let at = HEADER_WORDS * 4;
  for (const p of parts) {
    out.set(new Uint8Array(p.buffer, p.byteOffset, p.byteLength), at);
    at += padded(p.byteLength);
  }
  return out;
}

/** The tables from a file packRanks wrote, or undefined when it is not one for this encoding's ranks. */
export function unpackRanks(encoding: Encoding, file: Uint8Array): Ranks | undefined {
  if (file.byteLength < HEADER_WORDS * 4 || file.byteOffset % 4 !== 0) return undefined;
  const [magic, format, n, tableSize, bytesLength, sourceSize, version, rankBits] = new Uint32Array(file.buffer, file.byteOffset, HEADER_WORDS);
  const [expectSize, expectVersion] = sourceStamp(encoding);
  if (magic !== MAGIC || format !== FORMAT || sourceSize !== expectSize || version !== expectVersion) return undefined;
  if (rankBits !== 32 - Math.clz32(n!) || tableSize === 0 || (tableSize! & (tableSize! - 1)) !== 0) return undefined;
  let at = file.byteOffset + HEADER_WORDS * 4;
  const take = (bytes: number): number => {
    const from = at;
    at += padded(bytes);
    return from;
  };
  const startsAt = take((n! + 1) * 4);
  const tableAt = take(tableSize! * 4);
  const bytesAt = take(bytesLength!);
  if (at - file.byteOffset !== file.byteLength) return undefined;
  const starts = new Uint32Array(file.buffer, startsAt, n! + 1);
  if (starts[n!] !== bytesLength) return undefined;
  return {
    starts,
    table: new Uint32Array(file.buffer, tableAt, tableSize),
    bytes: new Uint8Array(file.buffer, bytesAt, bytesLength),
    mask: tableSize! - 1,
    rankBits: rankBits!,
  };
}

/** The encoding's tables: the build's file when it is there and current, else parsed from the rank file. */
export function loadRanks(encoding: Encoding, tables: URL = tablesFile(encoding)): Ranks {
  let file: Buffer | undefined;
  try {
    file = readFileSync(tables);
  } catch {
    file = undefined; // not built (a run from src/), or not readable: parsed below
  }
  return (file && unpackRanks(encoding, file)) ?? readTiktoken(readFileSync(rankFile(encoding)));
}

/** The rank of bytes[from..to), or NONE. */
function rankOf(ranks: Ranks, piece: Uint8Array, from: number, to: number): number {
  const { bytes, starts, table, mask, rankBits } = ranks;
  const len = to - from;
  const hash = hashOf(piece, from, to);
  const tag = hash >>> rankBits;
  let slot = hash & mask;
  for (;;) {
    const entry = table[slot]!;
    if (entry === 0) return NONE;
    if (entry >>> rankBits === tag) {
      const r = (entry & ((1 << rankBits) - 1)) - 1;
      const s = starts[r]!;
      if (starts[r + 1]! - s === len) {
        let i = 0;
        while (i < len && bytes[s + i] === piece[from + i]) i++;
        if (i === len) return r;
      }
    }
    slot = (slot + 1) & mask;
  }
}

/** The rank of a token's bytes, or undefined when they are not one of the encoding's tokens. */
export function rankOfBytes(ranks: Ranks, bytes: Uint8Array): number | undefined {
  const r = rankOf(ranks, bytes, 0, bytes.length);
  return r === NONE ? undefined : r;
}

export interface BpeCounter {
  count(text: string): number;
}

/** Where gpt-tokenizer keeps each encoding's split regex and its special tokens. */
const PARAMS: Record<Encoding, { regex: string; params: string }> = {
  o200k_base: { regex: 'O200K_TOKEN_SPLIT_REGEX', params: 'O200KBase' },
  cl100k_base: { regex: 'CL100K_TOKEN_SPLIT_REGEX', params: 'Cl100KBase' },
};

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Builds the counter of an encoding (synchronously: reports are derived synchronously). */
export function createBpeCounter(encoding: Encoding): BpeCounter {
  const ranks = loadRanks(encoding);
  const constants = require('gpt-tokenizer/cjs/encodingParams/constants') as Record<string, RegExp>;
  const split = new RegExp(constants[PARAMS[encoding].regex]!.source, 'gu');
  const params = require(`gpt-tokenizer/cjs/encodingParams/${encoding}`) as Record<string, (r: unknown) => { specialTokensEncoder: Map<string, number> }>;
  const specials = [...params[PARAMS[encoding].params]!([]).specialTokensEncoder.keys()];
  const special = new RegExp(`(${specials.map(escapeRegExp).join('|')})`);

  const encoder = new TextEncoder();
  let piece = new Uint8Array(1024);
  let parts = new Int32Array(1025);
  let pairRanks = new Int32Array(1025);

  /** Tokens of one piece of the pre-split, its UTF-8 in piece[0..n). */
  function merge(n: number): number {
    if (parts.length < n + 1) {
      parts = new Int32Array(n + 1);
      pairRanks = new Int32Array(n + 1);
    }
    // parts[i]: where part i starts; pairRanks[i]: the rank of parts i and i + 1 together
    let count = n + 1;
    for (let i = 0; i <= n; i++) {
      parts[i] = i;
      pairRanks[i] = i < n - 1 ? rankOf(ranks, piece, i, i + 2) : NONE;
    }
    const pairRank = (i: number): number => (i + 2 < count ? rankOf(ranks, piece, parts[i]!, parts[i + 2]!) : NONE);
    while (count > 1) {
      let lowest = NONE;
      let at = -1;
      for (let i = 0; i < count - 1; i++) {
        if (pairRanks[i]! < lowest) {
          lowest = pairRanks[i]!;
          at = i;
        }
      }
      if (lowest === NONE) break;
      parts.copyWithin(at + 1, at + 2, count);
      pairRanks.copyWithin(at, at + 1, count);
      count--;
      pairRanks[at] = pairRank(at);
      if (at > 0) pairRanks[at - 1] = pairRank(at - 1);
    }
    return count - 1;
  }

  return {
    count(text) {
      const found = special.exec(text);
      if (found !== null) throw new Error(`Disallowed special token found: ${found[0]}`);
      let tokens = 0;
      split.lastIndex = 0;
      for (let m = split.exec(text); m !== null; m = split.exec(text)) {
        const s = m[0];
        // a UTF-8 character is at most 3 bytes per UTF-16 unit
        if (piece.length < s.length * 3) piece = new Uint8Array(s.length * 3);
        const n = encoder.encodeInto(s, piece).written;
        // (gpt-tokenizer looks a whole piece up by its text: one with a lone surrogate, which UTF-8 turns
        // into U+FFFD, is never found that way, only merged)
        tokens += rankOf(ranks, piece, 0, n) !== NONE && s.isWellFormed() ? 1 : merge(n);
      }
      return tokens;
    },
  };
}
