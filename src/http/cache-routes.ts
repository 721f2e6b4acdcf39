// POST /api/cache/v1/request/save and /retrieve on fastify: requests of a form the API edge does not take
// (api-edge.ts), and the OpenAPI document. What they do is cache-calls.ts.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { CacheService } from '../core/cache-service.js';
import { retrieveCall, saveCall } from './cache-calls.js';
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
    async (request, reply) => reply.code(201).send(await saveCall(cache, request.headers, request.body)),
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
      const answer = await retrieveCall(cache, request.headers, request.body);
      return answer.status === 404 ? reply.code(404).send(answer.body) : answer.body;
    },
  );
};
