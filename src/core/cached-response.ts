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
  /** what that exchange cost, i.e. what each hit avoids */
  costUsd?: number | null;
  /** size and sha256 of the JSON answer as it came from upstream (hit reports reuse them) */
  bodyBytes?: number;
  bodySha256?: string;
}

export function jsonCachedResponse(body: unknown): CachedResponse {
  return { v: 1, status: 200, headers: { 'content-type': 'application/json' }, body };
}

export function parseCachedResponse(text: string): CachedResponse | undefined {
  try {
    const parsed = JSON.parse(text) as Partial<CachedResponse> | null;
    if (!parsed || parsed.v !== 1 || typeof parsed.status !== 'number') return undefined;
    return parsed as CachedResponse;
  } catch {
    return undefined;
  }
}
