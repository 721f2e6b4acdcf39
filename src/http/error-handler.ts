// The one root error handler: every error leaves as {statusCode, code, error, message}. Fastify's own
// errors are renamed into the RELAY_ERR_* catalogue so clients see one vocabulary.
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifySchemaValidationError } from 'fastify';

export interface ErrorBody {
  statusCode: number;
  code: string;
  error: string;
  message: string;
  [extra: string]: unknown;
}

export function errorBody(statusCode: number, code: string, message: string, extra: Record<string, unknown> = {}): ErrorBody {
  return { statusCode, code, error: STATUS_CODES[statusCode] ?? 'Error', message, ...extra };
}

const FASTIFY_CODES: Record<string, string> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'RELAY_ERR_UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_BODY_TOO_LARGE: 'RELAY_ERR_BODY_TOO_LARGE',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'RELAY_ERR_INVALID_JSON',
  FST_ERR_CTP_INVALID_JSON_BODY: 'RELAY_ERR_INVALID_JSON',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'RELAY_ERR_BAD_REQUEST',
};

export function toErrorBody(err: FastifyError): ErrorBody {
  if (err.validation) return errorBody(400, 'RELAY_ERR_VALIDATION', validationMessage(err.validationContext ?? 'body', err.validation));
  const status = typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
  // `code` is not always a string: a DOMException (an abort) carries a number.
  const code = typeof err.code === 'string' ? err.code : undefined;
  if (code?.startsWith('RELAY_ERR_')) return errorBody(status, code, err.message);
  const mapped = code ? FASTIFY_CODES[code] : undefined;
  if (mapped) {
    const message = mapped === 'RELAY_ERR_UNSUPPORTED_MEDIA_TYPE' ? 'Unsupported content type: this endpoint takes application/json' : err.message;
    return errorBody(status, mapped, message);
  }
  if (status < 500) return errorBody(status, 'RELAY_ERR_BAD_REQUEST', err.message);
  return errorBody(500, 'RELAY_ERR_INTERNAL', 'Internal error');
}

/** `body/request/timestamp must match format "date-time"`: the first problem, naming the field. */
export function validationMessage(part: string, errors: FastifySchemaValidationError[]): string {
  const first = errors[0];
  if (!first) return `${part} is invalid`;
  const path = `${part}${first.instancePath}`;
  const sameSpot = errors.filter((e) => e.instancePath === first.instancePath);
  const types = sameSpot.filter((e) => e.keyword === 'type').map((e) => String((e.params as { type?: unknown }).type));
  if (types.length > 1) return `${path} must be ${types.join(' or ')}`;
  if (first.keyword === 'required') {
    const missing = (first.params as { requiredProperties?: string[]; missingProperty?: string });
    const names = missing.requiredProperties ?? (missing.missingProperty ? [missing.missingProperty] : []);
    if (names.length > 0) return `${path}${path.endsWith('/') ? '' : '/'}${names[0]} is required`;
  }
  return `${path} ${first.message ?? 'is invalid'}`;
}

/** A 500 is a bug; the other 5xx are documented answers (upstream down, store down, cache-only miss). */
export function logFailure(log: FastifyBaseLogger, body: ErrorBody, err: unknown): void {
  if (body.statusCode === 500) log.error({ err }, 'request failed');
  else if (body.statusCode > 500) log.warn({ code: body.code, message: body.message }, 'request failed');
  else log.info({ code: body.code, message: body.message }, 'request rejected');
}

/** The answer to a request the relay could not route at all (its fastify app failed to build): a 500 in the relay's shape. */
export function answerInternalError(res: ServerResponse): void {
  if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
  res.end(JSON.stringify(errorBody(500, 'RELAY_ERR_INTERNAL', 'Internal error')));
}

/** Errors fastify raises before routing (a URL it cannot decode, a path parameter too long), in the relay's shape. */
export function frameworkErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  request.log.info({ code: err.code }, 'request rejected');
  // No route of the relay takes a path parameter that long (a report id has 36 characters): nothing there.
  const body =
    err.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? errorBody(404, 'RELAY_ERR_NOT_FOUND', `Route ${request.method} ${request.url.split('?')[0]} not found: a path parameter is too long`)
      : errorBody(400, 'RELAY_ERR_BAD_REQUEST', err.code === 'FST_ERR_BAD_URL' ? 'Malformed URL: the path has an invalid percent-encoding' : err.message);
  void reply.code(body.statusCode).type('application/json; charset=utf-8').send(body);
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const body = toErrorBody(err);
    logFailure(request.log, body, err);
    void reply.code(body.statusCode).type('application/json; charset=utf-8').send(body);
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send(errorBody(404, 'RELAY_ERR_NOT_FOUND', `Route ${request.method} ${request.url.split('?')[0]} not found`));
  });
}
