// The access log: one line per request, at info, when it is answered: method, url, status and time.
// fastify's default writes a second line on arrival, which doubles the logging cost of every proxied call
// at the default level; the arrival is logged at debug here, for tracing a request that never ends.
import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

export class AccessLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}
