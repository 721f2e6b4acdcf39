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

export function captureBody(limit: number): CapturedBody {
  let buf: Buffer | undefined;
  let size = 0;
  let over = false;
  return {
    add(chunk) {
      const end = size + chunk.length;
      if (!over && end > limit) {
        over = true;
        buf = undefined;
      }
      if (!over) {
        if (!buf || end > buf.length) {
          const grown = Buffer.allocUnsafe(Math.min(limit, Math.max(FIRST_BYTES, end, (buf?.length ?? 0) * 2)));
          if (buf) buf.copy(grown, 0, 0, size);
          buf = grown;
        }
        chunk.copy(buf, size);
      }
      size = end;
    },
    get size() {
      return size;
    },
    bytes() {
      if (over) return undefined;
      return buf ? buf.subarray(0, size) : Buffer.alloc(0);
    },
  };
}
