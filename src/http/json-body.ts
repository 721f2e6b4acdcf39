// The JSON body parser of /api: only application/json (anything else is a 415), strict UTF-8, nesting
// bounded before JSON.parse runs, prototype poisoning (__proto__, constructor.prototype) refused, and
// numbers that do not fit a double (1e400 would silently become Infinity, then null) refused.
import type { FastifyInstance } from 'fastify';
import sjson from 'secure-json-parse';
import { RELAY_ERR_FORBIDDEN_KEY, RELAY_ERR_INVALID_JSON, RELAY_ERR_JSON_TOO_DEEP, RELAY_ERR_VALIDATION } from '../errors.js';
import { jsonDepth } from '../core/json-guard.js';

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
/** Only texts with a long exponent or a very long digit run can hold an out-of-range number. */
const MAYBE_HUGE = /[eE][+-]?\d{3,}|\d{300,}/;

function hasNonFinite(value: unknown): boolean {
  if (typeof value === 'number') return !Number.isFinite(value);
  if (typeof value !== 'object' || value === null) return false;
  for (const v of Array.isArray(value) ? value : Object.values(value)) if (hasNonFinite(v)) return true;
  return false;
}

export function parseStrictJson(raw: Buffer | string, maxDepth: number): unknown {
  let text: string;
  try {
    text = typeof raw === 'string' ? raw : utf8.decode(raw);
  } catch {
    throw new RELAY_ERR_INVALID_JSON('the body is not valid UTF-8');
  }
  if (text.trim() === '') throw new RELAY_ERR_INVALID_JSON('the body is empty');
  if (jsonDepth(text, maxDepth) > maxDepth) throw new RELAY_ERR_JSON_TOO_DEEP(maxDepth);
  let value: unknown;
  try {
    value = sjson.parse(text, null, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    if (/forbidden prototype/.test((err as Error).message)) throw new RELAY_ERR_FORBIDDEN_KEY();
    throw new RELAY_ERR_INVALID_JSON((err as Error).message);
  }
  if (MAYBE_HUGE.test(text) && hasNonFinite(value)) throw new RELAY_ERR_VALIDATION('body has a number out of range');
  return value;
}

export function useStrictJsonBodies(app: FastifyInstance, maxDepth: number): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, parseStrictJson(body as Buffer, maxDepth));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
