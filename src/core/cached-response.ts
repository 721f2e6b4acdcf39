// What a cache entry holds, the same for both paths: an entry saved through /api/cache is served by the
// proxy, and a proxy entry is visible through /api/cache retrieve (which answers `body`).
//
// Stored form (v2): a small JSON head, a newline, then the answer's text exactly as it is replayed — the
// upstream's JSON text, or its SSE stream. A miss stores what it received without parsing it, and a hit
// sends the stored text without serializing anything. The body as an object (retrieve, export) is read from
// that text when asked for. Entries of earlier versions (v1: the JSON below, with the body parsed) are
// still read, and v1 stays the exchange format of `cache export|import`.
import { parseSse, readStream } from './sse.js';

/** v1: the exchange format of cache export/import and of the entries of earlier versions. */
export interface CachedResponse {
  v: 1;
  /** upstream status (always 2xx: nothing else is stored) */
  status: number;
  /** the response headers worth replaying (content-type and the provider's request metadata) */
  headers: Record<string, string>;
  /** the JSON body; for a streamed answer, the assembled object (OpenAI / Anthropic) or null */
  body: unknown;
  /** for a streamed answer: the original SSE text, replayed as is */
  sse?: string;
  /** the report of the exchange that filled the entry */
  reportId?: string;
  /** what that exchange cost (entries of earlier versions; a hit otherwise derives it from the body) */
  costUsd?: number | null;
  /** size and sha256 of the JSON answer as it came from upstream (earlier versions) */
  bodyBytes?: number;
  bodySha256?: string;
}

/** A cached answer as the relay uses it. */
export interface StoredAnswer {
  status: number;
  headers: Record<string, string>;
  /** the answer's text as replayed: JSON, or the SSE stream */
  payload: string;
  sse: boolean;
  reportId?: string;
  costUsd?: number | null;
  /** the payload's UTF-8, made once and sent by every hit (answerBytes) */
  bytes?: Buffer;
}

interface Head {
  v: 2;
  status: number;
  headers: Record<string, string>;
  sse?: true;
  reportId?: string;
  costUsd?: number | null;
}

export function jsonCachedResponse(body: unknown): CachedResponse {
  return { v: 1, status: 200, headers: { 'content-type': 'application/json' }, body };
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** Headers that describe one transfer, never a stored answer: the relay sets them itself on a replay. */
const NOT_REPLAYED = new Set(['content-length', 'transfer-encoding', 'content-encoding', 'connection', 'keep-alive', 'upgrade', 'trailer', 'te', 'set-cookie']);

/** Why a stored header cannot be replayed, or undefined when it can. */
export function headerProblem(name: string, value: unknown): string | undefined {
  if (typeof value !== 'string') return 'must be a string';
  if (!TOKEN.test(name)) return 'is not a valid header name';
  if (NOT_REPLAYED.has(name.toLowerCase())) return 'is not replayed from a cache entry';
  if (!FIELD_VALUE.test(value)) return 'has characters a header value cannot carry';
  return undefined;
}

/** An entry from elsewhere (an import, another version) must not be able to break the answer. */
function replayableHeaders(headers: unknown): Record<string, string> | undefined {
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) return undefined;
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) if (!headerProblem(name, value)) out[name] = value as string;
  return out;
}

export function encodeAnswer(a: StoredAnswer): string {
  const head: Head = { v: 2, status: a.status, headers: a.headers };
  if (a.sse) head.sse = true;
  if (a.reportId !== undefined) head.reportId = a.reportId;
  if (a.costUsd !== undefined) head.costUsd = a.costUsd;
  // JSON.stringify never writes a raw newline: the first one ends the head.
  return `${JSON.stringify(head)}\n${a.payload}`;
}

/** The stored entry as an answer, or undefined when it is not one (damaged, or from a future version). */
export function decodeAnswer(text: string): StoredAnswer | undefined {
  try {
    if (text.startsWith('{"v":2,')) {
      const end = text.indexOf('\n');
      if (end < 0) return undefined;
      const head = JSON.parse(text.slice(0, end)) as Head;
      const headers = replayableHeaders(head.headers);
      if (typeof head.status !== 'number' || !headers) return undefined;
      const answer: StoredAnswer = { status: head.status, headers, payload: text.slice(end + 1), sse: head.sse === true };
      if (typeof head.reportId === 'string') answer.reportId = head.reportId;
      if (head.costUsd !== undefined) answer.costUsd = head.costUsd;
      return answer;
    }
    const v1 = JSON.parse(text) as Partial<CachedResponse> | null;
    if (!v1 || v1.v !== 1 || typeof v1.status !== 'number') return undefined;
    return fromCachedResponse(v1 as CachedResponse);
  } catch {
    return undefined;
  }
}

/** A v1 value (an import, an API save, an entry of an earlier version) as an answer. */
export function fromCachedResponse(r: CachedResponse): StoredAnswer | undefined {
  const headers = replayableHeaders(r.headers);
  if (!headers) return undefined;
  const sse = typeof r.sse === 'string';
  const answer: StoredAnswer = { status: r.status, headers, payload: sse ? r.sse! : JSON.stringify(r.body), sse };
  if (typeof r.reportId === 'string') answer.reportId = r.reportId;
  if (typeof r.costUsd === 'number' || r.costUsd === null) answer.costUsd = r.costUsd;
  return answer;
}

/** The payload as bytes, encoded once per answer: a hit writes them, and its record carries them. */
export function answerBytes(a: StoredAnswer): Buffer {
  return (a.bytes ??= Buffer.from(a.payload));
}

/** The answer's body as an object: the JSON parsed, or a stream assembled (OpenAI / Anthropic; else null). */
export function answerBody(a: StoredAnswer): unknown {
  if (a.sse) return readStream(parseSse(a.payload)).body ?? null;
  try {
    return JSON.parse(a.payload);
  } catch {
    return null;
  }
}

/** The v1 exchange format of an answer (cache export). */
export function toCachedResponse(a: StoredAnswer): CachedResponse {
  const r: CachedResponse = { v: 1, status: a.status, headers: a.headers, body: answerBody(a) };
  if (a.sse) r.sse = a.payload;
  if (a.reportId !== undefined) r.reportId = a.reportId;
  if (a.costUsd !== undefined) r.costUsd = a.costUsd;
  return r;
}
