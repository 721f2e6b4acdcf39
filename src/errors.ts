// Every error the relay answers with, in one catalogue. The code is the export name, so a log line, a
// response body and the README's error table all say the same thing. Errors are wrapped once, where they
// enter (a store, the upstream, the parser), keeping the original as `cause`.
import createError from '@fastify/error';

export const RELAY_ERR_VALIDATION = createError('RELAY_ERR_VALIDATION', '%s', 400);
export const RELAY_ERR_INVALID_JSON = createError('RELAY_ERR_INVALID_JSON', 'Body is not valid JSON: %s', 400);
export const RELAY_ERR_JSON_TOO_DEEP = createError(
  'RELAY_ERR_JSON_TOO_DEEP',
  'Body nests deeper than %s levels',
  400,
);
export const RELAY_ERR_FORBIDDEN_KEY = createError(
  'RELAY_ERR_FORBIDDEN_KEY',
  'Body contains a forbidden key (__proto__ or constructor.prototype)',
  400,
);
export const RELAY_ERR_UNSUPPORTED_MEDIA_TYPE = createError(
  'RELAY_ERR_UNSUPPORTED_MEDIA_TYPE',
  'Unsupported content type %s: this endpoint takes application/json',
  415,
);
export const RELAY_ERR_BODY_TOO_LARGE = createError(
  'RELAY_ERR_BODY_TOO_LARGE',
  'Body is larger than the limit of %s bytes',
  413,
);
export const RELAY_ERR_BAD_REQUEST = createError('RELAY_ERR_BAD_REQUEST', '%s', 400);
export const RELAY_ERR_ENTRY_TOO_LARGE = createError(
  'RELAY_ERR_ENTRY_TOO_LARGE',
  'The cache entry is larger than the limit of %s bytes (RELAY_CACHE_MAX_ENTRY_BYTES)',
  413,
);
export const RELAY_ERR_HEADERS_TOO_LARGE = createError(
  'RELAY_ERR_HEADERS_TOO_LARGE',
  'The request headers are larger than the limit of %s bytes (RELAY_MAX_HEADER_BYTES)',
  431,
);
export const RELAY_ERR_REQUEST_TIMEOUT = createError('RELAY_ERR_REQUEST_TIMEOUT', 'The request was not received in time', 408);
export const RELAY_ERR_METHOD_NOT_ALLOWED = createError('RELAY_ERR_METHOD_NOT_ALLOWED', '%s', 405);
export const RELAY_ERR_INVALID_CURSOR = createError('RELAY_ERR_INVALID_CURSOR', 'Invalid cursor: %s', 400);
export const RELAY_ERR_NOT_FOUND = createError('RELAY_ERR_NOT_FOUND', '%s', 404);
export const RELAY_ERR_CACHE_MISS = createError(
  'RELAY_ERR_CACHE_MISS',
  'No cached entry for this request (key %s)',
  404,
);
export const RELAY_ERR_UNAUTHORIZED = createError(
  'RELAY_ERR_UNAUTHORIZED',
  'Missing or invalid relay token: this relay has RELAY_API_TOKENS set, so send one of them as x-relay-token (or Authorization: Bearer on /api); this is the relay\'s token, not your provider API key',
  401,
);
export const RELAY_ERR_CACHE_UNAVAILABLE = createError(
  'RELAY_ERR_CACHE_UNAVAILABLE',
  'The cache store is unavailable: %s',
  503,
);
export const RELAY_ERR_REPORTS_UNAVAILABLE = createError(
  'RELAY_ERR_REPORTS_UNAVAILABLE',
  'The report store is unavailable: %s',
  503,
);
export const RELAY_ERR_UPSTREAM_UNREACHABLE = createError(
  'RELAY_ERR_UPSTREAM_UNREACHABLE',
  'The upstream %s could not be reached (%s)',
  502,
);
export const RELAY_ERR_UPSTREAM_DNS = createError(
  'RELAY_ERR_UPSTREAM_DNS',
  'The upstream host %s could not be resolved (%s)',
  503,
);
export const RELAY_ERR_UPSTREAM_TIMEOUT = createError(
  'RELAY_ERR_UPSTREAM_TIMEOUT',
  'The upstream %s did not answer in time (%s)',
  504,
);
export const RELAY_ERR_CACHE_ONLY_MISS = createError('RELAY_ERR_CACHE_ONLY_MISS', '%s', 504);
export const RELAY_ERR_SHUTTING_DOWN = createError(
  'RELAY_ERR_SHUTTING_DOWN',
  'The relay is shutting down: send the request again (to another instance)',
  503,
);
export const RELAY_ERR_INTERNAL = createError('RELAY_ERR_INTERNAL', 'Internal error', 500);

/** Every error code with its status, for the README table test. */
export const ERROR_CODES = Object.freeze({
  RELAY_ERR_VALIDATION: 400,
  RELAY_ERR_INVALID_JSON: 400,
  RELAY_ERR_JSON_TOO_DEEP: 400,
  RELAY_ERR_FORBIDDEN_KEY: 400,
  RELAY_ERR_INVALID_CURSOR: 400,
  RELAY_ERR_BAD_REQUEST: 400,
  RELAY_ERR_UNAUTHORIZED: 401,
  RELAY_ERR_NOT_FOUND: 404,
  RELAY_ERR_METHOD_NOT_ALLOWED: 405,
  RELAY_ERR_REQUEST_TIMEOUT: 408,
  RELAY_ERR_CACHE_MISS: 404,
  RELAY_ERR_BODY_TOO_LARGE: 413,
  RELAY_ERR_ENTRY_TOO_LARGE: 413,
  RELAY_ERR_UNSUPPORTED_MEDIA_TYPE: 415,
  RELAY_ERR_HEADERS_TOO_LARGE: 431,
  RELAY_ERR_INTERNAL: 500,
  RELAY_ERR_UPSTREAM_UNREACHABLE: 502,
  RELAY_ERR_UPSTREAM_DNS: 503,
  RELAY_ERR_CACHE_UNAVAILABLE: 503,
  RELAY_ERR_REPORTS_UNAVAILABLE: 503,
  RELAY_ERR_SHUTTING_DOWN: 503,
  RELAY_ERR_UPSTREAM_TIMEOUT: 504,
  RELAY_ERR_CACHE_ONLY_MISS: 504,
} as const);

/** Thrown by store adapters when their backend fails; the http layer maps it to a 503. */
export class StoreUnavailableError extends Error {
  readonly store: 'cache' | 'reports';
  constructor(store: 'cache' | 'reports', message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
    this.store = store;
  }
}
