// A bounded copy of a response body as it streams past, for the cache entry and the report. Chunks are
// copied into blocks that grow from 4 KB to 64 KB and are never copied again while the stream runs: a long
// stream leaves a few buffers behind, not one object per event held for the stream's whole life (a thousand
// open streams of sixty events each would otherwise be sixty thousand small buffers for the collector to
// keep and move), and not the garbage of a buffer that doubles (each outgrown copy lived as long as the
// stream, so it was freed only by a full collection: 12 KB of garbage for every 16 KB buffer). The copy is
// joined into one buffer when it is read. Past `limit` bytes the copy is dropped (the answer is still
// served, just not stored) and only the size is kept.
export interface CapturedBody {
  add(chunk: Buffer): void;
  readonly size: number;
  /** the body so far (one buffer; valid until the next add); undefined once it outgrew the limit */
  bytes(): Buffer | undefined;
}

const FIRST_BLOCK = 4096;
const LAST_BLOCK = 65536;

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
    let from = 0;
    while (from < chunk.length) {
      if (this.room === 0) {
        const last = this.blocks.at(-1);
        // each block twice the one before (4 KB, 8 KB, … 64 KB), and at least what is left of the chunk
        const next = Math.min(this.limit, Math.max(last ? Math.min(LAST_BLOCK, last.length * 2) : FIRST_BLOCK, chunk.length - from));
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
