// The JSON body parser of /api: only application/json (anything else is a 415), parsed by the strict
// rules of core/json-guard (UTF-8, depth, prototype keys, number range).
// The body's bytes stay on the request (`rawBody`): a direct-API report goes to the report worker as the
// text it came as, and is parsed there once more rather than serialized here again.
import type { FastifyInstance } from 'fastify';
import { decodeUtf8Strict, parseJsonStrict } from '../core/json-guard.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** the JSON body's bytes as received (set by the /api body parser) */
    rawBody: Buffer | null;
  }
}

export function useStrictJsonBodies(app: FastifyInstance, maxDepth: number): void {
  app.removeAllContentTypeParsers();
  app.decorateRequest('rawBody', null);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    try {
      const value = parseJsonStrict(decodeUtf8Strict(body as Buffer), maxDepth);
      request.rawBody = body as Buffer;
      done(null, value);
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
