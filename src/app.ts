// buildApp: the one place where concrete stores are built and wired to the services and routes.
// It does not listen; server.ts does (tests call buildApp and listen on port 0).
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { TypeBoxValidatorCompiler, registerAjvFormats } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import type { RelayConfig } from './config.js';
import { type CacheService, createCacheService } from './core/cache-service.js';
import { type ReportService, createReportService } from './core/report-service.js';
import { AccessLog, createRequestIds } from './http/access-log.js';
import { createTokenCheck, requireTokens } from './http/auth.js';
import { cacheRoutes } from './http/cache-routes.js';
import { cacheTransferRoutes } from './http/cache-transfer-routes.js';
import { clientErrorHandler, refuseConnect } from './http/client-errors.js';
import { registerDocs } from './http/docs.js';
import { frameworkErrors, installErrorHandling } from './http/error-handler.js';
import { useStrictJsonBodies } from './http/json-body.js';
import { installDraining } from './http/draining.js';
import { createMetrics } from './http/metrics.js';
import { opsRoutes } from './http/ops-routes.js';
import { dashboardRoutes } from './http/dashboard-routes.js';
import { browserRoutes } from './http/browser-routes.js';
import { type ProxyEdge, createProxyEdge, edgeServerFactory } from './http/proxy-edge.js';
import { reportingRoutes } from './http/reporting-routes.js';
import { createExchange } from './core/exchange.js';
import type { Exchange } from './core/proxy-types.js';
import { createRouter } from './core/routing.js';
import { createUpstreamClient } from './upstream/upstream-client.js';
import type { CacheStore } from './storage/cache-store.js';
import { createMemoryCacheStore } from './storage/memory-cache-store.js';
import { createPostgresReportStore } from './storage/postgres-report-store.js';
import { createRedisCacheStore } from './storage/redis-cache-store.js';
import type { ReportStore } from './storage/report-store.js';
import { createSqliteCacheStore } from './storage/sqlite-cache-store.js';
import { createSqliteReportStore } from './storage/sqlite-report-store.js';
import { createReportThread } from './report-thread.js';
import { type DataDirLock, lockDataDir } from './storage/data-dir-lock.js';
import { listenUrls } from './listen-url.js';
import { logDestination } from './log-destination.js';
import { bannerText, startupFacts } from './banner.js';
import { VERSION } from './version.js';

export interface AppOverrides {
  cacheStore?: CacheStore;
  reportStore?: ReportStore;
  /** where pino writes (default stdout) */
  logStream?: Writable;
  now?: () => number;
}

export interface Relay {
  app: FastifyInstance;
  config: Readonly<RelayConfig>;
  cache: CacheService;
  reports: ReportService;
  exchange: Exchange;
}

/** Credentials never reach a log line, at any level. */
const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'req.headers["api-key"]',
  'req.headers["x-pezzo-api-key"]',
  'req.headers["x-relay-token"]',
  'res.headers["set-cookie"]',
];

/** fastify's request log line, with a `token=` query value (the dashboard's) blanked out. */
function requestForLog(req: { method: string; url: string; hostname?: string; ip?: string }) {
  return { method: req.method, url: req.url.replace(/([?&]token=)[^&#]*/gi, '$1[redacted]'), hostname: req.hostname, remoteAddress: req.ip };
}

export async function openCacheStore(config: RelayConfig): Promise<CacheStore> {
  if (config.cacheUrl === 'memory') return createMemoryCacheStore({ maxBytes: config.cacheMaxBytes });
  if (config.cacheUrl === 'sqlite')
    return createSqliteCacheStore({ file: join(config.dataDir, 'cache.sqlite'), maxBytes: config.cacheMaxBytes });
  return createRedisCacheStore({ url: config.cacheUrl });
}

export async function openReportStore(config: RelayConfig): Promise<ReportStore> {
  if (config.reportsUrl === 'sqlite') return createSqliteReportStore({ file: join(config.dataDir, 'reports.sqlite') });
  return createPostgresReportStore({ connectionString: config.reportsUrl });
}

/**
 * Builds the relay on its data dir. The dir is locked first, before any store is opened: a second relay
 * on it (another process, or another buildApp here) fails with DataDirInUseError naming the holder. The
 * lock is given up when the app closes, or by the kernel when the process dies.
 */
export async function buildApp(config: Readonly<RelayConfig>, overrides: AppOverrides = {}): Promise<Relay> {
  const dataDirLock = lockDataDir(config.dataDir, { role: 'relay', version: VERSION });
  try {
    return await assemble(config, overrides, dataDirLock);
  } catch (err) {
    dataDirLock.release();
    throw err;
  }
}

async function assemble(config: Readonly<RelayConfig>, overrides: AppOverrides, dataDirLock: DataDirLock): Promise<Relay> {
  registerAjvFormats();
  const pinoLogger = pino(
    { level: config.logLevel, redact: { paths: REDACT, censor: '[redacted]' }, serializers: { req: requestForLog } },
    overrides.logStream ?? (await logDestination(config.logFormat)),
  );
  const logger: FastifyBaseLogger = pinoLogger;
  const cacheStore = overrides.cacheStore ?? (await openCacheStore(config));
  let reportStore: ReportStore;
  try {
    reportStore = overrides.reportStore ?? (await openReportStore(config));
  } catch (err) {
    await cacheStore.close();
    throw err;
  }

  const cache = createCacheService({
    store: cacheStore,
    defaultTtlSec: config.cacheTtl,
    maxEntryBytes: config.cacheMaxEntryBytes,
    timeoutMs: config.storeTimeoutMs,
    ...(overrides.now ? { now: overrides.now } : {}),
  });
  // Reports are written on the report worker thread (report-worker.ts); this thread reads them.
  const reports = createReportService({
    port: createReportThread(
      {
        reportsUrl: config.reportsUrl,
        sqliteFile: join(config.dataDir, 'reports.sqlite'),
        outboxFile: join(config.dataDir, 'outbox.ndjson'),
        pricesFile: config.pricesFile,
        maxBodyBytes: config.reportMaxBodyBytes,
        maxJsonDepth: config.maxJsonDepth,
        flushMs: config.reportFlushMs,
        batchMax: config.reportBatchMax,
        outboxRetryMs: config.outboxRetryMs,
        defaults: { client: 'llm-relay', clientVersion: VERSION, environment: config.environment },
      },
      logger,
    ),
    store: reportStore,
    batchMax: config.reportBatchMax,
  });

  const metrics = createMetrics({
    cacheStore,
    reports: {
      get pending() {
        return reports.counters.pending;
      },
      get written() {
        return reports.counters.written;
      },
    },
    outbox: {
      get depth() {
        return reports.counters.outboxDepth;
      },
      get dropped() {
        return reports.counters.dropped;
      },
    },
  });

  // The proxy's requests go from the server straight to the proxy edge, the rest to fastify (proxy-edge.ts).
  let edge: ProxyEdge | undefined;
  const nextRequestId = createRequestIds();
  const app = Fastify({
    loggerInstance: logger,
    bodyLimit: config.maxBodyBytes,
    serverFactory: edgeServerFactory({ maxHeaderBytes: config.maxHeaderBytes, requestTimeoutMs: config.requestTimeoutMs }, () => edge),
    genReqId: nextRequestId,
    clientErrorHandler: clientErrorHandler(config.maxHeaderBytes),
    frameworkErrors,
    // Requests during shutdown get the relay's own 503 (see draining.ts).
    return503OnClosing: false,
    // One access line per request instead of fastify's two (see AccessLog).
    logController: new AccessLog(),
  });
  app.server.on('connect', refuseConnect);
  app.setValidatorCompiler(TypeBoxValidatorCompiler);
  // Replies are plain JSON; schemas on responses are for the OpenAPI document only.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  installErrorHandling(app);
  const draining = installDraining(app);
  requireTokens(app, config.apiTokens);
  // Before every route plugin: fastify copies hooks into child scopes when they are registered.
  metrics.install(app);
  await registerDocs(app, VERSION);

  await app.register(async (api) => {
    useStrictJsonBodies(api, config.maxJsonDepth);
    await api.register(reportingRoutes, { reports });
    await api.register(cacheRoutes, { cache });
    await api.register(cacheTransferRoutes, { store: cacheStore });
  });
  await app.register(dashboardRoutes);
  await app.register(browserRoutes);
  await app.register(opsRoutes, {
    cacheStore,
    reportStore,
    timeoutMs: config.storeTimeoutMs,
    outboxDepth: () => reports.counters.outboxDepth,
  });

  const upstream = createUpstreamClient({
    connectTimeoutMs: config.upstreamConnectTimeoutMs,
    headersTimeoutMs: config.upstreamHeadersTimeoutMs,
    bodyTimeoutMs: config.upstreamBodyTimeoutMs,
  });
  const exchange = createExchange({
    cache,
    reports,
    upstream,
    route: createRouter(config.routes, config.upstreamUrl),
    log: app.log,
    cacheOnByDefault: config.cache,
    cacheScope: config.cacheScope,
    offline: config.offline,
    maxJsonDepth: config.maxJsonDepth,
    telemetry: metrics.telemetry,
  });
  edge = createProxyEdge({
    exchange,
    log: pinoLogger,
    maxBodyBytes: config.maxBodyBytes,
    ...(config.apiTokens.length > 0 ? { tokenCheck: createTokenCheck(config.apiTokens) } : {}),
    count: (cacheStatus, statusCode) => metrics.countRequest('proxy', cacheStatus, statusCode),
    closing: draining.closing,
    nextRequestId,
  });

  app.addHook('onListen', async () => {
    const urls = listenUrls(app.server.address());
    if (!urls) return;
    // For the message a second relay (or `cache import`) on this data dir prints.
    dataDirLock.update({ url: urls.local });
    const startup = startupFacts(config, urls, VERSION);
    logger.info({ startup }, bannerText(startup));
  });
  app.addHook('onClose', async () => {
    await upstream.close();
    await reports.close();
    await Promise.allSettled([cacheStore.close(), reportStore.close()]);
    // Last: until everything above is closed, the data dir is still this relay's.
    dataDirLock.release();
  });

  return { app, config, cache, reports, exchange };
}
