// /healthz (the process answers) and /readyz (its stores answer too) on fastify: requests the edges do not
// take (a GET or HEAD /readyz that declares a body; a plain one, and /healthz, are answered by them), and the OpenAPI document.
import type { FastifyPluginAsync } from 'fastify';
import { type ReadinessOptions, readiness } from './readiness.js';

export const opsRoutes: FastifyPluginAsync<ReadinessOptions> = async (app, opts) => {
  app.get('/healthz', { schema: { tags: ['Operations'], summary: 'The process is alive' } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { tags: ['Operations'], summary: 'The cache and report stores answer' } }, async (_req, reply) => {
    const answer = await readiness(opts);
    return reply.code(answer.status).send(answer.body);
  });
};
