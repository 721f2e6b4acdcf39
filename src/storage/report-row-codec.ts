// How the SQLite store keeps a report's JSON (bodies already left out): deflated against a fixed dictionary
// of what every report says (its field names, the relay's metadata, a proxied call's usual values), which
// takes a ~1 KB row to ~260 bytes where plain deflate gets ~570. The first byte names the dictionary, so a
// later one can be added beside it; rows written before the body store are plain JSON text and read as such.
// The properties are also kept in a column of their own, as JSON text, for the list's property filters.
import { deflateRawSync, inflateRawSync } from 'node:zlib';

/** Version 1. Never change it: rows written with it must stay readable. Add a version 2 beside it instead. */
const DICTIONARY_1 = Buffer.from(
  '{"metadata":{"client":"llm-relay","clientVersion":"0.1.0","environment":"development","promptId":""},' +
    '"request":{"timestamp":"2026-01-01T00:00:00.000Z","body":0},' +
    '"response":{"timestamp":"2026-01-01T00:00:00.000Z","status":200,"streamed":false,"body":0},' +
    '"properties":{"userId":"","traceId":""},"cacheEnabled":true,"cacheHit":false,' +
    '"proxy":{"method":"POST","path":"/v1/chat/completions","upstream":"https://api.openai.com",' +
    '"cacheStatus":"MISS","cacheKey":"","outcome":"complete","upstreamMs":0},"originReportId":"",' +
    '"id":"","receivedAt":"2026-01-01T00:00:00.000Z","durationMs":0,"status":200,"model":"gpt-4o-mini",' +
    '"provider":"openai","usage":{"inputTokens":0,"outputTokens":0,"totalTokens":0},"costUsd":0,' +
    '"requestBytes":0,"responseBytes":0,"requestSha256":"","responseSha256":"","costSavedUsd":0}',
);

export function packRow(json: string): Buffer {
  const packed = deflateRawSync(json, { dictionary: DICTIONARY_1, level: 9 });
  const out = Buffer.allocUnsafe(packed.length + 1);
  out[0] = 1;
  packed.copy(out, 1);
  return out;
}

/** The report JSON of a row: packed by packRow, or plain text from an older relay. */
export function unpackRow(data: string | Uint8Array): string {
  if (typeof data === 'string') return data;
  const buf = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (buf[0] !== 1) throw new Error(`report row packed with unknown dictionary ${buf[0]}`);
  return inflateRawSync(buf.subarray(1), { dictionary: DICTIONARY_1 }).toString('utf8');
}
