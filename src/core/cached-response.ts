// What a cache entry holds, the same for both paths: an entry saved through /api/cache is served by the
// proxy, and a proxy entry is visible through /api/cache retrieve (which answers `body`).
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
  /** size and sha256 of the JSON answer as it came from upstream (hit reports reuse them) */
  bodyBytes?: number;
  bodySha256?: string;
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

export function parseCachedResponse(text: string): CachedResponse | undefined {
  try {
    const parsed = JSON.parse(text) as Partial<CachedResponse> | null;
    if (!parsed || parsed.v !== 1 || typeof parsed.status !== 'number') return undefined;
    if (typeof parsed.headers !== 'object' || parsed.headers === null) return undefined;
    // An entry from elsewhere (an import, another version) must not be able to break the answer.
    for (const [name, value] of Object.entries(parsed.headers))
      if (headerProblem(name, value)) delete (parsed.headers as Record<string, unknown>)[name];
    return parsed as CachedResponse;
  } catch {
    return undefined;
  }
}
