// The transparent proxy's HTTP edge: every request the relay does not serve itself goes from node:http
// straight to core/exchange, beside fastify rather than through it. This is the hot path of every proxied
// call, and fastify's per-request machinery (router, hooks, body parser, reply) adds nothing here: the
// body is taken as bytes whatever its type, the answer is a status, headers and a string or a stream.
// What fastify gives its routes, the edge does itself in the relay's own terms: the access token, the
// body limit, error answers in the relay's shape, the access log line, the request counter, and a 503
// while the relay shuts down. It also answers /healthz, so that neither a proxy-only relay nor its health
// checks ever load fastify. Everything else (the /api routes, /readyz, /metrics, /docs, /dashboard, a
// browser's GET / and /favicon.ico, unknown methods) goes to fastify (site.ts), built on first use.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { RELAY_ERR_BAD_REQUEST, RELAY_ERR_BODY_TOO_LARGE, RELAY_ERR_SHUTTING_DOWN, RELAY_ERR_UNAUTHORIZED } from '../errors.js';
import { ClientGone, type Exchange, type ProxyRequest, type ProxyResponse } from '../core/proxy-types.js';
import { type AccessLine, logArrival, logCompleted } from './access-log.js';
import { type RelayErrorFacts, dialectOf, errorAnswer, errorFacts } from '../core/error-answer.js';
import { isBrowserRequest } from './browser-routes.js';

/** Paths the relay answers itself (fastify): an unknown one under them is a 404, never forwarded. */
const OWN_PREFIXES = ['/api/', '/healthz', '/readyz', '/metrics', '/docs', '/dashboard'];

/** Methods the proxy forwards; any other goes to fastify, which answers 404. */
const METHODS = new Set(['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS']);

/** `%` not followed by two hex digits, or escapes that are not UTF-8 (fastify refuses these on its own routes too). */
function badPercentEncoding(url: string): boolean {
  if (!url.includes('%')) return false;
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  try {
    decodeURIComponent(path);
    return false;
  } catch {
    return true;
  }
}

export interface ProxyEdgeOptions {
  exchange: Exchange;
  /** the relay's logger (the same pino instance fastify logs through) */
  log: Logger;
  /** largest request body accepted (413 above it) */
  maxBodyBytes: number;
  /** the upstream origin a proxied URL goes to (its route's), which picks the shape of an error answer */
  originOf?: (url: string) => string;
  /** the relay token check when RELAY_API_TOKENS is set; on the proxy only `x-relay-token` counts */
  tokenCheck?: (presented: string | undefined) => boolean;
  /** the request counter of /metrics, once per answered request: `route` is `proxy` or `/healthz` */
  count(route: string, cacheStatus: unknown, statusCode: number): void;
  /** true once the relay is shutting down: new requests get a 503 */
  closing(): boolean;
  nextRequestId(): string;
}

export interface ProxyEdge {
  /** whether this request is the proxy's (else fastify's) */
  takes(req: IncomingMessage): boolean;
  handle(req: IncomingMessage, res: ServerResponse): void;
  /** whether this is a health check (GET or HEAD /healthz) */
  isHealthCheck(req: IncomingMessage): boolean;
  /** answers a health check: the process is alive (a 503 once it shuts down) */
  health(req: IncomingMessage, res: ServerResponse): void;
}

const HEALTHY = JSON.stringify({ status: 'ok' });

/**
 * A proxied call as core sees it. The client going away (before or during the answer) aborts the upstream
 * call: the signal is made only when core asks for it, i.e. on the way upstream; a cache hit never needs one.
 * A class, not an object literal with a getter: such a literal gets a hidden class of its own per call, kept
 * outside V8's young generation, and its getter's closure (with the request and the response it holds) then
 * outlives every young collection until a full one. Measured under cpu.sh's hit load: 55 MB promoted over
 * 20,000 hits with the literal, 1.4 MB with this class (docs/benchmarks.md).
 */
class EdgeRequest implements ProxyRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
  gone: ClientGone | undefined;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    readonly body: Buffer | undefined,
  ) {
    this.method = req.method!;
    this.url = req.url!;
    this.headers = req.headers;
  }

  get signal(): ClientGone {
    if (!this.gone) {
      const g = new ClientGone();
      this.gone = g;
      const res = this.res;
      if (this.req.socket.destroyed) g.abort();
      else res.once('close', () => res.writableFinished || g.abort());
    }
    return this.gone;
  }
}

export function createProxyEdge(opts: ProxyEdgeOptions): ProxyEdge {
  const { exchange, log, maxBodyBytes } = opts;

  /** An error the relay answers itself, in the shape of the provider the client talks to (error-answer.ts). */
  function answerError(req: IncomingMessage, res: ServerResponse, line: AccessLine, err: unknown): void {
    const facts = errorFacts(err);
    const { response } = errorAnswer(dialectOf(req.headers, opts.originOf?.(req.url!)), facts);
    logProblem(line, facts, err);
    answer(res, line, response);
  }

  function logProblem(line: AccessLine, facts: RelayErrorFacts, err?: unknown): void {
    const log1 = log.child({ reqId: line.reqId });
    if (facts.statusCode === 500) log1.error({ err }, 'request failed');
    else if (facts.statusCode > 500) log1.warn({ code: facts.code, message: facts.message }, 'request failed');
    else log1.info({ code: facts.code, message: facts.message }, 'request rejected');
  }

  function answer(res: ServerResponse, line: AccessLine, out: ProxyResponse): void {
    const body = out.body;
    line.cacheStatus = out.headers['x-relay-cache'];
    if (out.relayError && opts.closing()) out.headers.connection = 'close';
    if (typeof body === 'string' || Buffer.isBuffer(body)) {
      out.headers['content-length'] = String(typeof body === 'string' ? Buffer.byteLength(body) : body.length);
      res.writeHead(out.status, out.headers);
      res.end(body);
      return;
    }
    res.writeHead(out.status, out.headers);
    // pipe, with back-pressure. An upstream that fails mid-stream cuts the client's answer (the report
    // says stream-error); a client that leaves aborts the upstream call through the exchange's signal,
    // which ends the body. (stream.pipeline would do both, at the price of an AbortController per call.)
    body.once('error', (err) => {
      log.debug({ reqId: line.reqId, err }, 'proxied answer cut short');
      res.destroy(err);
    });
    body.pipe(res);
  }

  async function forward(req: IncomingMessage, res: ServerResponse, line: AccessLine, body: Buffer | undefined): Promise<void> {
    const call = new EdgeRequest(req, res, body);
    let out: ProxyResponse;
    try {
      out = await exchange.handle(call);
    } catch (err) {
      // The client left before the answer: nobody to answer, nothing went wrong (the report says so).
      if (call.gone?.aborted || res.destroyed) {
        log.debug({ reqId: line.reqId, url: line.req.url }, 'client went away before the answer');
        return;
      }
      answerError(req, res, line, err);
      return;
    }
    if (out.relayError) logProblem(line, out.relayError);
    try {
      answer(res, line, out);
    } catch (err) {
      // A header the upstream sent that Node will not write (an invalid character): a bug-class answer.
      if (typeof out.body !== 'string' && !Buffer.isBuffer(out.body)) out.body.destroy();
      if (!res.headersSent) answerError(req, res, line, err);
      else res.destroy(err as Error);
    }
  }

  function readBody(req: IncomingMessage, res: ServerResponse, line: AccessLine): void {
    const declared = Number(req.headers['content-length']);
    if (declared > maxBodyBytes) {
      answerError(req, res, line, new RELAY_ERR_BODY_TOO_LARGE(maxBodyBytes));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBodyBytes) {
        // Stop collecting; Node reads and drops the rest once the 413 is sent, so the client gets it.
        req.off('data', onData);
        req.off('end', onEnd);
        answerError(req, res, line, new RELAY_ERR_BODY_TOO_LARGE(maxBodyBytes));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      const body = chunks.length === 0 ? undefined : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
      void forward(req, res, line, body);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    // A client that leaves while sending its body: nothing to answer, and nothing was forwarded.
    req.on('error', (err) => log.debug({ reqId: line.reqId, err }, 'request body not received'));
  }

  return {
    takes(req) {
      const url = req.url;
      if (url === undefined || url.charCodeAt(0) !== 0x2f /* / */ || !METHODS.has(req.method!)) return false;
      if (url === '/api' || OWN_PREFIXES.some((p) => url.startsWith(p))) return false;
      // A browser opening the relay's address (see browser-routes.ts).
      return !isBrowserRequest(req.method, url, req.headers.accept);
    },

    isHealthCheck(req) {
      const url = req.url!;
      return (req.method === 'GET' || req.method === 'HEAD') && url.startsWith('/healthz') && (url.length === 8 || url.charCodeAt(8) === 0x3f /* ? */);
    },

    health(req, res) {
      const line: AccessLine = { reqId: opts.nextRequestId(), req, startedAt: performance.now() };
      logArrival(log, line);
      res.once('finish', () => {
        opts.count('/healthz', 'none', res.statusCode);
        logCompleted(log, line, res.statusCode);
      });
      if (opts.closing()) {
        // the relay's own shape here: /healthz is the relay's route, not a provider's
        const text = JSON.stringify({ statusCode: 503, code: 'RELAY_ERR_SHUTTING_DOWN', error: 'Service Unavailable', message: new RELAY_ERR_SHUTTING_DOWN().message });
        res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), connection: 'close' });
        res.end(text);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': HEALTHY.length });
      res.end(req.method === 'HEAD' ? undefined : HEALTHY);
    },

    handle(req, res) {
      const line: AccessLine = { reqId: opts.nextRequestId(), req, startedAt: performance.now() };
      logArrival(log, line);
      res.once('finish', () => {
        opts.count('proxy', line.cacheStatus, res.statusCode);
        logCompleted(log, line, res.statusCode);
      });
      if (opts.closing()) return answerError(req, res, line, new RELAY_ERR_SHUTTING_DOWN());
      if (opts.tokenCheck) {
        const presented = req.headers['x-relay-token'];
        if (!opts.tokenCheck(typeof presented === 'string' ? presented : undefined))
          return answerError(req, res, line, new RELAY_ERR_UNAUTHORIZED());
      }
      if (badPercentEncoding(req.url!))
        return answerError(req, res, line, new RELAY_ERR_BAD_REQUEST('Malformed URL: the path has an invalid percent-encoding'));
      readBody(req, res, line);
    },
  };
}
