// A bounded copy of a response body as it streams past, for the cache entry and the report. Chunks are
// copied into blocks and never copied again while the stream runs: a long stream leaves a few buffers
// behind, not one object per event held for the stream's whole life (a thousand open streams of sixty
// events each would otherwise be sixty thousand small buffers for the collector to keep and move), and not
// the garbage of a buffer that doubles (each outgrown copy lived as long as the stream, so it was freed only
// by a full collection). Each block is a quarter of what the copy holds so far, between 4 KB and 64 KB: the
// room left empty in the last block stays under a quarter of the body (a 15 KB stream takes four 4 KB
// blocks, where blocks doubling from 4 KB took 28 KB). When the stream has ended its copy is handed on as
// it is (wire: the report's batch copies the blocks in, or rebuilds an SSE copy straight into itself; text:
// the cache entry reads it through the thread's scratch bytes), so a thousand streams ending together do not
// each make a joined copy of their own that waits outside V8's heap for a collection. Past `limit` bytes the
// copy is dropped (the answer is still served, just not stored) and only the size is kept. An SSE stream's
// copy (`events`) keeps its first 4 KB so, and each event after them as what it changes in the one before
// (EventCapture): a few dozen bytes where the event was a few hundred.
import type { DeferredBytes, WireBytes } from './exchange-record.js';
import { scratchBytes } from '../scratch-buffer.js';

export interface CapturedBody {
  add(chunk: Buffer): void;
  readonly size: number;
  /** the body so far, joined into one buffer (valid until the next add); undefined once it outgrew the limit */
  bytes(): Buffer | undefined;
  /**
   * the ended body as the report's batch takes it: its blocks, or (an SSE stream's copy) the copy itself, rebuilt
   * straight into the batch when it is encoded (no more adds after this); undefined once it outgrew the limit
   */
  wire(): WireBytes | undefined;
  /** the body so far as UTF-8 text, no copy of its bytes kept; undefined once it outgrew the limit */
  text(): string | undefined;
}

const SMALLEST_BLOCK = 4096;
const LARGEST_BLOCK = 65536;

/** The next block for a copy that holds `held` bytes: a quarter of that, a power of two, 4 KB to 64 KB. */
function blockFor(held: number): number {
  let size = SMALLEST_BLOCK;
  while (size < LARGEST_BLOCK && size * 4 < held) size *= 2;
  return size;
}

/**
 * What both copies share: the size, and the copy let go once it outgrows the limit. A class, not an object
 * literal with a getter (`size`): a literal's getter closure is kept outside V8's young generation, and the
 * copy it captures would outlive every young collection (see EdgeRequest in http/proxy-edge.ts).
 */
abstract class BoundedCopy implements CapturedBody {
  size = 0;
  protected over = false;

  constructor(protected readonly limit: number) {}

  add(chunk: Buffer): void {
    const end = this.size + chunk.length;
    if (!this.over && end > this.limit) {
      this.over = true;
      this.drop();
    }
    this.size = end;
    if (!this.over) this.keep(chunk, end - chunk.length);
  }

  /** a chunk that starts at `start` of the body, within the limit */
  protected abstract keep(chunk: Buffer, start: number): void;
  /** lets go of what is held (the copy outgrew the limit) */
  protected abstract drop(): void;
  abstract bytes(): Buffer | undefined;
  abstract wire(): WireBytes | undefined;
  abstract text(): string | undefined;
}

class Capture extends BoundedCopy {
  /** full blocks, then the one being filled (`room` bytes of it still free) */
  private blocks: Buffer[] = [];
  private room = 0;

  protected drop(): void {
    this.blocks = [];
  }

  protected keep(chunk: Buffer, start: number): void {
    let from = 0;
    while (from < chunk.length) {
      if (this.room === 0) {
        // at least what is left of the chunk, at most what the limit allows
        const next = Math.min(this.limit, Math.max(blockFor(start + from), chunk.length - from));
        this.blocks.push(Buffer.allocUnsafeSlow(next));
        this.room = next;
      }
      const block = this.blocks.at(-1)!;
      const n = Math.min(this.room, chunk.length - from);
      chunk.copy(block, block.length - this.room, from, from + n);
      this.room -= n;
      from += n;
    }
  }

  /** the blocks themselves, in order, the last one cut to what it holds: nothing copied (valid until the next add) */
  wire(): Buffer[] | undefined {
    if (this.over) return undefined;
    const { blocks } = this;
    if (this.room === 0) return blocks.slice();
    const last = blocks.length - 1;
    return blocks.map((b, i) => (i === last ? b.subarray(0, b.length - this.room) : b));
  }

  text(): string | undefined {
    const parts = this.wire();
    if (parts === undefined) return undefined;
    if (parts.length === 1) return parts[0]!.toString('utf8');
    // the blocks joined in the scratch bytes, read as text from there
    const joined = scratchBytes(this.size);
    let at = 0;
    for (const part of parts) at += part.copy(joined, at);
    return joined.toString('utf8', 0, at);
  }

  bytes(): Buffer | undefined {
    if (this.over) return undefined;
    const { blocks } = this;
    if (blocks.length === 0) return Buffer.alloc(0);
    if (blocks.length === 1) return blocks[0]!.subarray(0, this.size);
    // Joined once: the blocks are let go, and the next add starts a new block after the joined copy.
    const whole = Buffer.allocUnsafeSlow(this.size);
    let at = 0;
    for (const block of blocks) at += block.copy(whole, at, 0, Math.min(block.length, this.size - at));
    this.blocks = [whole];
    this.room = 0;
    return whole;
  }
}

/** An SSE event ends at a blank line. */
const LF = 0x0a;
/**
 * The first bytes of a stream are kept as they came: below this a stream's copy was one block anyway, and the
 * comparisons (~0.3 µs an event) are spent only where a copy grows.
 */
const PLAIN_UNTIL = 4096;
/** Delta blocks start smaller: a stream's events cost a few dozen bytes each in them. */
const SMALLEST_DELTA_BLOCK = 1024;

/**
 * A copy of an SSE stream kept as each event's difference from the one before: the bytes it shares with the
 * previous event at its start and at its end are counted, not copied, and only what lies between is kept. A
 * provider repeats its whole envelope in every event (an OpenAI chunk: ~150 bytes of id, object, created,
 * model and choice around a few characters of text), so a stream's copy is a fraction of its bytes while it
 * runs. A unit is what lies between blank lines ("\n\n") within a chunk, or the rest of a chunk; an event
 * split across chunks, or a body that is not SSE at all, is kept whole in more units, never lost.
 *
 * Each unit is written as three LEB128 numbers (the prefix it shares, the suffix it shares, the length of
 * what lies between) followed by those bytes. The copy is rebuilt on reading, the units in order, each
 * prefix and suffix copied from the unit rebuilt before it. At worst (a blank line every two bytes: three
 * bytes of numbers a unit) it holds 1.5 times the bytes, and the limit counts the bytes, so a copy stays
 * within 1.5 times the limit.
 */
class EventCapture extends BoundedCopy implements DeferredBytes {
  private blocks: Buffer[] = [];
  private room = 0;
  /** the last unit's bytes, kept up to date in place (a view of the chunk would keep its read alive) */
  private last: Buffer = EMPTY;
  private lastLength = 0;
  /** the prefix the last unit shared with the one before it: where the next one is compared first */
  private lastPrefix = 0;
  /** the start of the stream, as it came (PLAIN_UNTIL): `headLength` bytes, or all of it while `plain` is not null */
  private head: Buffer | undefined = undefined;
  private headLength = 0;
  /** the last chunk while the start is kept plain; null once units are compared */
  private plain: Buffer | undefined | null = undefined;
  private lastChunkOfHead = 0;
  /** bytes of the encoded units, in the blocks */
  encoded = 0;

  protected drop(): void {
    this.blocks = [];
    this.last = EMPTY;
    this.head = undefined;
    this.plain = null;
  }

  protected keep(chunk: Buffer, start: number): void {
    const length = chunk.length;
    if (this.plain !== null) {
      // The start of the stream, kept as it came in a block of its own (the last chunk is what the first
      // unit after it is compared with: held as a view till then).
      if (start + length <= PLAIN_UNTIL) {
        this.head ??= Buffer.allocUnsafeSlow(PLAIN_UNTIL);
        this.head.set(chunk, start);
        this.plain = chunk;
        return;
      }
      if (this.plain !== undefined) {
        this.remember(this.plain, 0, this.plain.length, 0, 0);
        this.lastChunkOfHead = this.plain.length;
      }
      this.plain = null;
      this.headLength = start;
    }
    let from = 0;
    while (from < length) {
      let to = length;
      for (let lf = chunk.indexOf(LF, from); lf >= 0 && lf < length - 1; lf = chunk.indexOf(LF, lf + 1)) {
        if (chunk[lf + 1] === LF) {
          to = lf + 2;
          break;
        }
      }
      this.unit(chunk, from, to);
      from = to;
    }
  }

  private unit(chunk: Buffer, from: number, to: number): void {
    const last = this.last;
    const lastLength = this.lastLength;
    const length = to - from;
    const most = length < lastLength ? length : lastLength;
    // The envelope is usually the length it was for the unit before: compared in one call (memcmp), then
    // byte by byte (a suffix is short: byte by byte only).
    let prefix = this.lastPrefix;
    if (prefix < 8 || prefix > most || chunk.compare(last, 0, prefix, from, from + prefix) !== 0) prefix = 0;
    while (prefix < most && chunk[from + prefix] === last[prefix]) prefix++;
    const rest = most - prefix;
    let suffix = 0;
    while (suffix < rest && chunk[to - 1 - suffix] === last[lastLength - 1 - suffix]) suffix++;
    const middle = length - prefix - suffix;
    this.write(prefix, suffix, chunk, from + prefix, middle);
    this.remember(chunk, from, to, prefix, suffix);
  }

  /** The last unit becomes chunk[from, to), which shares `prefix` and `suffix` bytes with it. */
  private remember(chunk: Buffer, from: number, to: number, prefix: number, suffix: number): void {
    const last = this.last;
    const length = to - from;
    const middle = length - prefix - suffix;
    if (last.length < length) {
      const grown = Buffer.allocUnsafeSlow(Math.max(length, 2 * last.length, 256));
      grown.set(chunk.subarray(from, to));
      this.last = grown;
    } else {
      // its prefix stays, its suffix moves, the middle is written between
      if (suffix > 0) last.copyWithin(prefix + middle, this.lastLength - suffix, this.lastLength);
      put(last, prefix, chunk, from + prefix, middle);
    }
    this.lastLength = length;
    this.lastPrefix = prefix;
  }

  private write(prefix: number, suffix: number, chunk: Buffer, from: number, middle: number): void {
    const need = varintLength(prefix) + varintLength(suffix) + varintLength(middle) + middle;
    if (this.room < need) {
      // what is left of the last block stays unused: a unit is never split across blocks
      const last = this.blocks.length - 1;
      if (last >= 0) this.blocks[last] = this.blocks[last]!.subarray(0, this.blocks[last]!.length - this.room);
      let size = SMALLEST_DELTA_BLOCK;
      while (size < LARGEST_BLOCK && size * 4 < this.encoded) size *= 2;
      if (size < need) size = need;
      this.blocks.push(Buffer.allocUnsafeSlow(size));
      this.room = size;
    }
    const block = this.blocks[this.blocks.length - 1]!;
    let at = block.length - this.room;
    at = putVarint(block, at, prefix);
    at = putVarint(block, at, suffix);
    at = putVarint(block, at, middle);
    put(block, at, chunk, from, middle);
    this.room -= need;
    this.encoded += need;
  }

  wire(): WireBytes | undefined {
    if (this.over) return undefined;
    if (this.plain !== null) return this.head === undefined ? EMPTY : this.head.subarray(0, this.size);
    return this;
  }

  text(): string | undefined {
    if (this.over) return undefined;
    if (this.plain !== null) return this.head === undefined ? '' : this.head.toString('utf8', 0, this.size);
    const out = scratchBytes(this.size);
    this.writeInto(out);
    return out.toString('utf8', 0, this.size);
  }

  bytes(): Buffer | undefined {
    if (this.over) return undefined;
    if (this.plain !== null) return this.head === undefined ? EMPTY : this.head.subarray(0, this.size);
    const out = Buffer.allocUnsafeSlow(this.size);
    this.writeInto(out);
    return out;
  }

  /** the copy rebuilt into `out`, which is `size` bytes long */
  writeInto(out: Uint8Array): void {
    if (this.plain !== null) {
      if (this.head !== undefined) out.set(this.head.subarray(0, this.size));
      return;
    }
    let at = this.headLength;
    if (this.head !== undefined) out.set(at === this.head.length ? this.head : this.head.subarray(0, at));
    // (the head's last chunk is the unit the first one after it was compared with)
    let lastAt = at - this.lastChunkOfHead;
    let lastLength = this.lastChunkOfHead;
    const n = this.blocks.length;
    for (let b = 0; b < n; b++) {
      const block = this.blocks[b]!;
      const used = b === n - 1 ? block.length - this.room : block.length;
      const cursor = { at: 0 };
      while (cursor.at < used) {
        const prefix = readVarint(block, cursor);
        const suffix = readVarint(block, cursor);
        const middle = readVarint(block, cursor);
        const start = at;
        if (prefix > 0) out.copyWithin(at, lastAt, lastAt + prefix);
        at += prefix;
        put(out, at, block, cursor.at, middle);
        at += middle;
        cursor.at += middle;
        if (suffix > 0) out.copyWithin(at, lastAt + lastLength - suffix, lastAt + lastLength);
        at += suffix;
        lastAt = start;
        lastLength = at - start;
      }
    }
  }
}

const EMPTY = Buffer.alloc(0);

/** Copies `length` bytes of `from` at `at` into `to`: a loop for the few bytes an event's middle usually is. */
function put(to: Uint8Array, at: number, from: Buffer, start: number, length: number): void {
  if (length > 32) {
    to.set(from.subarray(start, start + length), at);
    return;
  }
  for (let i = 0; i < length; i++) to[at + i] = from[start + i]!;
}

function varintLength(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5;
}

/** The LEB128 number at `cursor.at` in `block`; the cursor moves past it. */
function readVarint(block: Buffer, cursor: { at: number }): number {
  let n = 0;
  let shift = 0;
  let byte: number;
  do {
    byte = block[cursor.at++]!;
    n |= (byte & 0x7f) << shift;
    shift += 7;
  } while (byte & 0x80);
  return n;
}

function putVarint(to: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    to[at++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  to[at++] = n;
  return at;
}

export interface CaptureOptions {
  /** the body is an SSE stream: kept as each event's difference from the one before (EventCapture) */
  events?: boolean;
}

export function captureBody(limit: number, options?: CaptureOptions): CapturedBody {
  return options?.events ? new EventCapture(limit) : new Capture(limit);
}
