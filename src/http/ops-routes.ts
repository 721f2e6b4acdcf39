// /healthz (the process answers) and /readyz (its stores answer too).
import type { FastifyPluginAsync } from 'fastify';
import type { CacheStore } from '../storage/cache-store.js';
import type { ReportStore } from '../storage/report-store.js';

export interface OpsRoutesOptions {
  cacheStore: CacheStore;
  reportStore: ReportStore;
  timeoutMs: number;
  /** reports waiting in the durable outbox */
  outboxDepth: () => number;
}

async function probe(ping: () => Promise<void>, timeoutMs: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      ping(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return 'ok';
  } catch (err) {
    return `unavailable: ${(err as Error).message}`;
  } finally {
    clearTimeout(timer);
  }
}

export const opsRoutes: FastifyPluginAsync<OpsRoutesOptions> = async (app, opts) => {
  app.get('/healthz', { schema: { tags: ['Operations'], summary: 'The process is alive' } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { tags: ['Operations'], summary: 'The cache and report stores answer' } }, async (_req, reply) => {
    const [cache, reports] = await Promise.all([
      probe(() => opts.cacheStore.ping(), opts.timeoutMs),
      probe(() => opts.reportStore.ping(), opts.timeoutMs),
    ]);
    const ready = cache === 'ok' && reports === 'ok';
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : 'unavailable',
      cache: { kind: opts.cacheStore.kind, status: cache },
      reports: { kind: opts.reportStore.kind, status: reports, outboxDepth: opts.outboxDepth() },
    });
  });
};
