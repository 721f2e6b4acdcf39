// The one way out to the providers: an undici Agent (keep-alive pools per origin) with the timeouts from
// config, and raw network errors mapped once, by code, into the relay's errors (the original kept as cause).
import type { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { Agent, Dispatcher, EnvHttpProxyAgent } from 'undici';
import {
  RELAY_ERR_UPSTREAM_DNS,
  RELAY_ERR_UPSTREAM_TIMEOUT,
  RELAY_ERR_UPSTREAM_UNREACHABLE,
} from '../errors.js';
import type { UpstreamProxy } from './upstream-proxy.js';

export interface UpstreamOptions {
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  /** the proxy the environment names (upstream-proxy.ts): calls go through it, NO_PROXY's hosts excepted */
  proxy?: UpstreamProxy;
}

export interface UpstreamRequest {
  origin: string;
  path: string;
  method: string;
  headers: Record<string, string | string[]>;
  body?: Buffer;
  /** aborts the call: an AbortSignal, or an EventEmitter with `aborted` that emits 'abort' */
  signal?: AbortSignal | (EventEmitter & { readonly aborted: boolean });
}

export interface UpstreamResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Readable;
}

export interface UpstreamClient {
  request(req: UpstreamRequest): Promise<UpstreamResponse>;
  /**
   * In a quiet moment: when more than IDLE_CONNECTIONS_KEPT connections wait idle (a burst left them), lets
   * them go — the pool starts over, calls still running finish on the old one. True when it did.
   */
  releaseIdle(): boolean;
  close(): Promise<void>;
}

/**
 * Idle upstream connections a quiet relay keeps. A burst of a thousand streams leaves a thousand, kept alive
 * for 30 s or as long as the server's Keep-Alive allows (each a socket, its parser and buffers: ~5 MB for a
 * thousand here, and a TLS session each with a real provider); the next calls after the quiet moment
 * connect again.
 */
export const IDLE_CONNECTIONS_KEPT = 32;

/** undici's `request` (its `Dispatcher#request`, which undici's index attaches to every dispatcher) */
type RequestApi = (this: Dispatcher, options: Dispatcher.RequestOptions) => Promise<Dispatcher.ResponseData>;

/**
 * The parts of undici the relay calls: the Agent and the request API, loaded from their own modules. undici's
 * index loads all of undici besides (fetch and its web streams, WebSocket, EventSource, the cache store, the
 * mock agent): 108–183 ms and ~20 MB of RSS in a bare Node here, against 47–60 ms and ~12 MB for these two, and
 * all of it happened on a relay's first call upstream. undici 7 publishes no `exports` map, so these paths are
 * its files; test/unit/upstream/undici-parts.test.ts holds them to the very class and function undici's index
 * exports, so an upgrade that moves them fails there, not at a user's first call.
 */
const UNDICI_PARTS = {
  agent: 'undici/lib/dispatcher/agent.js',
  request: 'undici/lib/api/api-request.js',
} as const;

export async function loadUndiciParts(proxied: boolean): Promise<{
  Agent: typeof Agent;
  EnvHttpProxyAgent: typeof EnvHttpProxyAgent | undefined;
  request: RequestApi;
}> {
  // Behind a proxy the environment names, undici's index is loaded whole: its proxy agent opens the tunnel
  // with a dispatcher's `connect`, one of the API methods the index attaches to every dispatcher.
  const [agentModule, requestModule, whole] = await Promise.all([
    import(UNDICI_PARTS.agent),
    import(UNDICI_PARTS.request),
    proxied ? import('undici') : undefined,
  ]);
  return {
    Agent: (agentModule as { default: typeof Agent }).default,
    EnvHttpProxyAgent: whole?.EnvHttpProxyAgent,
    request: (requestModule as { default: RequestApi }).default,
  };
}

export function createUpstreamClient(opts: UpstreamOptions): UpstreamClient {
  // undici is loaded with the first call upstream: a relay that only answers from its cache never needs it.
  let agent: Agent | EnvHttpProxyAgent | undefined;
  let loading: Promise<Agent | EnvHttpProxyAgent> | undefined;
  let newAgent: (() => Agent | EnvHttpProxyAgent) | undefined;
  /** undici's request API, called on the agent (set with it) */
  let requestApi: RequestApi | undefined;
  /** pools let go by releaseIdle, closing once their running calls are done */
  const retired = new Set<Promise<void>>();
  const agentOf = (): Agent | EnvHttpProxyAgent | Promise<Agent | EnvHttpProxyAgent> =>
    agent ??
    (loading ??= loadUndiciParts(opts.proxy !== undefined).then((parts) => {
      const { Agent, EnvHttpProxyAgent } = parts;
      requestApi = parts.request;
      const options = {
        connect: { timeout: opts.connectTimeoutMs },
        headersTimeout: opts.headersTimeoutMs,
        bodyTimeout: opts.bodyTimeoutMs,
        keepAliveTimeout: 30_000,
      };
      const proxy = opts.proxy;
      // '' where the environment named no proxy: undici would otherwise read the variables itself
      newAgent =
        proxy && EnvHttpProxyAgent
          ? () => new EnvHttpProxyAgent({ ...options, httpProxy: proxy.httpProxy ?? '', httpsProxy: proxy.httpsProxy ?? '', noProxy: proxy.noProxy })
          : () => new Agent(options);
      agent = newAgent();
      return agent;
    }));

  return {
    async request(req) {
      try {
        const to = agent ?? (await agentOf());
        const res = await requestApi!.call(to, {
          origin: req.origin,
          path: req.path,
          method: req.method as Dispatcher.HttpMethod,
          headers: req.headers,
          body: req.body ?? null,
          signal: req.signal,
        });
        return { status: res.statusCode, headers: res.headers as IncomingHttpHeaders, body: res.body };
      } catch (err) {
        throw upstreamError(err, req.origin);
      }
    },
    releaseIdle() {
      // (through a proxy the pools are the proxy agent's own, which keeps no such count)
      if (!agent || !newAgent || !('stats' in agent)) return false;
      let idle = 0;
      for (const stats of Object.values(agent.stats)) idle += (stats as { free?: number }).free ?? 0;
      if (idle <= IDLE_CONNECTIONS_KEPT) return false;
      const old = agent;
      agent = newAgent();
      loading = Promise.resolve(agent);
      // close() lets the calls still running on the old pool finish, then closes its connections
      const closing = old.close().catch(() => undefined);
      retired.add(closing);
      void closing.then(() => retired.delete(closing));
      return true;
    },
    close: async () => {
      if (loading) await (await loading).close();
      await Promise.all(retired);
    },
  };
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);
const DNS = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME']);
const TIMEOUT = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);

function codeOf(err: unknown): string | undefined {
  const e = err as { code?: unknown; errors?: unknown[]; cause?: unknown };
  if (typeof e?.code === 'string') return e.code;
  // Happy eyeballs reports every address it tried in an AggregateError.
  if (Array.isArray(e?.errors) && e.errors.length > 0) return codeOf(e.errors[0]);
  if (e?.cause) return codeOf(e.cause);
  return undefined;
}

/** Maps a raw undici/network error to a relay error; aborts (the client left) are returned unchanged. */
export function upstreamError(err: unknown, origin: string): unknown {
  const code = codeOf(err);
  if (code === 'UND_ERR_ABORTED' || (err as Error)?.name === 'AbortError') return err;
  if (code && TIMEOUT.has(code)) return new RELAY_ERR_UPSTREAM_TIMEOUT(origin, code, { cause: err });
  if (code && DNS.has(code)) return new RELAY_ERR_UPSTREAM_DNS(new URL(origin).hostname, code, { cause: err });
  if (code && UNREACHABLE.has(code)) return new RELAY_ERR_UPSTREAM_UNREACHABLE(origin, code, { cause: err });
  return new RELAY_ERR_UPSTREAM_UNREACHABLE(origin, code ?? (err as Error)?.message ?? 'unknown error', { cause: err });
}
