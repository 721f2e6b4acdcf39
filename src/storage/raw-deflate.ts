// Raw DEFLATE for the SQLite cache's values, which are compressed on the event loop as a miss's answer is
// stored and inflated as a hit reads one from the file, and for the body store's blobs (body-codec.ts), on
// the report worker. node:zlib's sync calls build a stream object and a zlib state for every value and tear
// both down after: 41 µs to deflate a 740-byte answer and 16 µs to inflate it, on this project's machine. The
// addon (native/raw-deflate.c, built at install with the others) keeps one zlib stream per thread and resets it
// between values: 4.6–7.4 µs and 7.3 µs. Without the addon (no C compiler at install) node:zlib does the same
// work. Both write standard raw DEFLATE, so a value written by either reads with either.
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { loadAddon } from '../native-addon.js';

interface RawDeflateBinding {
  deflateRaw(bytes: Buffer): Buffer;
  /** throws (code Z_BUF_ERROR, Z_DATA_ERROR) on bytes that are not one whole raw DEFLATE stream */
  inflateRaw(bytes: Buffer): Buffer;
}

/** The addon, or undefined when it was not built (`npm run build:native`). */
export function loadRawDeflateBinding(): RawDeflateBinding | undefined {
  return loadAddon<RawDeflateBinding>('raw_deflate');
}

/**
 * node:zlib's settings for a value of this length: a window no larger than the value (a longer one finds
 * nothing more) and a small hash table. zlib clears both on every call, which at its defaults (a 32 KB window,
 * a 64 KB table) costs more than compressing a 1 KB answer. Level 1 (zlib's fastest; the addon's too): a
 * streamed answer's SSE text, which repeats its envelope in every event, deflates 2.5 times faster than at
 * the default level 6 (a 6.8 KB entry: 53 → 21 µs) for 8% more bytes; an answer's prose ~30% faster for 1-5%
 * more. (The addon sets up one stream with a 32 KB window per thread and only resets it between values.)
 */
function zlibOptions(length: number): { windowBits: number; memLevel: number; level: number } {
  return { windowBits: Math.min(15, Math.max(9, Math.ceil(Math.log2(length + 262)))), memLevel: 4, level: 1 };
}

/** node:zlib's path: the fallback without the addon, and for tests that hold the two to the same bytes. */
export const zlibPath = {
  deflateRaw: (bytes: Buffer): Buffer => deflateRawSync(bytes, zlibOptions(bytes.length)),
  inflateRaw: (bytes: Buffer): Buffer => inflateRawSync(bytes),
};

/**
 * The cache stores keep values from this many characters up deflated (the SQLite cache's rows, the Redis
 * cache's entries); smaller ones as text: below 1 KiB deflating saves a few hundred bytes, for a call on
 * the event loop.
 */
export const DEFLATE_FROM = 1024;

export function deflateRaw(bytes: Buffer): Buffer {
  return (loadRawDeflateBinding() ?? zlibPath).deflateRaw(bytes);
}

export function inflateRaw(bytes: Buffer): Buffer {
  return (loadRawDeflateBinding() ?? zlibPath).inflateRaw(bytes);
}
