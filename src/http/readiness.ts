// GET /readyz's answer: whether the cache and report stores answer (each pinged, given at most the store
// timeout), and the durable outbox's depth. Served by the API edge (api-edge.ts) and, for a request of
// another form (HEAD), fastify's route (ops-routes.ts).
import type { CacheStore } from '../storage/cache-store.js';
import type { ReportStore } from '../storage/report-store.js';

export interface ReadinessOptions {
  cacheStore: CacheStore;
  reportStore: ReportStore;
  timeoutMs: number;
  /** reports waiting in the durable outbox */
  outboxDepth: () => number;
}

export interface Readiness {
  status: 200 | 503;
  body: {
    status: 'ready' | 'unavailable';
    cache: { kind: string; status: string };
    reports: { kind: string; status: string; outboxDepth: number };
  };
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

export async function readiness(opts: ReadinessOptions): Promise<Readiness> {
  const [cache, reports] = await Promise.all([
    probe(() => opts.cacheStore.ping(), opts.timeoutMs),
    probe(() => opts.reportStore.ping(), opts.timeoutMs),
  ]);
  const ready = cache === 'ok' && reports === 'ok';
  return {
    status: ready ? 200 : 503,
    body: {
      status: ready ? 'ready' : 'unavailable',
      cache: { kind: opts.cacheStore.kind, status: cache },
      reports: { kind: opts.reportStore.kind, status: reports, outboxDepth: opts.outboxDepth() },
    },
  };
}
