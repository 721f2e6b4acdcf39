// How a report body becomes content-addressed blobs and back. A body is one blob, its sha256 the address;
// a chat-style request (an object with a `messages` array, and Anthropic's `system`; the Responses API's
// `input` items and `instructions`; an agent's `tools`) and an answer (`choices[i].message`, the Responses
// API's `output` items) are split so that each message or item (of 64 bytes or more), and the tools as one
// value, is a blob of its own, and the body's blob is a small skeleton naming them: a conversation's next
// turn adds only its new messages, and a message sent again (the same bytes) is the same blob. The skeleton
// is the body's JSON with each split value 0, so keys keep their order and odd keys (`__proto__`) their
// place; where the split values go is written beside it, never guessed from the text (a body may hold a 0 of
// its own).
//
// A short body (its JSON text under the caller's `inlineBelow` characters) can instead be kept as that text,
// with no blob at all: for a body of a few hundred bytes a blob costs more than it can save (its hash, a row
// and an index entry, ~130 bytes and two B-tree writes), and a short body is seldom sent again.
//
// Blob bytes (what is hashed):  'J' + JSON text                 a whole value
//                               'S' + u32 header length + header JSON + skeleton JSON + 32-byte hashes
// Stored bytes (what is kept):  0 + blob bytes  |  2 + raw DEFLATE(blob bytes)  (small blobs stay raw; a
//                               skeleton's hashes count as small: no compressor shrinks them)
//                               1 + brotli(blob bytes): written by earlier relays, still read
import { hash } from 'node:crypto';
import { brotliDecompressSync } from 'node:zlib';
import { LRUCache } from 'lru-cache';
import { deflateRaw, inflateRaw } from './raw-deflate.js';

export type Hash = Buffer;

export interface Blob {
  hash: Hash;
  bytes: Buffer;
  /** the hash as hex, once a writer needed it (a blob of a kept body is written again with every use) */
  hex?: string;
}

/** A body as blobs: `root` is the one a report names; `blobs` holds every blob it needs, root included. */
export interface SplitBody {
  root: Hash;
  blobs: Blob[];
  inline?: undefined;
}

/** A body kept as its JSON text (shorter than the `inlineBelow` it was split with): no blob. */
export interface InlineBody {
  inline: string;
  root?: undefined;
  blobs?: undefined;
}

/**
 * Where the split values of a skeleton were, in the order their hashes follow it: every `messages[i]` (m:
 * their count) or those listed (mi), `system`, `choices[i].message` for i in `c`; then (the Responses API's
 * and agents') every `input[i]` (i) or those listed (ii), `instructions` (n), every `output[i]` (o) or
 * those listed (oi), and `tools` (t) as one value.
 */
interface Header {
  m?: number;
  mi?: number[];
  s?: 1;
  c?: number[];
  i?: number;
  ii?: number[];
  n?: 1;
  o?: number;
  oi?: number[];
  t?: 1;
}

const WHOLE = 0x4a; // 'J'
const SKELETON = 0x53; // 'S'
const HASH_BYTES = 32;
/**
 * A message whose JSON is shorter than this stays in its skeleton: a blob of its own would cost more (its
 * hash twice, its row, an insert) than repeating a few dozen bytes in the turns that follow.
 */
const SPLIT_FROM = 64;
/**
 * Below this, compressing gains too little to pay for its work. Chat messages and answers above it still
 * halve (conversations.mjs, when blobs were brotli'd: the data dir at 2.9× the distinct content with 512, 3.5×
 * without compressing up to 1 KiB).
 */
export const COMPRESS_FROM = 512;

/**
 * Text and blob bytes of the split values' blobs made lately (a few thousand chat messages). Each turn of a
 * conversation sends its whole history (and an agent its tools) again: its messages, stringified for their
 * blobs, are found here by their JSON text instead of being copied and hashed again (sha256 and the copy are
 * 3.9 of 6.7 µs for a 580-byte message here; the lookup ~2), so a turn costs its new messages, as it does in
 * storage.
 */
const RECENT_BLOB_BYTES = 4 * 1024 * 1024;
const recentBlobs = new LRUCache<string, Blob>({
  maxSize: RECENT_BLOB_BYTES,
  sizeCalculation: (blob, text) => text.length + blob.bytes.length,
});

function sha256(bytes: Buffer): Hash {
  return hash('sha256', bytes, 'buffer') as unknown as Buffer;
}

function blobOf(kind: number, text: string): Blob {
  const bytes = Buffer.allocUnsafe(1 + Buffer.byteLength(text));
  bytes[0] = kind;
  bytes.write(text, 1);
  return { hash: sha256(bytes), bytes };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function own(o: object, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, key);
}

/** A split value's blob: one made lately for the same text, or a new one. */
function childBlob(text: string): Blob {
  let blob = recentBlobs.get(text);
  if (!blob) recentBlobs.set(text, (blob = blobOf(WHOLE, text)));
  return blob;
}

/**
 * The blobs of a body (a JSON value: what JSON.stringify keeps is what is kept). Undefined bodies have none;
 * the caller stores nothing for them. The skeleton is the JSON of a shallow copy of the body in which each
 * split value is 0 (the copies keep every key in its place, `__proto__` included), so it is serialised by
 * JSON.stringify's own fast path rather than through a replacer called for every value. With
 * `inlineBelow`, a body whose JSON text is shorter than that many characters is that text instead (its
 * length is known from the skeleton and the split values' texts: a long body is not serialised once more).
 */
export function splitBody(body: unknown): SplitBody;
export function splitBody(body: unknown, inlineBelow: number): SplitBody | InlineBody;
export function splitBody(body: unknown, inlineBelow = 0): SplitBody | InlineBody {
  if (!isObject(body)) return whole(body, inlineBelow);
  const obj = body;
  /** the split values' JSON texts, in the order their hashes follow the skeleton */
  const texts: string[] = [];
  const header: Header = {};
  let top: Record<string, unknown> | undefined;
  const part = (value: unknown): boolean => {
    // An array's undefined element is null in JSON, as in the body's own text.
    const text = JSON.stringify(value) ?? 'null';
    if (text.length < SPLIT_FROM) return false;
    texts.push(text);
    return true;
  };
  /** Each item of the array at `key` that is long enough becomes a blob: the indexes of those that did. */
  const items = (key: string): { split: number[]; all: boolean } | undefined => {
    const list = own(obj, key) ? obj[key] : undefined;
    if (!Array.isArray(list)) return undefined;
    let copy: unknown[] | undefined;
    const split: number[] = [];
    for (let i = 0; i < list.length; i++) {
      if (!part(list[i])) continue;
      split.push(i);
      (copy ??= list.slice())[i] = 0;
    }
    if (!copy) return undefined;
    (top ??= { ...obj })[key] = copy;
    return { split, all: split.length === list.length };
  };
  /** The value at `key`, when `kind` holds and it is long enough, becomes one blob. */
  const value = (key: string, kind: (v: unknown) => boolean): boolean => {
    const v = own(obj, key) ? obj[key] : undefined;
    if (!kind(v) || !part(v)) return false;
    (top ??= { ...obj })[key] = 0;
    return true;
  };

  const messages = items('messages');
  if (messages?.all) header.m = messages.split.length;
  else if (messages) header.mi = messages.split;
  if (value('system', (v) => typeof v === 'string' || Array.isArray(v))) header.s = 1;
  const choices = own(obj, 'choices') ? obj['choices'] : undefined;
  if (Array.isArray(choices)) {
    let copy: unknown[] | undefined;
    const c: number[] = [];
    choices.forEach((choice, i) => {
      if (!isObject(choice) || !own(choice, 'message') || choice['message'] === undefined || !part(choice['message'])) return;
      c.push(i);
      (copy ??= choices.slice())[i] = { ...choice, message: 0 };
    });
    if (copy) {
      header.c = c;
      (top ??= { ...obj })['choices'] = copy;
    }
  }
  const input = items('input');
  if (input?.all) header.i = input.split.length;
  else if (input) header.ii = input.split;
  if (value('instructions', (v) => typeof v === 'string')) header.n = 1;
  const output = items('output');
  if (output?.all) header.o = output.split.length;
  else if (output) header.oi = output.split;
  if (value('tools', Array.isArray)) header.t = 1;
  if (!top) return whole(body, inlineBelow);

  const skeleton = JSON.stringify(top);
  if (inlineBelow > 0) {
    // The body's own text is the skeleton's with each split value's 0 replaced by that value's text.
    let length = skeleton.length - texts.length;
    for (const text of texts) length += text.length;
    if (length < inlineBelow) return { inline: JSON.stringify(body) };
  }
  const children = texts.map(childBlob);
  const headerText = JSON.stringify(header);
  const headerLength = Buffer.byteLength(headerText);
  const bytes = Buffer.allocUnsafe(5 + headerLength + Buffer.byteLength(skeleton) + children.length * HASH_BYTES);
  bytes[0] = SKELETON;
  bytes.writeUInt32BE(headerLength, 1);
  let at = 5 + bytes.write(headerText, 5);
  at += bytes.write(skeleton, at);
  for (const child of children) at += child.hash.copy(bytes, at);
  const root: Blob = { hash: sha256(bytes), bytes };
  return { root: root.hash, blobs: [root, ...children] };
}

function whole(body: unknown, inlineBelow: number): SplitBody | InlineBody {
  const text = JSON.stringify(body);
  if (text.length < inlineBelow) return { inline: text };
  const blob = blobOf(WHOLE, text);
  return { root: blob.hash, blobs: [blob] };
}

/** The hashes a blob names (a skeleton's children); none for a whole value. */
export function childrenOf(bytes: Buffer): Hash[] {
  if (bytes[0] !== SKELETON) return [];
  const { hashesAt } = skeletonParts(bytes);
  const out: Hash[] = [];
  for (let at = hashesAt; at < bytes.length; at += HASH_BYTES) out.push(bytes.subarray(at, at + HASH_BYTES));
  return out;
}

function skeletonHeader(bytes: Buffer): { header: Header; headerLength: number; hashesAt: number } {
  const headerLength = bytes.readUInt32BE(1);
  const header = JSON.parse(bytes.toString('utf8', 5, 5 + headerLength)) as Header;
  const count =
    (header.m ?? 0) + (header.mi?.length ?? 0) + (header.s ?? 0) + (header.c?.length ?? 0) + (header.i ?? 0) +
    (header.ii?.length ?? 0) + (header.n ?? 0) + (header.o ?? 0) + (header.oi?.length ?? 0) + (header.t ?? 0);
  return { header, headerLength, hashesAt: bytes.length - count * HASH_BYTES };
}

function skeletonParts(bytes: Buffer): { header: Header; skeleton: string; hashesAt: number } {
  const { header, headerLength, hashesAt } = skeletonHeader(bytes);
  return { header, skeleton: bytes.toString('utf8', 5 + headerLength, hashesAt), hashesAt };
}

/**
 * Whether packBlob keeps these bytes as they are without trying to compress them: fewer than
 * COMPRESS_FROM bytes of text. A skeleton's text is what precedes its hashes (32 random bytes per message,
 * which no compressor shrinks): a long conversation's skeleton is mostly hashes, and compressing it cost a
 * brotli call every turn to save a few dozen bytes.
 */
export function keptRaw(bytes: Buffer): boolean {
  if (bytes.length < COMPRESS_FROM) return true;
  return bytes[0] === SKELETON && skeletonHeader(bytes).hashesAt < COMPRESS_FROM;
}

export class MissingBlobError extends Error {
  constructor(hash: Hash) {
    super(`body blob ${hash.toString('hex')} is missing`);
    this.name = 'MissingBlobError';
  }
}

/** The body a root blob stands for, deep-equal to what was split (key order included). */
export function assembleBody(root: Hash, blob: (hash: Hash) => Buffer | undefined): unknown {
  const read = (hash: Hash): Buffer => {
    const bytes = blob(hash);
    if (!bytes) throw new MissingBlobError(hash);
    return bytes;
  };
  const bytes = read(root);
  if (bytes[0] === WHOLE) return JSON.parse(bytes.toString('utf8', 1));
  const { header, skeleton, hashesAt } = skeletonParts(bytes);
  const body = JSON.parse(skeleton) as Record<string, unknown>;
  let at = hashesAt;
  const next = (): unknown => {
    const child = read(bytes.subarray(at, at + HASH_BYTES));
    at += HASH_BYTES;
    return JSON.parse(child.toString('utf8', 1));
  };
  // Assignments to keys the skeleton already has keep their places in the key order.
  const items = (key: string, all: number | undefined, some: number[] | undefined): void => {
    const list = body[key] as unknown[];
    if (all !== undefined) for (let i = 0; i < all; i++) list[i] = next();
    for (const i of some ?? []) list[i] = next();
  };
  items('messages', header.m, header.mi);
  if (header.s === 1) body['system'] = next();
  for (const i of header.c ?? []) (((body['choices'] as unknown[])[i]) as Record<string, unknown>)['message'] = next();
  items('input', header.i, header.ii);
  if (header.n === 1) body['instructions'] = next();
  items('output', header.o, header.oi);
  if (header.t === 1) body['tools'] = next();
  return body;
}

/**
 * The bytes kept for a blob: compressed when that pays (`raw`: keptRaw's answer, when the caller has it).
 * Raw DEFLATE at zlib's fastest level through the `native/` addon's stream kept per thread (raw-deflate.ts):
 * brotli (quality 5, through node:zlib, which sets up a new encoder for every call) took 54–102 µs for a
 * 950-byte answer where this takes 11–13, for 228 bytes instead of 214; conversations.mjs's data dir 2.68× the
 * distinct content instead of 2.65× (docs/benchmarks.md).
 */
export function packBlob(bytes: Buffer, raw = keptRaw(bytes)): Buffer {
  if (!raw) {
    const packed = deflateRaw(bytes);
    if (packed.length + 1 < bytes.length) return Buffer.concat([FLAG_DEFLATE, packed], packed.length + 1);
  }
  return Buffer.concat([FLAG_RAW, bytes], bytes.length + 1);
}

const FLAG_RAW = Buffer.from([0]);
const BROTLI = 1;
const FLAG_DEFLATE = Buffer.from([2]);

export function unpackBlob(stored: Uint8Array): Buffer {
  const buf = Buffer.isBuffer(stored) ? stored : Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength);
  const flag = buf[0];
  if (flag === FLAG_DEFLATE[0]) return inflateRaw(buf.subarray(1));
  if (flag === BROTLI) return brotliDecompressSync(buf.subarray(1));
  return buf.subarray(1);
}
