// The relay's one node:http server. Proxied calls and health checks go to the edge (proxy-edge.ts), which
// needs nothing else; posted reports and the Pezzo client's cache calls of the usual form, GET and HEAD
// /readyz and /metrics to the API edge (api-edge.ts); every other request goes to the site (site.ts: the rest of the
// API, /docs, /dashboard, fastify), which is built on the first such request — a relay used as a proxy,
// reported to, probed and scraped never loads fastify, TypeBox or the OpenAPI machinery.
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { Socket } from 'node:net';
import { clientErrorHandler, refuseConnect } from './client-errors.js';
import type { ProxyEdge } from './proxy-edge.js';
import type { ApiEdge } from './api-edge.js';

export interface RelayServerSettings {
  maxHeaderBytes: number;
  requestTimeoutMs: number;
}

/** Idle keep-alive connections are kept this long (fastify's default for servers it makes). */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

export function createRelayServer(
  settings: RelayServerSettings,
  edge: ProxyEdge,
  apiEdge: ApiEdge,
  site: (req: IncomingMessage, res: ServerResponse) => void,
): RelayServer {
  const server = createServer({ maxHeaderSize: settings.maxHeaderBytes }, (req, res) => {
    let path: string | undefined;
    if (edge.takes(req)) edge.handle(req, res);
    else if ((path = apiEdge.takes(req)) !== undefined) apiEdge.handle(req, res, path);
    else if (edge.isHealthCheck(req)) edge.health(req, res);
    else site(req, res);
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.requestTimeout = settings.requestTimeoutMs;
  // Requests Node's parser refuses still get a JSON answer; CONNECT gets a 405 (client-errors.ts).
  server.on('clientError', clientErrorHandler(settings.maxHeaderBytes));
  server.on('connect', refuseConnect);
  // Connections are counted per connection, not per request: what a drain needs to find the ones that
  // hold no request (see closeIdle).
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  return Object.assign(server, {
    closeIdle() {
      server.closeIdleConnections();
      // Node's closeIdleConnections leaves a connection that has not sent a whole request yet: a browser's
      // preconnected socket, or one that sent half its headers. Such a connection would hold the drain open
      // until its timeout (a minute or more). Nothing is lost by closing it: no request of it was answered.
      for (const socket of sockets) if (!(socket as SocketWithMessage)._httpMessage) socket.destroy();
    },
  });
}

/** Node's own field: the response a socket is serving (set while one is in progress). */
type SocketWithMessage = Socket & { _httpMessage?: unknown };

export interface RelayServer extends Server {
  /** Closes every connection not serving a request now: idle keep-alive ones, and those with no whole request yet. */
  closeIdle(): void;
}
