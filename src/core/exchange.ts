// One proxied call, one way through (STYLE.md): key → namespace → lookup (single flight) → hit: replay;
// miss: forward upstream, stream back while a bounded copy is kept → on a clean end: store; every
// outcome: one record for the report worker. Plain data in, plain data out: no fastify here. The event loop
// does only what the answer needs; the report is built from the record on the report worker.
import { hash as digest } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { LRUCache } from 'lru-cache';
import { RELAY_ERR_CACHE_ONLY_MISS, RELAY_ERR_VALIDATION } from '../errors.js';
import type { UpstreamClient } from '../upstream/upstream-client.js';
import { proxyKeyObject, storedKey, varyOf } from './cache-key.js';
import { cachePolicy } from './cache-policy.js';
import type { CacheHit, CacheService } from './cache-service.js';
import { type StoredAnswer, answerBytes } from './cached-response.js';
import { dialectOf, errorAnswer, errorFacts } from './error-answer.js';
import type { ProxyFacts } from './exchange-record.js';
import { createFleetExchange, mirrorLive } from './fleet-exchange.js';
import type { LiveAnswer } from './live-answer.js';
import { uuidv7 } from './ids.js';
import { decodeUtf8Strict, parseJsonStrict } from './json-guard.js';
import { NAMESPACE_PATTERN, proxyNamespace } from './namespace.js';
import { credentialOf, isJsonMediaType, one, relayHeaderPairs } from './proxy-headers.js';
import type { CacheStatus } from './proxy-report.js';
import type { ReportService } from './report-service.js';
import type { Target } from './routing.js';
import type { FleetFlight, FleetLease } from '../storage/fleet-flight.js';
import { type Flight, createSingleFlight } from './single-flight.js';
import { type Telemetry, noTelemetry } from './telemetry.js';
import { type ExchangeTracing, epochMs } from './trace-facts.js';
import { forward } from './forward.js';
import { createRouteHint } from './route-hint.js';
import type { Base, Exchange, ProxyRequest, ProxyResponse } from './proxy-types.js';

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
  telemetry?: Telemetry;
  /** with tracing on (OTEL_* settings): the exchange's spans (trace-facts.ts) */
  tracing?: ExchangeTracing;
  /** single flight across the relays on one Redis (fleet-flight.ts); without it, per relay only */
  fleet?: FleetFlight;
}

/**
 * Cache keys of request bodies seen before, by their wire bytes (and everything else the key depends on):
 * an identical request, the usual case of a hit, is keyed without parsing or canonicalizing its body.
 */
const RAW_KEYS = 10_000;
/** Namespaces of credentials seen before (a credential's namespace is a hash of it). */
const NAMESPACES = 1_000;

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
    return `No cached answer: this request is not looked up in the cache (only a POST with a JSON body is, while the cache is on for it), and ${why}.`;
  const where = `No cached answer in namespace "${namespace}"${explicit ? ' (x-relay-cache-namespace)' : ''}, and ${why}.`;
  if (explicit || scope === 'shared') return where;
  return (
    `${where} With RELAY_CACHE_SCOPE=credential, entries are kept per upstream credential, so a call with another ` +
    'API key looks in another namespace: record and replay with RELAY_CACHE_SCOPE=shared (or send the same ' +
    'x-relay-cache-namespace) to share entries across keys.'
  );
}

export function createExchange(opts: ExchangeOptions): Exchange {
  const inflight = createSingleFlight<StoredAnswer, LiveAnswer>();
  const telemetry = opts.telemetry ?? noTelemetry;
  const rawKeys = new LRUCache<string, string>({ max: RAW_KEYS });
  const namespaces = new LRUCache<string, string>({ max: NAMESPACES });
  const hint = createRouteHint(opts.log);
  const fleet = opts.fleet && createFleetExchange({ flight: opts.fleet, maxBytes: opts.cache.maxEntryBytes, telemetry });

  function namespaceOf(explicit: string | undefined, credential: string | undefined): string {
    if (explicit || opts.cacheScope === 'shared' || !credential) return proxyNamespace(explicit, opts.cacheScope, credential);
    let ns = namespaces.get(credential);
    if (ns === undefined) namespaces.set(credential, (ns = proxyNamespace(undefined, opts.cacheScope, credential)));
    return ns;
  }

  /** The cache key of a request body, or null when the strict JSON rules refuse it (then it is not cached). */
  function keyOf(req: ProxyRequest, namespace: string, sha: string): string | null {
    const raw = `${namespace}\n${req.method} ${req.url}\n${varyOf(req.headers)}\n${sha}`;
    const known = rawKeys.get(raw);
    if (known !== undefined) return known;
    let body: unknown;
    try {
      // A body the strict rules refuse (bad UTF-8, too deep, prototype keys, numbers out of range) is
      // forwarded untouched: the upstream judges it. It is just not cached, nor parsed into the report.
      body = parseJsonStrict(decodeUtf8Strict(req.body!), opts.maxJsonDepth);
    } catch {
      return null;
    }
    const hash = opts.cache.hash(proxyKeyObject(req.method, req.url, body, req.headers));
    rawKeys.set(raw, hash);
    return hash;
  }

  function answer(a: StoredAnswer, status: CacheStatus, base: Base, createdAt?: number): ProxyResponse {
    const endedAt = Date.now();
    const headers: Record<string, string> = Object.assign({}, a.headers, base.relayHeaders(status));
    if (createdAt !== undefined) headers.age = String(Math.max(0, Math.floor((endedAt - createdAt) / 1000)));
    const overheadMs = performance.now() - base.t0;
    headers['server-timing'] = `relay;dur=${overheadMs.toFixed(3)}`;
    telemetry.exchange({ route: base.route, cacheStatus: status, status: a.status, overheadMs });
    const body = answerBytes(a);
    // A replayed stream goes out whole, at once: its first chunk is now.
    if (base.trace && a.sse) base.trace.firstChunk = epochMs(performance.now());
    const own: Parameters<Base['record']>[0] = { endedAt, status: a.status, cacheStatus: status, outcome: 'complete', streamed: a.sse };
    if (a.reportId !== undefined) own.originReportId = a.reportId;
    // Entries written by older versions carry the original cost; otherwise it is derived from the body.
    if (typeof a.costUsd === 'number') own.costSavedUsd = a.costUsd;
    base.record(own, body);
    return { status: a.status, headers, body };
  }

  /** A call that joins an identical streamed answer while it runs (see live-answer.ts). */
  function joinLive(live: LiveAnswer, req: ProxyRequest, base: Base): ProxyResponse | undefined {
    if (base.trace && live.trace) base.trace.leader = live.trace;
    const body = live.join(req.signal, (outcome, bytes) => {
      const own: Parameters<Base['record']>[0] = { endedAt: Date.now(), status: live.status, cacheStatus: 'COALESCED', outcome, streamed: true };
      own.originReportId = live.reportId;
      base.record(own, outcome === 'complete' ? bytes : undefined);
    });
    if (!body) return undefined;
    const headers: Record<string, string> = Object.assign({}, live.headers, base.relayHeaders('COALESCED'));
    const overheadMs = performance.now() - base.t0;
    headers['server-timing'] = `relay;dur=${overheadMs.toFixed(3)}`;
    telemetry.exchange({ route: base.route, cacheStatus: 'COALESCED', status: live.status, overheadMs });
    return { status: live.status, headers, body };
  }

  /**
   * A call answered by an identical one in flight: a streamed answer is joined from its first event;
   * otherwise (or when it can no longer be joined) the call waits for the stored answer. Undefined when the
   * flight has nothing to share (then the call goes upstream itself).
   */
  async function shareOf(running: Flight<StoredAnswer, LiveAnswer>, req: ProxyRequest, base: Base): Promise<ProxyResponse | undefined> {
    const live = await running.started;
    const joined = live && joinLive(live, req, base);
    if (joined) return joined;
    const shared = await running.result;
    return shared ? answer(shared, 'COALESCED', base) : undefined;
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

  /** upstream calls whose answers have not ended (Exchange.openCalls) */
  let openCalls = 0;

  return {
    get openCalls() {
      return openCalls;
    },
    async handle(req) {
      const t0 = performance.now();
      const startedAt = Date.now();
      const id = uuidv7(startedAt);
      const target = opts.route(req.url);
      const explicitNs = one(req.headers['x-relay-cache-namespace']);
      if (explicitNs !== undefined && !NAMESPACE_PATTERN.test(explicitNs))
        throw new RELAY_ERR_VALIDATION('headers/x-relay-cache-namespace must match ^[A-Za-z0-9._-]{1,128}$');

      const policy = cachePolicy({
        cacheControl: one(req.headers['cache-control']),
        ttlHeader: one(req.headers['x-relay-cache-ttl']),
        cacheSwitch: one(req.headers['x-relay-cache']),
        cacheOnByDefault: opts.cacheOnByDefault,
        offline: opts.offline,
      });
      const json = req.method === 'POST' && req.body !== undefined && req.body.length > 0 && isJsonMediaType(one(req.headers['content-type']));
      // Only a call that uses the cache needs its namespace (a hash of the credential, by default) and key.
      let namespace = '';
      let hash: string | null = null;
      let sha: string | undefined;
      if (json && (policy.read || policy.write)) {
        namespace = namespaceOf(explicitNs, credentialOf(req.headers));
        sha = digest('sha256', req.body!, 'hex');
        hash = keyOf(req, namespace, sha);
      }
      const usesCache = hash !== null;
      const key = hash ? storedKey(namespace, hash) : null;
      const requestJson: ProxyFacts['requestJson'] = !json ? 'no' : sha === undefined ? 'unchecked' : usesCache ? 'checked' : 'refused';

      const trace = opts.tracing?.begin(req.headers, req.method, t0);
      if (trace && usesCache) trace.namespace = namespace;
      const base: Base = {
        id,
        t0,
        route: target.prefix || 'default',
        relayHeaders: (status) => {
          const headers: Record<string, string> = { 'x-relay-cache': status, 'x-relay-report-id': id };
          if (hash) headers['x-relay-cache-key'] = hash;
          return headers;
        },
        record(own, response) {
          const facts: ProxyFacts = Object.assign(
            {
              id,
              startedAt,
              method: req.method,
              url: req.url,
              upstream: target.origin,
              relayHeaders: relayHeaderPairs(req.headers),
              cacheEnabled: usesCache,
              cacheKey: hash,
              requestJson,
            },
            own,
          );
          if (sha !== undefined) facts.requestSha256 = sha;
          if (trace) {
            trace.end = epochMs(performance.now());
            facts.trace = trace;
          }
          opts.reports.recordProxy({ facts, ...(req.body ? { request: req.body } : {}), ...(response ? { response } : {}) });
        },
      };
      if (trace) base.trace = trace;

      // A call that waited on a flight with nothing to share goes upstream itself (not into the fleet again).
      let waited = false;
      if (hash && key && policy.read) {
        const hit = await lookup(namespace, hash);
        if (hit && (policy.maxAgeSec === undefined || Date.now() - hit.createdAt <= policy.maxAgeSec * 1000))
          return answer(hit.answer, 'HIT', base, hit.createdAt);
        const running = inflight.join(key);
        if (running) {
          waited = true;
          const shared = await shareOf(running, req, base);
          if (shared) return shared;
        }
      }
      if (policy.onlyIfCached) {
        const shown: CacheStatus = usesCache ? 'MISS' : 'BYPASS';
        const err = new RELAY_ERR_CACHE_ONLY_MISS(
          cacheOnlyMissMessage(opts.offline, usesCache ? namespace : undefined, explicitNs !== undefined, opts.cacheScope),
        );
        const { response } = errorAnswer(dialectOf(req.headers, target.origin), errorFacts(err), base.relayHeaders(shown));
        telemetry.exchange({ route: base.route, cacheStatus: shown, status: 504, overheadMs: performance.now() - t0 });
        base.record(
          { endedAt: Date.now(), status: 504, cacheStatus: shown, outcome: 'cache-only-miss', streamed: false, error: err.message },
          Buffer.from(response.body as string),
        );
        return response;
      }

      const status: CacheStatus = !usesCache || !policy.write ? 'BYPASS' : policy.read ? 'MISS' : 'REFRESH';
      let flight = key && policy.write ? inflight.lead(key) : undefined;
      // ── Fleet single flight (fleet-exchange.ts): the relays on one Redis make one upstream call. ──
      let fleetLease: FleetLease | undefined;
      if (fleet && flight && key && policy.read && !waited) {
        const step = await fleet.step({
          key,
          leader: flight,
          running: inflight.join(key)!,
          entryCheck: policy.maxAgeSec === undefined,
          lookup: () => lookup(namespace, hash!),
          share: (running) => shareOf(running, req, base),
          hit: (hit) => answer(hit.answer, 'HIT', base, hit.createdAt),
        });
        if ('response' in step) return step.response;
        if ('relead' in step) flight = inflight.lead(key);
        else fleetLease = step.lease;
      }
      const leader = flight;
      const lease = fleetLease;
      // ── (end of the fleet step) ──
      // Open from here until its answer ends: forward calls exactly one of onStored / onFailed then (a
      // rejection before either, a bug, closes it too).
      openCalls++;
      let open = true;
      const ended = (): void => {
        if (open) {
          open = false;
          openCalls--;
        }
      };
      const forwarding = forward({
        req,
        target,
        base,
        status,
        upstream: opts.upstream,
        cacheMaxEntryBytes: opts.cache.maxEntryBytes,
        onStored: (cached) => {
          ended();
          leader?.settle(cached);
          const saved =
            cached && hash && policy.write
              ? opts.cache.save(namespace, hash, cached, policy.ttlSec).then(
                  (r) => r.stored,
                  (err: unknown) => {
                    telemetry.cacheFailure('save');
                    opts.log.warn({ err }, 'cache write failed');
                    return false;
                  },
                )
              : false;
          lease?.finish(saved);
        },
        onFailed: () => {
          ended();
          leader?.settle(undefined);
          lease?.finish(false);
        },
        publish:
          leader && lease
            ? (live) => {
                leader.publish(live);
                mirrorLive(live, lease);
              }
            : leader?.publish,
        telemetry,
        hint,
        ...(opts.tracing ? { tracing: opts.tracing } : {}),
      });
      forwarding.catch(ended);
      return forwarding;
    },
  };
}
