// The start-up banner: what a person needs to know about a relay that has just started, in one block
// through the logger (info): where it listens, where calls go, where it keeps things, how it behaves, and
// where the dashboard is. Connection strings lose their passwords (redact); tokens are only counted.
// The same facts go beside the text as `startup`, for a machine reading the JSON line.
import { join } from 'node:path';
import { type RelayConfig, redact } from './config.js';
import type { ListenUrls } from './listen-url.js';
import type { UpstreamProxy } from './upstream/upstream-proxy.js';

export interface StartupFacts {
  version: string;
  url: string;
  upstream: string;
  /** the proxy calls upstream go through (HTTPS_PROXY, HTTP_PROXY, NO_PROXY), when one is set */
  proxy?: string;
  routes: { prefix: string; upstream: string }[];
  dataDir: string;
  cacheStore: string;
  reportStore: string;
  cache: boolean;
  cacheScope: RelayConfig['cacheScope'];
  offline: boolean;
  tokensRequired: boolean;
  /** `off`, or where spans go (OTEL_* variables) */
  tracing: string;
  dashboard: string;
}

export function startupFacts(config: Readonly<RelayConfig>, urls: ListenUrls, version: string): StartupFacts {
  return {
    version,
    url: urls.bound,
    upstream: redact(config.upstreamUrl),
    ...(config.upstreamProxy ? { proxy: proxyText(config.upstreamProxy) } : {}),
    routes: config.routes.map((r) => ({ prefix: r.prefix, upstream: redact(r.upstream) })),
    dataDir: config.dataDir,
    cacheStore: config.cacheUrl === 'sqlite' ? `sqlite ${join(config.dataDir, 'cache.sqlite')}` : redact(config.cacheUrl),
    reportStore: config.reportsUrl === 'sqlite' ? `sqlite ${join(config.dataDir, 'reports.sqlite')}` : redact(config.reportsUrl),
    cache: config.cache,
    cacheScope: config.cacheScope,
    offline: config.offline,
    tokensRequired: config.apiTokens.length > 0,
    tracing: config.tracing.enabled
      ? `OTLP ${config.tracing.protocol} to ${redact(config.tracing.url)}, sampler ${config.tracing.sampler}${config.tracing.captureContent ? ', with prompts and answers' : ''}`
      : 'off',
    dashboard: `${urls.local}/dashboard/`,
  };
}

/** Where calls upstream go, proxy passwords hidden: `https via http://proxy:3128; not for localhost (NO_PROXY)`. */
function proxyText(p: UpstreamProxy): string {
  const via =
    p.httpsProxy !== undefined && p.httpProxy !== undefined && p.httpsProxy !== p.httpProxy
      ? `https via ${redact(p.httpsProxy)}, http via ${redact(p.httpProxy)}`
      : p.httpsProxy !== undefined && p.httpProxy === undefined
        ? `https via ${redact(p.httpsProxy)} (http straight out)`
        : `via ${redact((p.httpsProxy ?? p.httpProxy)!)}`;
  return p.noProxy ? `${via}; not for ${p.noProxy} (NO_PROXY)` : via;
}

export function bannerText(f: StartupFacts): string {
  const rows: [string, string][] = [
    ['upstream', f.upstream],
    ...(f.proxy ? [['proxy', f.proxy] as [string, string]] : []),
    ...f.routes.map((r): [string, string] => ['route', `${r.prefix} → ${r.upstream}`]),
    ['data dir', f.dataDir],
    ['cache', `${f.cacheStore}; ${f.cache ? 'on' : 'off (x-relay-cache: on turns it on per call)'}, scope ${f.cacheScope}`],
    ['reports', f.reportStore],
    ['offline', f.offline ? 'yes: nothing goes upstream, a miss is a 504' : 'no'],
    ['tokens', f.tokensRequired ? 'required (x-relay-token, or Authorization: Bearer on /api)' : 'not required (RELAY_API_TOKENS is empty)'],
    ['tracing', f.tracing === 'off' ? 'off (OTEL_EXPORTER_OTLP_ENDPOINT is not set)' : f.tracing],
    ['dashboard', f.tokensRequired ? `${f.dashboard}#token=YOUR_TOKEN` : f.dashboard],
  ];
  return [`llm-relay ${f.version} listening on ${f.url}`, ...rows.map(([k, v]) => `  ${k.padEnd(10)} ${v}`)].join('\n');
}
