// POST /api/cache/v1/request/save and /retrieve: the same cache service and key function as the proxy.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { RELAY_ERR_ENTRY_TOO_LARGE } from '../errors.js';
import type { CacheService } from '../core/cache-service.js';
import { answerBody, fromCachedResponse, jsonCachedResponse } from '../core/cached-response.js';
import { apiNamespace } from '../core/namespace.js';
import { errorBody } from './error-handler.js';
import { CacheHeaders, ErrorBody, RetrieveBody, RetrieveHit, SaveBody, SaveReply } from './schemas.generated.js';

export interface CacheRoutesOptions {
  cache: CacheService;
}

export const cacheRoutes: FastifyPluginAsyncTypebox<CacheRoutesOptions> = async (app, { cache }) => {
  app.post(
    '/api/cache/v1/request/save',
    {
      schema: {
        tags: ['Cache'],
        summary: 'Save a request/response pair',
        headers: CacheHeaders,
        body: SaveBody,
        response: { 201: SaveReply, 400: ErrorBody, 413: ErrorBody, 415: ErrorBody, 503: ErrorBody },
      },
    },
    async (request, reply) => {
      const h = request.headers;
      const namespace = apiNamespace(h['x-relay-cache-namespace'], h['x-pezzo-project-id']);
      const ttl = h['x-relay-cache-ttl'] === undefined ? undefined : Math.max(1, Number(h['x-relay-cache-ttl']));
      const hash = cache.hash(request.body.request);
      const saved = await cache.save(namespace, hash, fromCachedResponse(jsonCachedResponse(request.body.response))!, ttl);
      if (!saved.stored) throw new RELAY_ERR_ENTRY_TOO_LARGE(cache.maxEntryBytes);
      return reply.code(201).send({ hash, exp: new Date(saved.expiresAt).toISOString() });
    },
  );

  app.post(
    '/api/cache/v1/request/retrieve',
    {
      schema: {
        tags: ['Cache'],
        summary: 'Retrieve a cached response by its request',
        description:
          'A miss is a 404, except for the Pezzo client (x-pezzo-api-key present), which gets 200 {hit:false, data:null}.',
        operationId: 'CacheController_retrieveCachedRequest',
        headers: CacheHeaders,
        body: RetrieveBody,
        response: { 200: RetrieveHit, 400: ErrorBody, 404: ErrorBody, 415: ErrorBody, 503: ErrorBody },
      },
    },
    async (request, reply) => {
      const h = request.headers;
      const namespace = apiNamespace(h['x-relay-cache-namespace'], h['x-pezzo-project-id']);
      const hash = cache.hash(request.body.request);
      const hit = await cache.lookup(namespace, hash);
      if (hit) return { hit: true, data: answerBody(hit.answer) };
      // The Pezzo client throws on any non-2xx, so it is told about a miss with a 200.
      if (h['x-pezzo-api-key'] !== undefined) return { hit: false, data: null };
      return reply
        .code(404)
        .send(errorBody(404, 'RELAY_ERR_CACHE_MISS', `No cached entry for this request (key ${hash})`, { hit: false, data: null }));
    },
  );
};
