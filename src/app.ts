// buildApp: the one place where concrete stores are built and wired to the services and routes.
// It does not listen; server.ts does (tests call buildApp and listen on port 0).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { type Logger, pino } from 'pino';
import type { RelayConfig } from './config.js';
import { type CacheService, createCacheService } from './core/cache-service.js';
import { type ReportService, createReportService } from './core/report-service.js';
import { createRequestIds } from './http/access-log.js';
import { answerInternalError } from './http/error-handler.js';
import { createTokenCheck } from './http/auth.js';
import { createMetrics } from './http/metrics.js';
import { createProxyEdge } from './http/proxy-edge.js';
import { createApiEdge } from './http/api-edge.js';
import { readiness } from './http/readiness.js';
import { createRelayServer } from './http/relay-server.js';
import type { Site } from './http/site.js';
import { createExchange } from './core/exchange.js';
import type { Exchange } from './core/proxy-types.js';
import { createRouter } from './core/routing.js';
import { createUpstreamClient } from './upstream/upstream-client.js';
import type { CacheStore } from './storage/cache-store.js';
import type { FleetFlight } from './storage/fleet-flight.js';
import type { RedisCacheStore } from './storage/redis-cache-store.js';
import type { ReportStore } from './storage/report-store.js';
import { createReportThread } from './report-thread.js';
import { collectAfterBurst, toMb } from './memory-trim.js';
import { type DataDirLock, lockDataDir } from './storage/data-dir-lock.js';
import { listenUrls } from './listen-url.js';
import { logDestination } from './log-destination.js';
import { bannerText, startupFacts } from './banner.js';
import { VERSION } from './version.js';

/** How often a draining server closes the connections that have gone idle. */
const IDLE_SWEEP_MS = 100;

export interface AppOverrides {
  cacheStore?: CacheStore;
  reportStore?: ReportStore;
  /** where pino writes (default stdout) */
  logStream?: Writable;
  now?: () => number;
}

export interface Relay {
  /** the relay's one HTTP server (relay-server.ts) */
  server: Server;
  log: Logger;
  config: Readonly<RelayConfig>;
  cache: CacheService;
  reports: ReportService;
  exchange: Exchange;
  /**
   * Gives back what the relay keeps only to be fast: the cache store's page cache, the idle upstream
   * connections a burst left (a quiet moment's memory trim calls it; src/server.ts). True when some of it is
   * freed later (connections closing).
   */
  releaseMemory(): boolean;
  /** listens, says so (the start-up banner) and resolves with the URL a local client opens */
  listen(port: number, host: string): Promise<string>;
  /**
   * Stops accepting, lets calls in flight finish (their connections close when idle), writes every
   * report, closes the stores and gives the data dir back. Requests that still arrive meanwhile get a 503.
   */
  close(): Promise<void>;
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

// Each store's driver is loaded only when it is the one configured (Redis' client and pg are megabytes).
/** How a store says it rewrites a file of an earlier relay before it does (a pause of seconds at a start). */
export type UpgradeNotice = (what: string) => void;

export async function openCacheStore(config: RelayConfig, use: 'all' | 'export' = 'all', onUpgrade?: UpgradeNotice): Promise<CacheStore> {
  if (config.cacheUrl === 'memory') {
    const { createMemoryCacheStore } = await import('./storage/memory-cache-store.js');
    return createMemoryCacheStore({ maxBytes: config.cacheMaxBytes });
  }
  if (config.cacheUrl === 'sqlite') {
    const { createSqliteCacheStore } = await import('./storage/sqlite-cache-store.js');
    return createSqliteCacheStore({
      file: join(config.dataDir, 'cache.sqlite'),
      maxBytes: config.cacheMaxBytes,
      exportOnly: use === 'export',
      ...(onUpgrade ? { onUpgrade } : {}),
    });
  }
  const { createRedisCacheStore } = await import('./storage/redis-cache-store.js');
  return createRedisCacheStore({ url: config.cacheUrl });
}

/**
 * Single flight across relays, when the cache is Redis (and RELAY_FLEET_LEASE_MS is not 0): on the cache
 * store's connection, plus one reader connection. A relay on SQLite or memory loads none of it.
 */
async function openFleetFlight(config: Readonly<RelayConfig>, cacheStore: CacheStore, log: Logger): Promise<FleetFlight | undefined> {
  if (config.fleetLeaseMs === 0 || !('redis' in cacheStore)) return undefined;
  const { createRedisFlight } = await import('./storage/redis-flight.js');
  return createRedisFlight({
    ...(cacheStore as RedisCacheStore).redis,
    leaseMs: config.fleetLeaseMs,
    timeoutMs: config.storeTimeoutMs,
    maxBytes: config.cacheMaxEntryBytes,
    log,
  });
}

export async function openReportStore(config: RelayConfig, onUpgrade?: UpgradeNotice): Promise<ReportStore> {
  if (config.reportsUrl === 'sqlite') {
    const { createSqliteReportStore } = await import('./storage/sqlite-report-store.js');
    return createSqliteReportStore({ file: join(config.dataDir, 'reports.sqlite'), ...(onUpgrade ? { onUpgrade } : {}) });
  }
  const { createPostgresReportStore } = await import('./storage/postgres-report-store.js');
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
  const pinoLogger = pino(
    { level: config.logLevel, redact: { paths: REDACT, censor: '[redacted]' }, serializers: { req: requestForLog } },
    overrides.logStream ?? (await logDestination(config.logFormat)),
  );
  const logger = pinoLogger;
  const upgrading: UpgradeNotice = (what) => logger.warn(`${what}: the relay starts when it is done (a few seconds for hundreds of MB)`);
  const cacheStore = overrides.cacheStore ?? (await openCacheStore(config, 'all', upgrading));
  let reportStore: ReportStore;
  let fleetFlight: FleetFlight | undefined;
  try {
    fleetFlight = await openFleetFlight(config, cacheStore, logger);
    reportStore = overrides.reportStore ?? (await openReportStore(config, upgrading));
  } catch (err) {
    await fleetFlight?.close();
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
        journalFile: join(config.dataDir, 'reports.journal'),
        dataDir: config.dataDir,
        reportRetentionMs: config.reportRetentionMs,
        bodyRetentionMs: config.bodyRetentionMs,
        dataMaxBytes: config.dataMaxBytes,
        pricesFile: config.pricesFile,
        maxBodyBytes: config.reportMaxBodyBytes,
        maxJsonDepth: config.maxJsonDepth,
        flushMs: config.reportFlushMs,
        writeDelayMs: config.reportWriteDelayMs,
        batchMax: config.reportBatchMax,
        outboxRetryMs: config.outboxRetryMs,
        // With tracing on the worker also holds the span queue and the exporter; an idle stop hands its last
        // spans to the endpoint after its files are closed, so the next report never waits on a collector,
        // and the span counters carry on across workers (report-thread.ts).
        idleStopMs: config.reportWorkerIdleMs,
        defaults: { client: 'llm-relay', clientVersion: VERSION, environment: config.environment },
        tracing: config.tracing,
        ...(config.upstreamProxy ? { upstreamProxy: config.upstreamProxy } : {}),
      },
      logger,
    ),
    store: reportStore,
    batchMax: config.reportBatchMax,
    // (the worker's memory then comes after the burst's is given back, not on top of it)
    openCalls: () => exchange.openCalls,
    onBurstEnd: () => {
      const t0 = performance.now();
      const rss = process.memoryUsage.rss();
      releaseMemory();
      if (collectAfterBurst()) {
        const ms = Math.round(performance.now() - t0);
        logger.debug({ ms, rssBeforeMb: toMb(rss), rssAfterMb: toMb(process.memoryUsage.rss()) }, 'a burst is over: its memory given back before the report worker starts');
      }
    },
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
    spans: () => reports.counters.spans,
  });

  const nextRequestId = createRequestIds();
  let closing = false;
  const upstream = createUpstreamClient({
    connectTimeoutMs: config.upstreamConnectTimeoutMs,
    headersTimeoutMs: config.upstreamHeadersTimeoutMs,
    bodyTimeoutMs: config.upstreamBodyTimeoutMs,
    ...(config.upstreamProxy ? { proxy: config.upstreamProxy } : {}),
  });
  const route = createRouter(config.routes, config.upstreamUrl);
  // Tracing (OTEL_* variables): loaded only when an endpoint is set; off, not one OpenTelemetry module is.
  const tracing = config.tracing.enabled ? (await import('./tracing/exchange-tracer.js')).createExchangeTracer(config.tracing) : undefined;
  const exchange = createExchange({
    cache,
    reports,
    upstream,
    route,
    log: logger,
    cacheOnByDefault: config.cache,
    cacheScope: config.cacheScope,
    offline: config.offline,
    maxJsonDepth: config.maxJsonDepth,
    telemetry: metrics.telemetry,
    ...(tracing ? { tracing } : {}),
    ...(fleetFlight ? { fleet: fleetFlight } : {}),
  });
  const tokenCheck = config.apiTokens.length > 0 ? createTokenCheck(config.apiTokens) : undefined;
  const edge = createProxyEdge({
    exchange,
    log: pinoLogger,
    maxBodyBytes: config.maxBodyBytes,
    originOf: (url) => route(url).origin,
    ...(tokenCheck ? { tokenCheck } : {}),
    count: (route, cacheStatus, statusCode) => metrics.countRequest(route, cacheStatus, statusCode),
    closing: () => closing,
    nextRequestId,
  });

  // The site (fastify: the API, /readyz, /metrics, /docs, /dashboard) is built on the first request for it.
  let site: Promise<Site> | undefined;
  // Once built, requests go to it in the same turn the parser hands them over (a request the client
  // pipelines behind another is answered in order, before a parse error of what follows closes the socket).
  let built: Site | undefined;
  const openSite = (): Promise<Site> =>
    (site ??= import('./http/site.js')
      .then(({ buildSite }) =>
        buildSite({ config, version: VERSION, log: logger, server, nextRequestId, metrics, cache, reports, cacheStore, reportStore, closing: () => closing }),
      )
      .then((s) => (built = s)));
  const toSite = (req: IncomingMessage, res: ServerResponse): void => {
    if (built) return built.handle(req, res);
    openSite().then(
      (s) => s.handle(req, res),
      (err: unknown) => {
        logger.error({ err }, 'the relay could not build its API');
        answerInternalError(res);
      },
    );
  };
  const apiEdge = createApiEdge({
    reports,
    cache,
    log: pinoLogger,
    maxBodyBytes: config.maxBodyBytes,
    maxJsonDepth: config.maxJsonDepth,
    ...(tokenCheck ? { tokenCheck } : {}),
    count: (route, cacheStatus, statusCode) => metrics.countRequest(route, cacheStatus, statusCode),
    closing: () => closing,
    nextRequestId,
    readiness: () => readiness({ cacheStore, reportStore, timeoutMs: config.storeTimeoutMs, outboxDepth: () => reports.counters.outboxDepth }),
    metrics: () => metrics.scrape(),
  });
  const server = createRelayServer({ maxHeaderBytes: config.maxHeaderBytes, requestTimeoutMs: config.requestTimeoutMs }, edge, apiEdge, toSite);

  function releaseMemory(): boolean {
    cacheStore.releaseMemory?.();
    return upstream.releaseIdle();
  }

  let closed: Promise<void> | undefined;
  return {
    server,
    log: logger,
    config,
    cache,
    reports,
    exchange,
    releaseMemory,
    async listen(port, host) {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
      const urls = listenUrls(server.address())!;
      // For the message a second relay (or `cache import`) on this data dir prints.
      dataDirLock.update({ url: urls.local });
      const startup = startupFacts(config, urls, VERSION);
      logger.info({ startup }, bannerText(startup));
      return urls.local;
    },
    close() {
      closed ??= (async () => {
        closing = true;
        // Stops accepting; resolves once every connection has ended. Idle ones are closed now, and the
        // others as they go idle: a keep-alive connection whose last answer (a stream, say) ends during the
        // drain would otherwise stay open until its keep-alive timeout.
        const drained = server.listening ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
        server.closeIdle();
        const sweep = setInterval(() => server.closeIdle(), IDLE_SWEEP_MS);
        await drained;
        clearInterval(sweep);
        if (site) await (await site.catch(() => undefined))?.close();
        await upstream.close();
        // No call is in flight any more: nothing this relay leads or follows is left.
        await fleetFlight?.close();
        await reports.close();
        await Promise.allSettled([cacheStore.close(), reportStore.close()]);
        // Last: until everything above is closed, the data dir is still this relay's.
        dataDirLock.release();
      })();
      return closed;
    },
  };
}
