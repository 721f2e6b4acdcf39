// The transparent proxy: every request the relay does not serve itself goes through core/exchange.
// Bodies are taken as raw bytes (any content type) and forwarded unchanged; the answer streams back.
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyPluginAsync } from 'fastify';
import { RELAY_ERR_NOT_FOUND } from '../errors.js';
import { ClientGone, type Exchange } from '../core/proxy-types.js';

export interface ProxyRoutesOptions {
  exchange: Exchange;
}

/** Paths the relay answers itself; an unknown one under them is a 404, never forwarded. */
const OWN_PREFIXES = ['/api/', '/healthz', '/readyz', '/metrics', '/docs', '/dashboard'];

const METHODS = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'];

/** Where the client's own content-type waits while fastify reads the body as plain bytes. */
const ORIGINAL_CONTENT_TYPE = Symbol('original content-type');

export const proxyRoutes: FastifyPluginAsync<ProxyRoutesOptions> = async (app, { exchange }) => {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  // The body goes upstream as bytes whatever its type; fastify would refuse a content-type it cannot
  // parse (`application`, `a, b`) before any parser runs, so it is shown one it knows and given back after.
  app.addHook('onRequest', (request, _reply, done) => {
    const type = request.headers['content-type'];
    (request as unknown as Record<symbol, unknown>)[ORIGINAL_CONTENT_TYPE] = type;
    request.headers['content-type'] = 'application/octet-stream';
    done();
  });

  app.route({
    method: METHODS,
    url: '/*',
    exposeHeadRoute: false,
    schema: { hide: true },
    handler: async (request, reply) => {
      const url = request.url;
      if (url === '/api' || OWN_PREFIXES.some((p) => url.startsWith(p)))
        throw new RELAY_ERR_NOT_FOUND(`Route ${request.method} ${url.split('?')[0]} not found`);

      // The client going away (before or during the answer) aborts the upstream call. The signal is
      // made only when core asks for it, i.e. on the way upstream: a cache hit never needs one.
      let gone: ClientGone | undefined;
      const res0 = reply.raw;
      const signal = (): ClientGone => {
        if (!gone) {
          const g = new ClientGone();
          gone = g;
          if (request.raw.socket?.destroyed) g.abort();
          else res0.once('close', () => res0.writableFinished || g.abort());
        }
        return gone;
      };
      let res;
      try {
        res = await exchange.handle({
          method: request.method,
          url,
          headers: withOriginalContentType(request.headers, (request as unknown as Record<symbol, unknown>)[ORIGINAL_CONTENT_TYPE]),
          body: Buffer.isBuffer(request.body) ? request.body : undefined,
          get signal() {
            return signal();
          },
        });
      } catch (err) {
        // The client left before the answer: nobody to answer, nothing went wrong (the report says so).
        if (gone?.aborted) {
          request.log.debug({ url }, 'client went away before the answer');
          return reply.hijack();
        }
        throw err;
      }
      return reply.code(res.status).headers(res.headers).send(res.body);
    },
  });
};

/** The body has been read: the headers go on with the client's own content-type (or none, as sent). */
function withOriginalContentType(headers: IncomingHttpHeaders, original: unknown): IncomingHttpHeaders {
  if (typeof original === 'string') headers['content-type'] = original;
  else delete headers['content-type'];
  return headers;
}
