// The proxy for calls upstream, read from the environment as curl, Python's httpx (the client of OpenAI's and
// Anthropic's Python SDKs) and most tools read it, so that a relay behind a company's proxy reaches the
// providers as the apps it stands in for did: HTTPS_PROXY for https upstreams; HTTP_PROXY for http ones, and
// for https ones when HTTPS_PROXY is not set (undici's EnvHttpProxyAgent, which makes these calls); NO_PROXY's
// hosts reached directly (comma-separated: `example.com` also covers its subdomains, `.example.com` and
// `*.example.com` the same, `host:port` one port, `*` every host). The lowercase name wins over the uppercase
// one. A value without a scheme is http:// (curl's reading of `proxy.corp:3128`). Calls go through the proxy
// in a CONNECT tunnel, so it sees the upstream's host and port, never a request or its key.
export interface UpstreamProxy {
  httpProxy?: string;
  httpsProxy?: string;
  /** hosts reached directly; '' for none */
  noProxy: string;
}

type Env = Readonly<Record<string, string | undefined>>;

function read(env: Env, name: string): { value: string; from: string } | undefined {
  for (const from of [name.toLowerCase(), name.toUpperCase()]) {
    const value = env[from]?.trim();
    if (value) return { value, from };
  }
  return undefined;
}

function proxyUrl(env: Env, name: string, problems: string[]): string | undefined {
  const found = read(env, name);
  if (!found) return undefined;
  const text = /^[a-z][a-z0-9+.-]*:\/\//i.test(found.value) ? found.value : `http://${found.value}`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    problems.push(`${found.from}: "${found.value}" is not a proxy URL (like http://proxy.example:3128)`);
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    problems.push(`${found.from}: the proxy must be http:// or https:// (not ${url.protocol}//)`);
    return undefined;
  }
  return text;
}

/** The proxy the environment names, or undefined when it names none (calls then go straight out). */
export function proxyFromEnv(env: Env, problems: string[]): UpstreamProxy | undefined {
  const httpProxy = proxyUrl(env, 'http_proxy', problems);
  const httpsProxy = proxyUrl(env, 'https_proxy', problems);
  if (httpProxy === undefined && httpsProxy === undefined) return undefined;
  return {
    ...(httpProxy !== undefined ? { httpProxy } : {}),
    ...(httpsProxy !== undefined ? { httpsProxy } : {}),
    noProxy: read(env, 'no_proxy')?.value ?? '',
  };
}

const DEFAULT_PORTS: Readonly<Record<string, number>> = { 'http:': 80, 'https:': 443 };

/**
 * The proxy a call to `url` goes through, or undefined when it goes straight out: the choice undici's
 * EnvHttpProxyAgent makes for the calls upstream (HTTPS_PROXY, else HTTP_PROXY, for https; HTTP_PROXY for
 * http; NO_PROXY's hosts, their subdomains and `host:port` entries straight out, `*` everything), made here
 * for what does not go through undici (the OTLP span exporter, tracing/span-export.ts).
 */
export function proxyForUrl(proxy: UpstreamProxy | undefined, url: string): string | undefined {
  if (!proxy) return undefined;
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return undefined;
  }
  const chosen = target.protocol === 'https:' ? (proxy.httpsProxy ?? proxy.httpProxy) : target.protocol === 'http:' ? proxy.httpProxy : undefined;
  if (chosen === undefined) return undefined;
  const noProxy = proxy.noProxy.trim();
  if (noProxy === '*') return undefined;
  const hostname = target.hostname.toLowerCase();
  const port = Number(target.port) || DEFAULT_PORTS[target.protocol]!;
  for (const entry of noProxy.split(/[,\s]/)) {
    if (!entry) continue;
    const parsed = /^(.+):(\d+)$/.exec(entry);
    const host = (parsed ? parsed[1]! : entry).replace(/^\*?\./, '').toLowerCase();
    if (parsed && Number(parsed[2]) !== port) continue;
    if (hostname === host || hostname.endsWith(`.${host}`)) return undefined;
  }
  return chosen;
}
