// A bounded copy of a response body as it streams past, for the cache entry and the report: the chunks
// themselves (no copy, no string) until the end, then one buffer. Past `limit` bytes the copy is dropped
// (the answer is still served, just not stored) and only the size is kept.
export interface CapturedBody {
  add(chunk: Buffer): void;
  readonly size: number;
  /** the chunks so far; undefined once the body outgrew the limit */
  readonly parts: readonly Buffer[] | undefined;
  /** the whole body as one buffer; undefined when it outgrew the limit */
  bytes(): Buffer | undefined;
}

export function captureBody(limit: number): CapturedBody {
  let chunks: Buffer[] | undefined = [];
  let size = 0;
  return {
    add(chunk) {
      size += chunk.length;
      if (!chunks) return;
      if (size > limit) chunks = undefined;
      else chunks.push(chunk);
    },
    get size() {
      return size;
    },
    get parts() {
      return chunks;
    },
    bytes() {
      if (!chunks) return undefined;
      return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
    },
  };
}
