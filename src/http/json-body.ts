// The JSON body parser of /api: only application/json (anything else is a 415), nesting bounded before
// JSON.parse runs, and prototype poisoning (__proto__, constructor.prototype) refused with a 400.
import type { FastifyInstance } from 'fastify';
import sjson from 'secure-json-parse';
import { RELAY_ERR_FORBIDDEN_KEY, RELAY_ERR_INVALID_JSON, RELAY_ERR_JSON_TOO_DEEP } from '../errors.js';
import { jsonDepth } from '../core/json-guard.js';

export function parseStrictJson(text: string, maxDepth: number): unknown {
  if (text.trim() === '') throw new RELAY_ERR_INVALID_JSON('the body is empty');
  if (jsonDepth(text, maxDepth) > maxDepth) throw new RELAY_ERR_JSON_TOO_DEEP(maxDepth);
  try {
    return sjson.parse(text, null, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    if (/forbidden prototype/.test((err as Error).message)) throw new RELAY_ERR_FORBIDDEN_KEY();
    throw new RELAY_ERR_INVALID_JSON((err as Error).message);
  }
}

export function useStrictJsonBodies(app: FastifyInstance, maxDepth: number): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseStrictJson(body as string, maxDepth));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
