// A bounded copy of a response body as it streams past, for the cache entry and the report: each chunk is
// copied into one growing buffer (doubling), so a long stream leaves one buffer behind, not one object per
// event held for the stream's whole life (a thousand open streams of sixty events each would otherwise be
// sixty thousand small buffers for the collector to keep and move). Past `limit` bytes the copy is dropped
// (the answer is still served, just not stored) and only the size is kept.
export interface CapturedBody {
  add(chunk: Buffer): void;
  readonly size: number;
  /** the body so far (a view, valid until the next add); undefined once it outgrew the limit */
  bytes(): Buffer | undefined;
}

const FIRST_BYTES = 4096;

/**
 * A class, not an object literal with a getter (`size`): a literal's getter closure is kept outside V8's
 * young generation, and the copy it captures would outlive every young collection (see EdgeRequest in
 * http/proxy-edge.ts).
 */
class Capture implements CapturedBody {
  private buf: Buffer | undefined;
  private over = false;
  size = 0;

  constructor(private readonly limit: number) {}

  add(chunk: Buffer): void {
    const end = this.size + chunk.length;
    if (!this.over && end > this.limit) {
      this.over = true;
      this.buf = undefined;
    }
    if (!this.over) {
      let buf = this.buf;
      if (!buf || end > buf.length) {
        const grown = Buffer.allocUnsafe(Math.min(this.limit, Math.max(FIRST_BYTES, end, (buf?.length ?? 0) * 2)));
        if (buf) buf.copy(grown, 0, 0, this.size);
        this.buf = buf = grown;
      }
      chunk.copy(buf, this.size);
    }
    this.size = end;
  }

  bytes(): Buffer | undefined {
    if (this.over) return undefined;
    return this.buf ? this.buf.subarray(0, this.size) : Buffer.alloc(0);
  }
}

export function captureBody(limit: number): CapturedBody {
  return new Capture(limit);
}
