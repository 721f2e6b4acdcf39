// POST /api/reporting/v2/request without fastify: the one /api route on the hot path of a team's traffic
// (the Pezzo client and every direct reporter call it once per exchange). fastify's per-request machinery
// (router, hooks, content-type parser, reply, serializer) cost more than the route's own work here; the
// edge does what they did for this route in the relay's own terms, with the same pieces: the token check,
// the body limit, the strict JSON rules (core/json-guard), the route's TypeBox schema (its check generated
// by TypeBox, schemas.generated.ts; fastify's own validator compiler for the messages of a body it
// refuses), the error bodies and validation messages of the error handler, the access log line
// and the request counter. Only requests of the usual form come here (an application/json body whose
// length is declared and within the limit); any other form goes to fastify's route, which answers it as
// it always has, so odd requests keep their exact answers.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { uuidv7 } from '../core/ids.js';
import { decodeUtf8Strict, parseJsonStrict } from '../core/json-guard.js';
import type { ReportService } from '../core/report-service.js';
import { RELAY_ERR_SHUTTING_DOWN, RELAY_ERR_UNAUTHORIZED, RELAY_ERR_VALIDATION } from '../errors.js';
import { type AccessLine, logArrival, logCompleted } from './access-log.js';
import { presentedToken } from './auth.js';
import { type ErrorBody, errorBody, logFailure, validationMessage } from './error-handler.js';

export const REPORT_PATH = '/api/reporting/v2/request';

/** The content types fastify's JSON parser takes that come here; any other goes to fastify. */
const PLAIN_JSON = /^application\/json\s*(?:;\s*charset="?utf-8"?\s*)?$/i;

export interface ReportEdgeOptions {
  reports: ReportService;
  log: Logger;
  maxBodyBytes: number;
  maxJsonDepth: number;
  /** the relay token check when RELAY_API_TOKENS is set (x-relay-token or Authorization: Bearer) */
  tokenCheck?: (presented: string | undefined) => boolean;
  count(route: string, cacheStatus: unknown, statusCode: number): void;
  closing(): boolean;
  nextRequestId(): string;
}

export interface ReportEdge {
  /** whether this request is one the edge answers (else fastify's route does) */
  takes(req: IncomingMessage): boolean;
  handle(req: IncomingMessage, res: ServerResponse): void;
}

type Explain = (value: unknown) => { value?: unknown; error?: unknown[] };

export function createReportEdge(opts: ReportEdgeOptions): ReportEdge {
  const { log } = opts;
  // The schema's check, loaded with the first report: TypeBox's standalone code for ReportBody, generated into
  // the tree (schemas.generated.ts) with the date-time validator fastify's route gets from registerAjvFormats
  // (ajv-formats). TypeBox itself — ~700 modules, ~0.5 s and ~30 MB to load — only for the messages of a body
  // the check refuses, from the compiler the route uses (test/unit/schemas-generated.test.ts keeps the two in
  // agreement).
  let check: ((value: unknown) => boolean) | undefined;
  let loading: Promise<(value: unknown) => boolean> | undefined;
  const checkOf = (): ((value: unknown) => boolean) | Promise<(value: unknown) => boolean> =>
    check ??
    (loading ??= import('./schemas.generated.js').then((generated) => {
      check = generated.CHECKS.get(generated.schemaKey('body', generated.ReportBody))!;
      return check;
    }));
  let explaining: Promise<Explain> | undefined;
  const explainOf = (): Promise<Explain> =>
    (explaining ??= Promise.all([import('@fastify/type-provider-typebox'), import('./schemas.js')]).then(([typebox, { ReportBody }]) => {
      typebox.registerAjvFormats();
      return typebox.TypeBoxValidatorCompiler({ schema: ReportBody, method: 'POST', url: REPORT_PATH, httpPart: 'body' }) as Explain;
    }));

  function reply(res: ServerResponse, status: number, text: string, close = false): void {
    const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)) };
    if (close) headers.connection = 'close';
    res.writeHead(status, headers);
    res.end(text);
  }

  function fail(res: ServerResponse, line: AccessLine, body: ErrorBody, err?: unknown, close = false): void {
    logFailure(log.child({ reqId: line.reqId }), body, err ?? body);
    reply(res, body.statusCode, JSON.stringify(body), close);
  }

  function failWith(res: ServerResponse, line: AccessLine, err: unknown): void {
    const e = err as { statusCode?: number; code?: string; message?: string };
    if (typeof e?.code === 'string' && e.code.startsWith('RELAY_ERR_') && typeof e.statusCode === 'number')
      return fail(res, line, errorBody(e.statusCode, e.code, e.message ?? ''), err);
    fail(res, line, errorBody(500, 'RELAY_ERR_INTERNAL', 'Internal error'), err);
  }

  async function record(res: ServerResponse, line: AccessLine, body: Buffer): Promise<void> {
    let value: unknown;
    try {
      value = parseJsonStrict(decodeUtf8Strict(body), opts.maxJsonDepth);
    } catch (err) {
      return failWith(res, line, err);
    }
    if (!(check ?? (await checkOf()))(value)) {
      // (were the two ever to disagree, the route's compiler decides)
      const checked = (await explainOf())(value);
      if (checked.error) {
        const message = validationMessage('body', checked.error as Parameters<typeof validationMessage>[1]);
        return failWith(res, line, new RELAY_ERR_VALIDATION(message));
      }
    }
    const receivedAt = Date.now();
    let text: string;
    try {
      text = await opts.reports.recordApi({ id: uuidv7(receivedAt), receivedAt, body });
    } catch (err) {
      return failWith(res, line, err);
    }
    reply(res, 201, text);
  }

  return {
    takes(req) {
      if (req.method !== 'POST') return false;
      const url = req.url!;
      if (!url.startsWith(REPORT_PATH) || (url.length !== REPORT_PATH.length && url.charCodeAt(REPORT_PATH.length) !== 0x3f /* ? */))
        return false;
      const type = req.headers['content-type'];
      const length = Number(req.headers['content-length']);
      return typeof type === 'string' && PLAIN_JSON.test(type) && length > 0 && length <= opts.maxBodyBytes && req.headers['transfer-encoding'] === undefined;
    },

    handle(req, res) {
      const line: AccessLine = { reqId: opts.nextRequestId(), req, startedAt: performance.now() };
      logArrival(log, line);
      res.once('finish', () => {
        opts.count(REPORT_PATH, 'none', res.statusCode);
        logCompleted(log, line, res.statusCode);
      });
      // fastify's order: draining, then the token, then the body.
      if (opts.closing()) return fail(res, line, errorBody(503, 'RELAY_ERR_SHUTTING_DOWN', new RELAY_ERR_SHUTTING_DOWN().message), undefined, true);
      if (opts.tokenCheck && !opts.tokenCheck(presentedToken(req.headers, req.url!))) {
        const err = new RELAY_ERR_UNAUTHORIZED();
        return fail(res, line, errorBody(err.statusCode, err.code, err.message), err);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (chunk: Buffer) => {
        size += chunk.length;
        chunks.push(chunk);
      });
      req.on('end', () => {
        // The declared length bounds what Node reads: the body is within the limit.
        void record(res, line, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)).catch((err: unknown) => {
          if (!res.headersSent) failWith(res, line, err);
        });
      });
      req.on('error', (err) => log.debug({ reqId: line.reqId, err }, 'request body not received'));
    },
  };
}
