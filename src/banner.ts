// The start-up banner: what a person needs to know about a relay that has just started, in one block
// through the logger (info): where it listens, where calls go, where it keeps things, how it behaves, and
// where the dashboard is. Connection strings lose their passwords (redact); tokens are only counted.
// The same facts go beside the text as `startup`, for a machine reading the JSON line.
import { join } from 'node:path';
import { type RelayConfig, redact } from './config.js';
import type { ListenUrls } from './listen-url.js';

export interface StartupFacts {
  version: string;
  url: string;
  upstream: string;
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

export function bannerText(f: StartupFacts): string {
  const rows: [string, string][] = [
    ['upstream', f.upstream],
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
