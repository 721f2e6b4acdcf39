// A bounded copy of a response body as it streams past, for the cache entry and the report. Chunks are
// copied into blocks and never copied again while the stream runs: a long stream leaves a few buffers
// behind, not one object per event held for the stream's whole life (a thousand open streams of sixty
// events each would otherwise be sixty thousand small buffers for the collector to keep and move), and not
// the garbage of a buffer that doubles (each outgrown copy lived as long as the stream, so it was freed only
// by a full collection). Each block is a quarter of what the copy holds so far, between 4 KB and 64 KB: the
// room left empty in the last block stays under a quarter of the body (a 15 KB stream takes four 4 KB
// blocks, where blocks doubling from 4 KB took 28 KB). When the stream has ended its copy is handed on as
// the blocks themselves (parts: the report's batch copies them in, the cache entry decodes them), so a
// thousand streams ending together do not each make a joined copy while their blocks wait for a full
// collection. Past `limit` bytes the copy is dropped (the answer is still served, just not stored) and
// only the size is kept.
export interface CapturedBody {
  add(chunk: Buffer): void;
  readonly size: number;
  /** the body so far, joined into one buffer (valid until the next add); undefined once it outgrew the limit */
  bytes(): Buffer | undefined;
  /** the body so far as its blocks, in order, nothing copied (valid until the next add); undefined once it outgrew the limit */
  parts(): Buffer[] | undefined;
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
 * A class, not an object literal with a getter (`size`): a literal's getter closure is kept outside V8's
 * young generation, and the copy it captures would outlive every young collection (see EdgeRequest in
 * http/proxy-edge.ts).
 */
class Capture implements CapturedBody {
  /** full blocks, then the one being filled (`room` bytes of it still free) */
  private blocks: Buffer[] = [];
  private room = 0;
  private over = false;
  size = 0;

  constructor(private readonly limit: number) {}

  add(chunk: Buffer): void {
    const end = this.size + chunk.length;
    if (!this.over && end > this.limit) {
      this.over = true;
      this.blocks = [];
    }
    this.size = end;
    if (this.over) return;
    const start = end - chunk.length;
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

  parts(): Buffer[] | undefined {
    if (this.over) return undefined;
    const { blocks } = this;
    if (this.room === 0) return blocks.slice();
    const last = blocks.length - 1;
    return blocks.map((b, i) => (i === last ? b.subarray(0, b.length - this.room) : b));
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

export function captureBody(limit: number): CapturedBody {
  return new Capture(limit);
}
