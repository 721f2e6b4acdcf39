// The site: everything the relay serves itself besides the proxy and /healthz — the direct API, /readyz,
// /metrics, /docs, /dashboard and a browser's GET / — as one fastify app. It is built on the first request
// that needs it (relay-server.ts), on the relay's own server: a relay used only as a proxy never loads
// fastify, the site loads TypeBox only when a request needs it (site-validation.ts), and the OpenAPI
// machinery only for a request under /docs.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { RelayConfig } from '../config.js';
import type { CacheService } from '../core/cache-service.js';
import type { ReportService } from '../core/report-service.js';
import type { CacheStore } from '../storage/cache-store.js';
import type { ReportStore } from '../storage/report-store.js';
import { requireTokens } from './auth.js';
import { browserRoutes } from './browser-routes.js';
import { cacheRoutes } from './cache-routes.js';
import { cacheTransferRoutes } from './cache-transfer-routes.js';
import { dashboardRoutes } from './dashboard-routes.js';
import { installDraining } from './draining.js';
import { answerInternalError, frameworkErrors, installErrorHandling } from './error-handler.js';
import { useStrictJsonBodies } from './json-body.js';
import type { Metrics } from './metrics.js';
import { opsRoutes } from './ops-routes.js';
import { reportingRoutes } from './reporting-routes.js';
import { createSiteValidation } from './site-validation.js';
import { AccessLog } from './site-log.js';

export interface SiteDeps {
  config: Readonly<RelayConfig>;
  version: string;
  log: FastifyBaseLogger;
  server: Server;
  nextRequestId: () => string;
  metrics: Metrics;
  cache: CacheService;
  reports: ReportService;
  cacheStore: CacheStore;
  reportStore: ReportStore;
  /** true once the relay shuts down: requests get a 503 */
  closing: () => boolean;
}

export interface Site {
  /** routes one request of the relay's server */
  handle(req: IncomingMessage, res: ServerResponse): void;
  close(): Promise<void>;
}

/** The OpenAPI document and Swagger UI's paths: /docs, /docs/json, /docs/static/… */
const isDocsPath = (url: string): boolean => url.startsWith('/docs') && (url.length === 5 || url[5] === '/' || url[5] === '?');

export async function buildSite(deps: SiteDeps): Promise<Site> {
  const site = await buildApp(deps);
  // The OpenAPI document and Swagger UI on an app of their own, built on the first request under /docs:
  // @fastify/swagger, its UI, @fastify/static and yaml take ~60-70 ms and ~4 MB to load, which the dashboard
  // and the API need not pay. It registers the same routes (the document is made from them), and is handed
  // only requests under /docs.
  let docs: Promise<Site> | undefined;
  let docsBuilt: Site | undefined;
  const openDocs = (): Promise<Site> =>
    (docs ??= import('./docs.js')
      .then(({ registerDocs }) => buildApp(deps, (app) => registerDocs(app, deps.version)))
      .then((built) => (docsBuilt = built)));
  return {
    handle(req, res) {
      if (!isDocsPath(req.url!)) return site.handle(req, res);
      if (docsBuilt) return docsBuilt.handle(req, res);
      openDocs().then(
        (built) => built.handle(req, res),
        (err: unknown) => {
          deps.log.error({ err }, 'the relay could not build its API documentation');
          answerInternalError(res);
        },
      );
    },
    async close() {
      await site.close();
      if (docs) await (await docs.catch(() => undefined))?.close();
    },
  };
}

/** One fastify app on the relay's server: every route of the site, and what `extra` adds before them. */
async function buildApp(deps: SiteDeps, extra?: (app: FastifyInstance) => Promise<void>): Promise<Site> {
  const { config } = deps;
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const validation = createSiteValidation();
  const app = Fastify({
    // The site's own compilers, given here so that fastify never loads its defaults (Ajv and
    // fast-json-stringify, ~0.1 s): requests are checked by site-validation.ts; replies are plain JSON
    // (schemas on responses are for the OpenAPI document only).
    schemaController: {
      compilersFactory: {
        buildValidator: () => validation.compiler,
        buildSerializer: () => () => (data: unknown) => JSON.stringify(data),
      },
    } as unknown as FastifyServerOptions['schemaController'],
    loggerInstance: deps.log,
    bodyLimit: config.maxBodyBytes,
    // fastify runs on the relay's server, which is already listening: it is handed requests, never listens.
    serverFactory: (h) => {
      handler = h;
      return deps.server;
    },
    genReqId: deps.nextRequestId,
    // The server answers what its parser refuses itself (relay-server.ts); fastify adds a listener of its
    // own to the server it is given, which must not write a second answer.
    clientErrorHandler: () => {},
    frameworkErrors,
    // Requests during shutdown get the relay's own 503 (see draining.ts).
    return503OnClosing: false,
    // One access line per request instead of fastify's two (see site-log.ts).
    logController: new AccessLog(),
  });
  // Before every route: fastify calls onRoute hooks for the routes registered after them.
  app.addHook('onRoute', validation.onRoute);
  installErrorHandling(app);
  installDraining(app, deps.closing);
  requireTokens(app, config.apiTokens);
  // Before every route plugin: fastify copies hooks into child scopes when they are registered.
  deps.metrics.install(app);
  if (extra) await extra(app);

  await app.register(async (api) => {
    useStrictJsonBodies(api, config.maxJsonDepth);
    await api.register(reportingRoutes, { reports: deps.reports });
    await api.register(cacheRoutes, { cache: deps.cache });
    await api.register(cacheTransferRoutes, { store: deps.cacheStore });
  });
  await app.register(dashboardRoutes);
  await app.register(browserRoutes);
  await app.register(opsRoutes, {
    cacheStore: deps.cacheStore,
    reportStore: deps.reportStore,
    timeoutMs: config.storeTimeoutMs,
    outboxDepth: () => deps.reports.counters.outboxDepth,
  });
  await app.ready();
  const route = handler!;
  return {
    handle: (req, res) => route(req, res),
    close: () => app.close(),
  };
}
