// The access log: one line per request, at info, when it is answered: method, url, status and time.
// fastify's default writes a second line on arrival, which doubles the logging cost of every proxied call
// at the default level; the arrival is logged at debug here, for tracing a request that never ends.
// fastify's routes log through site-log.ts; the edge (proxy-edge.ts) writes the same lines itself, with
// what is here (no fastify: the edge runs without it).
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';

/**
 * Request ids for both fastify (its genReqId) and the proxy edge, so no two requests share one:
 * `req-<base 36 counter>`, fastify's own format, wrapping before the counter leaves V8's small integers.
 */
export function createRequestIds(): () => string {
  let next = 0;
  return () => {
    next = (next + 1) & 0x7fffffff;
    return `req-${next.toString(36)}`;
  };
}

/** One proxied request as the access log sees it. */
export interface AccessLine {
  reqId: string;
  req: IncomingMessage;
  /** performance.now() at arrival */
  startedAt: number;
  /** the x-relay-cache value answered, for the request counter */
  cacheStatus?: string | string[];
}

/** What the `req` serializer of the relay's logger (app.ts) reads: fastify's request has the same fields. */
function requestFields(req: IncomingMessage): { method: string; url: string; hostname: string | undefined; ip: string | undefined } {
  const host = req.headers.host;
  // fastify's request.hostname: the Host header without its port ([::1]:8787 → [::1]).
  const hostname = host === undefined ? undefined : host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0];
  return { method: req.method ?? '', url: req.url ?? '', hostname, ip: req.socket.remoteAddress };
}

export function logArrival(log: Logger, line: AccessLine): void {
  if (log.isLevelEnabled('debug')) log.debug({ reqId: line.reqId, req: requestFields(line.req) }, 'incoming request');
}

export function logCompleted(log: Logger, line: AccessLine, statusCode: number): void {
  if (!log.isLevelEnabled('info')) return;
  const responseTime = performance.now() - line.startedAt;
  log.info({ reqId: line.reqId, req: requestFields(line.req), res: { statusCode }, responseTime }, 'request completed');
}
