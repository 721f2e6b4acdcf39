// Draining: once the relay is shutting down (SIGTERM/SIGINT, see server.ts), calls already in flight
// finish, and a request that still arrives (a keep-alive connection, a pipelined request) is answered 503
// RELAY_ERR_SHUTTING_DOWN and its connection closed, so a load balancer sends it elsewhere. Instead of
// fastify's own 503 (return503OnClosing), whose body is not in the relay's error shape. The proxy edge
// does the same for its requests; both read the relay's one `closing` flag.
import type { FastifyInstance } from 'fastify';
import { RELAY_ERR_SHUTTING_DOWN } from '../errors.js';

/** Call before any route plugin: fastify copies hooks into child scopes when they are registered. */
export function installDraining(app: FastifyInstance, closing: () => boolean): void {
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing()) return done();
    void reply.header('connection', 'close');
    done(new RELAY_ERR_SHUTTING_DOWN());
  });
}
