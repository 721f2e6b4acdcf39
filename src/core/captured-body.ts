// A bounded copy of a response body as it streams past, for the cache entry and the report. Past `limit`
// bytes the copy is dropped (the answer is still served, just not stored) and only the size is kept.
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';

export interface CapturedBody {
  add(chunk: Buffer): void;
  readonly bytes: number;
  /** false once the body outgrew the limit */
  readonly complete: boolean;
  /** the chunks so far; undefined once the body outgrew the limit */
  readonly parts: readonly Buffer[] | undefined;
  /** the body as text, decoded from its content-encoding; undefined when over the limit or undecodable */
  text(contentEncoding: string | undefined): string | undefined;
}

export function captureBody(limit: number): CapturedBody {
  let chunks: Buffer[] | undefined = [];
  let bytes = 0;
  return {
    add(chunk) {
      bytes += chunk.length;
      if (!chunks) return;
      if (bytes > limit) chunks = undefined;
      else chunks.push(chunk);
    },
    get bytes() {
      return bytes;
    },
    get complete() {
      return chunks !== undefined;
    },
    get parts() {
      return chunks;
    },
    text(contentEncoding) {
      if (!chunks) return undefined;
      const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      try {
        return decode(raw, contentEncoding).toString('utf8');
      } catch {
        return undefined;
      }
    },
  };
}

function decode(raw: Buffer, encoding: string | undefined): Buffer {
  const e = (encoding ?? 'identity').trim().toLowerCase();
  if (e === 'identity' || e === '') return raw;
  if (e === 'gzip' || e === 'x-gzip') return gunzipSync(raw);
  if (e === 'deflate') return inflateSync(raw);
  if (e === 'br') return brotliDecompressSync(raw);
  throw new Error(`unsupported content-encoding ${e}`);
}
