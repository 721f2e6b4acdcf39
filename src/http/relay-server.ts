// The relay's one node:http server. Proxied calls and health checks go to the edge (proxy-edge.ts), which
// needs nothing else, and posted reports of the usual form to the report edge (report-edge.ts); every
// other request goes to the site (site.ts: the API, /readyz, /metrics, /docs,
// /dashboard, fastify), which is built on the first such request — a relay used only as a proxy never
// loads fastify, TypeBox or the OpenAPI machinery.
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { clientErrorHandler, refuseConnect } from './client-errors.js';
import type { ProxyEdge } from './proxy-edge.js';
import type { ReportEdge } from './report-edge.js';

export interface RelayServerSettings {
  maxHeaderBytes: number;
  requestTimeoutMs: number;
}

/** Idle keep-alive connections are kept this long (fastify's default for servers it makes). */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

export function createRelayServer(
  settings: RelayServerSettings,
  edge: ProxyEdge,
  reportEdge: ReportEdge,
  site: (req: IncomingMessage, res: ServerResponse) => void,
): Server {
  const server = createServer({ maxHeaderSize: settings.maxHeaderBytes }, (req, res) => {
    if (edge.takes(req)) edge.handle(req, res);
    else if (reportEdge.takes(req)) reportEdge.handle(req, res);
    else if (edge.isHealthCheck(req)) edge.health(req, res);
    else site(req, res);
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.requestTimeout = settings.requestTimeoutMs;
  // Requests Node's parser refuses still get a JSON answer; CONNECT gets a 405 (client-errors.ts).
  server.on('clientError', clientErrorHandler(settings.maxHeaderBytes));
  server.on('connect', refuseConnect);
  return server;
}
