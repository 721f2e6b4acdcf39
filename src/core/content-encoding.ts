// A body as its content-encoding says it was sent (gzip, deflate, br), decoded to its bytes. The relay
// passes compressed answers through compressed; it decodes its own copy off the event loop.
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';

/** Throws on an encoding it does not know or bytes that do not decode. */
export function decodeBody(raw: Uint8Array, encoding: string | undefined): Uint8Array {
  const e = (encoding ?? 'identity').trim().toLowerCase();
  if (e === 'identity' || e === '') return raw;
  if (e === 'gzip' || e === 'x-gzip') return gunzipSync(raw);
  if (e === 'deflate') return inflateSync(raw);
  if (e === 'br') return brotliDecompressSync(raw);
  throw new Error(`unsupported content-encoding ${e}`);
}
