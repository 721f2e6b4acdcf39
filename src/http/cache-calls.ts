// What POST /api/cache/v1/request/save and /retrieve do with a checked request, whichever way it came in:
// through the API edge (api-edge.ts: the usual form, without fastify) or fastify's routes (cache-routes.ts:
// any other form, and the OpenAPI document). The same cache service and key function as the proxy.
import type { IncomingHttpHeaders } from 'node:http';
import type { CacheService } from '../core/cache-service.js';
import { answerBody, fromCachedResponse, jsonCachedResponse } from '../core/cached-response.js';
import { apiNamespace } from '../core/namespace.js';
import { RELAY_ERR_ENTRY_TOO_LARGE } from '../errors.js';
import { type ErrorBody, errorBody } from './error-handler.js';

/** The cache calls' headers, checked against CacheHeaders (a string each, where present). */
type CacheCallHeaders = IncomingHttpHeaders & {
  'x-relay-cache-namespace'?: string;
  'x-relay-cache-ttl'?: string;
  'x-pezzo-project-id'?: string;
};

const namespaceOf = (h: CacheCallHeaders): string => apiNamespace(h['x-relay-cache-namespace'], h['x-pezzo-project-id']);

/** Saves the response under the request's key: 201 {hash, exp}. */
export async function saveCall(cache: CacheService, headers: CacheCallHeaders, body: { request: unknown; response: unknown }): Promise<{ hash: string; exp: string }> {
  const ttl = headers['x-relay-cache-ttl'] === undefined ? undefined : Math.max(1, Number(headers['x-relay-cache-ttl']));
  const hash = cache.hash(body.request);
  const saved = await cache.save(namespaceOf(headers), hash, fromCachedResponse(jsonCachedResponse(body.response))!, ttl);
  if (!saved.stored) throw new RELAY_ERR_ENTRY_TOO_LARGE(cache.maxEntryBytes);
  return { hash, exp: new Date(saved.expiresAt).toISOString() };
}

/** The saved response of the request's key: 200 {hit: true, data}; a miss is a 404, or a 200 for the Pezzo client. */
export async function retrieveCall(cache: CacheService, headers: CacheCallHeaders, body: { request: unknown }): Promise<{ status: 200; body: { hit: boolean; data: unknown } } | { status: 404; body: ErrorBody }> {
  const hash = cache.hash(body.request);
  const hit = await cache.lookup(namespaceOf(headers), hash);
  if (hit) return { status: 200, body: { hit: true, data: answerBody(hit.answer) } };
  // The Pezzo client throws on any non-2xx, so it is told about a miss with a 200.
  if (headers['x-pezzo-api-key'] !== undefined) return { status: 200, body: { hit: false, data: null } };
  return { status: 404, body: errorBody(404, 'RELAY_ERR_CACHE_MISS', `No cached entry for this request (key ${hash})`, { hit: false, data: null }) };
}
