// The direct API's hot routes without fastify: POST /api/reporting/v2/request (the Pezzo client and every
// direct reporter call it once per exchange) and the Pezzo client's cache calls, POST
// /api/cache/v1/request/retrieve (once per call with caching on) and /save (once per miss). fastify's
// per-request machinery (router, hooks, content-type parser, reply, serializer) cost more than these routes'
// own work; the edge does what it did for them in the relay's own terms, with the same pieces: the token
// check, the body limit, the strict JSON rules (core/json-guard), the routes' schemas (their checks generated
// by TypeBox, schemas.generated.ts, through the site's validator compiler, site-validation.ts, which loads
// TypeBox's compiler only for the messages of a refusal), the error bodies and validation messages of the
// error handler, the access log line and the request counter. Only requests of the usual form come here (an
// application/json body whose length is declared and within the limit); any other form goes to fastify's
// route, which answers it as it always has, so odd requests keep their exact answers. The edge also answers
// GET /readyz and GET /metrics (and their HEAD), what a deployment's probes and Prometheus ask every few
// seconds. A relay whose only callers are proxied clients, reporters, the Pezzo client, probes and a scraper
// never builds the fastify site.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyError, FastifySchemaValidationError } from 'fastify';
import type { Logger } from 'pino';
import type { CacheService } from '../core/cache-service.js';
import { uuidv7 } from '../core/ids.js';
import { decodeUtf8Strict, parseJsonStrict } from '../core/json-guard.js';
import type { ReportService } from '../core/report-service.js';
import { RELAY_ERR_SHUTTING_DOWN, RELAY_ERR_UNAUTHORIZED, RELAY_ERR_VALIDATION } from '../errors.js';
import { type AccessLine, logArrival, logCompleted } from './access-log.js';
import { presentedToken } from './auth.js';
import { retrieveCall, saveCall } from './cache-calls.js';
import { type ErrorBody, errorBody, logFailure, toErrorBody, validationMessage } from './error-handler.js';
import type { Readiness } from './readiness.js';
import type { Validate } from './site-validation.js';

export const REPORT_PATH = '/api/reporting/v2/request';
export const SAVE_PATH = '/api/cache/v1/request/save';
export const RETRIEVE_PATH = '/api/cache/v1/request/retrieve';
export const READY_PATH = '/readyz';
export const METRICS_PATH = '/metrics';

/** The content types fastify's JSON parser takes that come here; any other goes to fastify. */
const PLAIN_JSON = /^application\/json\s*(?:;\s*charset="?utf-8"?\s*)?$/i;

export interface ApiEdgeOptions {
  reports: ReportService;
  cache: CacheService;
  log: Logger;
  maxBodyBytes: number;
  maxJsonDepth: number;
  /** the relay token check when RELAY_API_TOKENS is set (x-relay-token or Authorization: Bearer) */
  tokenCheck?: (presented: string | undefined) => boolean;
  count(route: string, cacheStatus: unknown, statusCode: number): void;
  closing(): boolean;
  nextRequestId(): string;
  /** GET /readyz's answer (readiness.ts) */
  readiness(): Promise<Readiness>;
  /** GET /metrics's answer: the exposition text and its content type */
  metrics(): Promise<{ text: string; contentType: string }>;
}

export interface ApiEdge {
  /** the path of the edge's route this request is for, if the edge answers it (else fastify's route does) */
  takes(req: IncomingMessage): string | undefined;
  /** answers a request `takes` took, with the path it gave */
  handle(req: IncomingMessage, res: ServerResponse, path: string): void;
}

/** The validators of the routes' parts, as fastify's routes have them (site-validation.ts). */
interface Checks {
  report: Validate;
  save: Validate;
  retrieve: Validate;
  /** the cache calls' headers (the same schema on both routes) */
  cacheHeaders: Validate;
}

/** A route's answer: its status and its body's text (JSON unless a content type is given). */
interface Answer {
  status: number;
  text: string;
  contentType?: string;
}

/** The part's 400 when the value fails its schema, as a rejected promise; nothing when it passes at once. */
function refusal(validate: Validate, part: string, value: unknown): Promise<void> | undefined {
  const result = validate(value);
  if (result instanceof Promise) {
    // (a refusal before TypeBox is loaded: rejected with TypeBox's errors)
    return result.then(
      () => undefined,
      (err: unknown) => {
        const errors = (err as { validation?: FastifySchemaValidationError[] }).validation;
        throw errors ? new RELAY_ERR_VALIDATION(validationMessage(part, errors)) : err;
      },
    );
  }
  return result.error ? Promise.reject(new RELAY_ERR_VALIDATION(validationMessage(part, result.error))) : undefined;
}

export function createApiEdge(opts: ApiEdgeOptions): ApiEdge {
  const { log } = opts;
  // The routes' validators, loaded with the first request: the site's compiler, which answers by the
  // checks TypeBox generated from the schemas (schemas.generated.ts, ~10 ms to load) and loads TypeBox
  // itself — ~700 modules, ~0.5 s and ~30 MB — only for the messages of a refusal, from the compiler the
  // routes use (test/unit/schemas-generated.test.ts keeps the two in agreement).
  let checks: Checks | undefined;
  let loading: Promise<Checks> | undefined;
  const checksOf = (): Checks | Promise<Checks> =>
    checks ??
    (loading ??= Promise.all([import('./site-validation.js'), import('./schemas.generated.js')]).then(([{ createSiteValidation }, S]) => {
      const { validator } = createSiteValidation();
      const of = (url: string, schema: unknown, httpPart: string): Validate => validator({ schema, method: 'POST', url, httpPart });
      checks = {
        report: of(REPORT_PATH, S.ReportBody, 'body'),
        save: of(SAVE_PATH, S.SaveBody, 'body'),
        retrieve: of(RETRIEVE_PATH, S.RetrieveBody, 'body'),
        cacheHeaders: of(SAVE_PATH, S.CacheHeaders, 'headers'),
      };
      return checks;
    }));

  const parse = (body: Buffer): unknown => parseJsonStrict(decodeUtf8Strict(body), opts.maxJsonDepth);

  // fastify's order for each: the body is parsed and checked, then the headers; then the handler.
  const routes: Record<string, (body: Buffer, req: IncomingMessage) => Promise<Answer>> = {
    async [REPORT_PATH](body) {
      const value = parse(body);
      const refused = refusal((checks ?? (await checksOf())).report, 'body', value);
      if (refused) await refused;
      const receivedAt = Date.now();
      return { status: 201, text: await opts.reports.recordApi({ id: uuidv7(receivedAt), receivedAt, body }) };
    },
    async [SAVE_PATH](body, req) {
      const value = parse(body) as { request: unknown; response: unknown };
      const c = checks ?? (await checksOf());
      await refusal(c.save, 'body', value);
      await refusal(c.cacheHeaders, 'headers', req.headers);
      return { status: 201, text: JSON.stringify(await saveCall(opts.cache, req.headers, value)) };
    },
    async [RETRIEVE_PATH](body, req) {
      const value = parse(body) as { request: unknown };
      const c = checks ?? (await checksOf());
      await refusal(c.retrieve, 'body', value);
      await refusal(c.cacheHeaders, 'headers', req.headers);
      const answer = await retrieveCall(opts.cache, req.headers, value);
      return { status: answer.status, text: JSON.stringify(answer.body) };
    },
  };

  // Reads, without a body. A HEAD gets the GET's status and headers (Node leaves the body out), as from
  // fastify's routes, so a load balancer probing with HEAD does not build the site either.
  const reads: Record<string, () => Promise<Answer>> = {
    async [READY_PATH]() {
      const answer = await opts.readiness();
      return { status: answer.status, text: JSON.stringify(answer.body) };
    },
    async [METRICS_PATH]() {
      const { text, contentType } = await opts.metrics();
      return { status: 200, text, contentType };
    },
  };

  /** The route a request's method and path name, if the edge has it. */
  const routeOf = (method: string | undefined, url: string): string | undefined => {
    const table = method === 'POST' ? routes : method === 'GET' || method === 'HEAD' ? reads : undefined;
    if (!table) return undefined;
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    return Object.hasOwn(table, path) ? path : undefined;
  };

  function reply(res: ServerResponse, status: number, text: string, close = false, contentType = 'application/json; charset=utf-8'): void {
    const headers: Record<string, string> = { 'content-type': contentType, 'content-length': String(Buffer.byteLength(text)) };
    if (close) headers.connection = 'close';
    res.writeHead(status, headers);
    res.end(text);
  }

  function fail(res: ServerResponse, line: AccessLine, body: ErrorBody, err?: unknown, close = false): void {
    logFailure(log.child({ reqId: line.reqId }), body, err ?? body);
    reply(res, body.statusCode, JSON.stringify(body), close);
  }

  /** An error's answer, as the error handler of fastify's routes words it. */
  function failWith(res: ServerResponse, line: AccessLine, err: unknown): void {
    fail(res, line, toErrorBody(err as FastifyError), err);
  }

  return {
    takes(req) {
      const path = routeOf(req.method, req.url!);
      if (path === undefined || req.headers['transfer-encoding'] !== undefined) return undefined;
      if (req.method !== 'POST') return req.headers['content-length'] === undefined ? path : undefined;
      const type = req.headers['content-type'];
      const length = Number(req.headers['content-length']);
      return typeof type === 'string' && PLAIN_JSON.test(type) && length > 0 && length <= opts.maxBodyBytes ? path : undefined;
    },

    handle(req, res, path) {
      const line: AccessLine = { reqId: opts.nextRequestId(), req, startedAt: performance.now() };
      logArrival(log, line);
      res.once('finish', () => {
        // Scrapes are not counted (as on fastify's side: see metrics.ts).
        if (path !== METRICS_PATH) opts.count(path, 'none', res.statusCode);
        logCompleted(log, line, res.statusCode);
      });
      // fastify's order: draining, then the token, then the body.
      if (opts.closing()) return fail(res, line, errorBody(503, 'RELAY_ERR_SHUTTING_DOWN', new RELAY_ERR_SHUTTING_DOWN().message), undefined, true);
      if (opts.tokenCheck && !opts.tokenCheck(presentedToken(req.headers, req.url!))) {
        const err = new RELAY_ERR_UNAUTHORIZED();
        return fail(res, line, errorBody(err.statusCode, err.code, err.message), err);
      }
      const answered = (answer: Answer): void => reply(res, answer.status, answer.text, false, answer.contentType);
      const failed = (err: unknown): void => {
        if (!res.headersSent) failWith(res, line, err);
      };
      if (req.method !== 'POST') {
        reads[path]!().then(answered, failed);
        return;
      }
      const route = routes[path]!;
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (chunk: Buffer) => {
        size += chunk.length;
        chunks.push(chunk);
      });
      req.on('end', () => {
        // The declared length bounds what Node reads: the body is within the limit.
        route(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size), req).then(answered, failed);
      });
      req.on('error', (err) => log.debug({ reqId: line.reqId, err }, 'request body not received'));
    },
  };
}
