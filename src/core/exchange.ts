// One proxied call, one way through (STYLE.md): key → namespace → lookup (single flight) → hit: replay;
// miss: forward upstream, stream back while a bounded copy is kept → on a clean end: store; every
// outcome: one report. Plain data in, plain data out: no fastify here.
import { performance } from 'node:perf_hooks';
import { RELAY_ERR_CACHE_ONLY_MISS, RELAY_ERR_VALIDATION } from '../errors.js';
import { dialectOf, errorAnswer, errorFacts } from './error-answer.js';
import type { UpstreamClient } from '../upstream/upstream-client.js';
import { proxyKeyObject, storedKey } from './cache-key.js';
import { cachePolicy } from './cache-policy.js';
import type { CacheHit, CacheService } from './cache-service.js';
import type { CachedResponse } from './cached-response.js';
import type { LiveAnswer } from './live-answer.js';
import { uuidv7 } from './ids.js';
import { decodeUtf8Strict, parseJsonStrict } from './json-guard.js';
import { NAMESPACE_PATTERN, proxyNamespace } from './namespace.js';
import { credentialOf, reportFields } from './proxy-headers.js';
import { type CacheStatus, type ExchangeFacts, knownBody, knownFacts, proxyReport } from './proxy-report.js';
import type { ReportService } from './report-service.js';
import type { Target } from './routing.js';
import { createSingleFlight } from './single-flight.js';
import { type Telemetry, noTelemetry } from './telemetry.js';
import { forward } from './forward.js';
import { type Base, type Exchange, type ProxyRequest, type ProxyResponse, exchangeFacts } from './proxy-types.js';

export interface ExchangeLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface ExchangeOptions {
  cache: CacheService;
  reports: ReportService;
  upstream: UpstreamClient;
  route: (url: string) => Target;
  log: ExchangeLog;
  cacheOnByDefault: boolean;
  cacheScope: 'credential' | 'shared';
  offline: boolean;
  maxJsonDepth: number;
  defaults: { client: string; clientVersion: string; environment: string };
  telemetry?: Telemetry;
}

function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function isJson(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const mime = contentType.split(';')[0]!.trim().toLowerCase();
  return mime === 'application/json' || mime.endsWith('+json');
}

/**
 * Why a call that may only be answered from the cache was not: where the relay looked, and (the usual
 * surprise when replaying a recording with another key) which setting shares entries across keys.
 */
export function cacheOnlyMissMessage(
  offline: boolean,
  namespace: string | undefined,
  explicit: boolean,
  scope: 'credential' | 'shared',
): string {
  const why = offline ? 'the relay is offline (RELAY_OFFLINE)' : 'the request says only-if-cached';
  if (namespace === undefined)
    return `No cached answer: this request is not cacheable (a POST with a JSON body, cache not switched off), and ${why}`;
  const where = `No cached answer in namespace "${namespace}"${explicit ? ' (x-relay-cache-namespace)' : ''}, and ${why}.`;
  if (explicit || scope === 'shared') return where;
  return (
    `${where} With RELAY_CACHE_SCOPE=credential, entries are kept per upstream credential, so a call with another ` +
    'API key looks in another namespace: record and replay with RELAY_CACHE_SCOPE=shared (or send the same ' +
    'x-relay-cache-namespace) to share entries across keys.'
  );
}

export function createExchange(opts: ExchangeOptions): Exchange {
  const inflight = createSingleFlight<CachedResponse, LiveAnswer>();
  const telemetry = opts.telemetry ?? noTelemetry;

  function parseBody(req: ProxyRequest): { ok: boolean; value?: unknown } {
    if (req.method !== 'POST' || !req.body || req.body.length === 0 || !isJson(one(req.headers['content-type'])))
      return { ok: false };
    // A body the strict rules refuse (bad UTF-8, too deep, prototype keys, numbers out of range) is
    // forwarded untouched: the upstream judges it. It is just not cached, nor parsed into the report.
    try {
      return { ok: true, value: parseJsonStrict(decodeUtf8Strict(req.body), opts.maxJsonDepth) };
    } catch {
      return { ok: false };
    }
  }

  /** The exchange's one report, built and written after the answer (see ReportService.recordLater). */
  function record(facts: () => ExchangeFacts, id: string): void {
    opts.reports.recordLater(
      () => {
        const f = facts();
        return { input: proxyReport(f), id, known: knownFacts(f) };
      },
      (err: unknown) => opts.log.error({ err, reportId: id }, 'report not written'),
    );
  }

  function answer(hit: CacheHit | { response: CachedResponse; createdAt?: number; payload?: string }, status: CacheStatus, base: Base): ProxyResponse {
    const cached = hit.response;
    const endedAt = Date.now();
    const headers: Record<string, string> = Object.assign({}, cached.headers, base.relayHeaders(status));
    if (status === 'HIT' && hit.createdAt !== undefined)
      headers.age = String(Math.max(0, Math.floor((endedAt - hit.createdAt) / 1000)));
    const overheadMs = performance.now() - base.t0;
    headers['server-timing'] = `relay;dur=${overheadMs.toFixed(3)}`;
    telemetry.exchange({ route: base.route, cacheStatus: status, status: cached.status, overheadMs });
    record(() => {
      const facts = exchangeFacts(base, {
        endedAt,
        status: cached.status,
        responseBody: cached.body,
        streamed: cached.sse !== undefined,
        cacheStatus: status,
        outcome: 'complete',
      });
      if (cached.bodyBytes !== undefined && cached.bodySha256) facts.responseRaw = { bytes: cached.bodyBytes, sha256: cached.bodySha256 };
      if (cached.reportId) facts.originReportId = cached.reportId;
      // Entries written by older versions carry the original cost; otherwise it is derived from the body.
      if (typeof cached.costUsd === 'number') facts.costSavedUsd = cached.costUsd;
      return facts;
    }, base.id);
    return { status: cached.status, headers, body: hit.payload ?? cached.sse ?? JSON.stringify(cached.body) };
  }

  /** A call that joins an identical streamed answer while it runs (see live-answer.ts). */
  function joinLive(live: LiveAnswer, req: ProxyRequest, base: Base): ProxyResponse | undefined {
    const body = live.join(req.signal, (outcome) => {
      const endedAt = Date.now();
      record(() => {
        const facts = exchangeFacts(base, {
          endedAt,
          status: live.status,
          responseBody: outcome === 'complete' ? live.body() : undefined,
          streamed: true,
          cacheStatus: 'COALESCED',
          outcome,
        });
        facts.originReportId = live.reportId;
        return facts;
      }, base.id);
    });
    if (!body) return undefined;
    const headers: Record<string, string> = Object.assign({}, live.headers, base.relayHeaders('COALESCED'));
    const overheadMs = performance.now() - base.t0;
    headers['server-timing'] = `relay;dur=${overheadMs.toFixed(3)}`;
    telemetry.exchange({ route: base.route, cacheStatus: 'COALESCED', status: live.status, overheadMs });
    return { status: live.status, headers, body };
  }

  async function lookup(namespace: string, hash: string): Promise<CacheHit | undefined> {
    try {
      return await opts.cache.lookup(namespace, hash);
    } catch (err) {
      // A cache store that fails or stalls must not fail the call: it is a miss.
      telemetry.cacheFailure('lookup');
      opts.log.warn({ err }, 'cache lookup failed: treated as a miss');
      return undefined;
    }
  }

  return {
    inflight,
    async handle(req) {
      const t0 = performance.now();
      const startedAt = Date.now();
      const id = uuidv7(startedAt);
      const target = opts.route(req.url);
      const explicitNs = one(req.headers['x-relay-cache-namespace']);
      if (explicitNs !== undefined && !NAMESPACE_PATTERN.test(explicitNs))
        throw new RELAY_ERR_VALIDATION('headers/x-relay-cache-namespace must match ^[A-Za-z0-9._-]{1,128}$');

      const parsed = parseBody(req);
      const policy = cachePolicy({
        cacheControl: one(req.headers['cache-control']),
        ttlHeader: one(req.headers['x-relay-cache-ttl']),
        cacheSwitch: one(req.headers['x-relay-cache']),
        cacheOnByDefault: opts.cacheOnByDefault,
        offline: opts.offline,
      });
      const usesCache = parsed.ok && (policy.read || policy.write);
      // Only a call that uses the cache needs its namespace (a hash of the credential, by default) and key.
      const namespace = usesCache ? proxyNamespace(explicitNs, opts.cacheScope, credentialOf(req.headers)) : '';
      const hash = usesCache ? opts.cache.hash(proxyKeyObject(req.method, req.url, parsed.value, req.headers)) : null;
      const key = hash ? storedKey(namespace, hash) : null;

      // The report's facts are built when first needed: on a miss, after the request went upstream.
      let facts: Base['facts'] | undefined;
      const buildFacts = (): Base['facts'] => {
        const fields = reportFields(req.headers, opts.defaults);
        const built: Base['facts'] = {
          method: req.method,
          url: req.url,
          upstream: target.origin,
          startedAt,
          metadata: fields.metadata,
          properties: fields.properties,
          requestBody: parsed.ok ? parsed.value : undefined,
          cacheEnabled: usesCache,
          cacheKey: hash,
        };
        if (parsed.ok && req.body) built.requestRaw = knownBody(req.body);
        return built;
      };
      const base: Base = {
        id,
        t0,
        route: target.prefix || 'default',
        get facts() {
          return (facts ??= buildFacts());
        },
        relayHeaders: (status) => {
          const headers: Record<string, string> = { 'x-relay-cache': status, 'x-relay-report-id': id };
          if (hash) headers['x-relay-cache-key'] = hash;
          return headers;
        },
      };

      if (hash && key && policy.read) {
        const hit = await lookup(namespace, hash);
        if (hit && (policy.maxAgeSec === undefined || Date.now() - hit.createdAt <= policy.maxAgeSec * 1000))
          return answer(hit, 'HIT', base);
        const running = inflight.join(key);
        if (running) {
          // A streamed answer is joined from its first event; otherwise (or when it can no longer be
          // joined) the call waits for the stored answer. With nothing to share it goes upstream itself.
          const live = await running.started;
          const joined = live && joinLive(live, req, base);
          if (joined) return joined;
          const shared = await running.result;
          if (shared) return answer({ response: shared }, 'COALESCED', base);
        }
      }
      if (policy.onlyIfCached) {
        const shown: CacheStatus = usesCache ? 'MISS' : 'BYPASS';
        const err = new RELAY_ERR_CACHE_ONLY_MISS(
          cacheOnlyMissMessage(opts.offline, usesCache ? namespace : undefined, explicitNs !== undefined, opts.cacheScope),
        );
        const { response, body } = errorAnswer(dialectOf(req.headers, target.origin), errorFacts(err), base.relayHeaders(shown));
        telemetry.exchange({ route: base.route, cacheStatus: shown, status: 504, overheadMs: performance.now() - t0 });
        const endedAt = Date.now();
        record(
          () =>
            exchangeFacts(base, {
              endedAt,
              status: 504,
              responseBody: body,
              streamed: false,
              cacheStatus: shown,
              outcome: 'cache-only-miss',
              error: err.message,
            }),
          id,
        );
        return response;
      }

      const status: CacheStatus = !usesCache || !policy.write ? 'BYPASS' : policy.read ? 'MISS' : 'REFRESH';
      const flight = key && policy.write ? inflight.lead(key) : undefined;
      return forward({
        req,
        target,
        base,
        status,
        upstream: opts.upstream,
        cacheMaxEntryBytes: opts.cache.maxEntryBytes,
        onStored: (cached) => {
          flight?.settle(cached);
          if (cached && hash && policy.write)
            opts.cache
              .save(namespace, hash, cached, policy.ttlSec)
              .catch((err: unknown) => {
                telemetry.cacheFailure('save');
                opts.log.warn({ err }, 'cache write failed');
              });
        },
        report: (facts) => record(facts, id),
        onFailed: () => flight?.settle(undefined),
        publish: flight?.publish,
        telemetry,
      });
    },
  };
}
