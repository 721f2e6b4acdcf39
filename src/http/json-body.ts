// The JSON body parser of /api: only application/json (anything else is a 415), parsed by the strict
// rules of core/json-guard (UTF-8, depth, prototype keys, number range).
import type { FastifyInstance } from 'fastify';
import { decodeUtf8Strict, parseJsonStrict } from '../core/json-guard.js';

export function useStrictJsonBodies(app: FastifyInstance, maxDepth: number): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, parseJsonStrict(decodeUtf8Strict(body as Buffer), maxDepth));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
