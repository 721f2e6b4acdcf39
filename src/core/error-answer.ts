// The answer to a proxied call that the relay itself refuses or cannot complete (upstream unreachable,
// cache-only miss, a missing relay token, …). It is written in the shape of the provider the client talks
// to, so its SDK shows the relay's message (the openai SDK reads `error.message`, the Anthropic SDK
// `error.error.message`), with the relay's own `statusCode`, `code` and `message` beside it.
import type { IncomingHttpHeaders } from 'node:http';
import type { ProxyResponse } from './proxy-types.js';

export type ErrorDialect = 'openai' | 'anthropic';

/** A relay error reduced to what its answer says. */
export interface RelayErrorFacts {
  statusCode: number;
  /** RELAY_ERR_* */
  code: string;
  message: string;
}

/**
 * The provider a call speaks to: Anthropic when its route goes to Anthropic or the client sent the header
 * every Anthropic SDK sends (`anthropic-version`); OpenAI's shape otherwise (the shape most SDKs read).
 */
export function dialectOf(headers: IncomingHttpHeaders, upstreamOrigin?: string): ErrorDialect {
  if (headers['anthropic-version'] !== undefined) return 'anthropic';
  if (upstreamOrigin !== undefined && /(^|\.)anthropic\.com(:\d+)?$/.test(hostOf(upstreamOrigin))) return 'anthropic';
  return 'openai';
}

function hostOf(origin: string): string {
  const at = origin.indexOf('://');
  return at < 0 ? origin : origin.slice(at + 3);
}

/** The provider's error type for a status: what the SDKs and their users recognise. */
function errorType(dialect: ErrorDialect, status: number): string {
  switch (status) {
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return dialect === 'anthropic' ? 'request_too_large' : 'invalid_request_error';
    case 429:
      return 'rate_limit_error';
    case 504:
      return dialect === 'anthropic' ? 'timeout_error' : 'timeout';
    default:
      if (status < 500) return 'invalid_request_error';
      return dialect === 'anthropic' ? 'api_error' : 'server_error';
  }
}

/** The JSON body of a relay-made error on a proxied route. */
export function errorBody(dialect: ErrorDialect, facts: RelayErrorFacts): Record<string, unknown> {
  const { statusCode, code, message } = facts;
  const type = errorType(dialect, statusCode);
  if (dialect === 'anthropic') return { type: 'error', error: { type, message }, statusCode, code, message };
  return { error: { message, type, code, param: null }, statusCode, code, message };
}

/**
 * The whole answer: status, the body (also what the exchange's report keeps: the body the client got), and
 * headers. A miss that can only be answered from the cache will miss again on a retry, so SDKs (which retry
 * a 504 by themselves) are told not to (`x-should-retry`, read by the openai and Anthropic SDKs).
 */
export function errorAnswer(
  dialect: ErrorDialect,
  facts: RelayErrorFacts,
  headers: Record<string, string> = {},
): { response: ProxyResponse; body: Record<string, unknown> } {
  const body = errorBody(dialect, facts);
  const out: Record<string, string> = Object.assign({ 'content-type': 'application/json; charset=utf-8' }, headers);
  if (facts.code === 'RELAY_ERR_CACHE_ONLY_MISS') out['x-should-retry'] = 'false';
  return { response: { status: facts.statusCode, headers: out, body: JSON.stringify(body), relayError: facts }, body };
}

/** Facts of any error: a relay error keeps its code and status; anything else is an internal error. */
export function errorFacts(err: unknown): RelayErrorFacts {
  const e = err as { statusCode?: unknown; code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' && e.code.startsWith('RELAY_ERR_') ? e.code : undefined;
  const status = typeof e?.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 600 ? e.statusCode : 500;
  if (code === undefined || status === 500) return { statusCode: 500, code: 'RELAY_ERR_INTERNAL', message: 'Internal error' };
  return { statusCode: status, code, message: String(e!.message) };
}
