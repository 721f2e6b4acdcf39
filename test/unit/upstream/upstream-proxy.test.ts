// The proxy for calls upstream, from HTTPS_PROXY, HTTP_PROXY and NO_PROXY (src/upstream/upstream-proxy.ts).
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { proxyForUrl, proxyFromEnv } from '../../../src/upstream/upstream-proxy.js';

function read(env: Record<string, string>) {
  const problems: string[] = [];
  return { proxy: proxyFromEnv(env, problems), problems };
}

describe('the upstream proxy from the environment', () => {
  it('is none without HTTPS_PROXY or HTTP_PROXY (NO_PROXY alone, or empty values, change nothing)', () => {
    expect(read({})).toEqual({ proxy: undefined, problems: [] });
    expect(read({ NO_PROXY: 'localhost', HTTPS_PROXY: '', http_proxy: '  ' })).toEqual({ proxy: undefined, problems: [] });
  });

  it('reads both names, the lowercase one first, and NO_PROXY as it is', () => {
    expect(read({ HTTPS_PROXY: 'http://upper:3128', https_proxy: 'http://lower:3128', NO_PROXY: 'localhost,.corp' })).toEqual({
      proxy: { httpsProxy: 'http://lower:3128', noProxy: 'localhost,.corp' },
      problems: [],
    });
    expect(read({ HTTP_PROXY: 'https://user:pw@proxy.corp:8443', no_proxy: '*' }).proxy).toEqual({
      httpProxy: 'https://user:pw@proxy.corp:8443',
      noProxy: '*',
    });
  });

  it('takes a proxy without a scheme as http:// (as curl does)', () => {
    expect(read({ HTTPS_PROXY: 'proxy.corp:3128' }).proxy).toEqual({ httpsProxy: 'http://proxy.corp:3128', noProxy: '' });
  });

  it('refuses what is no http(s) proxy URL, naming the variable, and the relay does not start', () => {
    expect(read({ HTTPS_PROXY: 'socks5://proxy:1080', http_proxy: 'http://[nope' }).problems).toEqual([
      'http_proxy: "http://[nope" is not a proxy URL (like http://proxy.example:3128)',
      'HTTPS_PROXY: the proxy must be http:// or https:// (not socks5://)',
    ]);
    expect(() => loadConfig({ env: { HTTPS_PROXY: 'socks5://proxy:1080' } })).toThrow(/HTTPS_PROXY: the proxy must be http:\/\/ or https:\/\//);
  });

  it('is part of the configuration loadConfig reads', () => {
    expect(loadConfig({ env: { HTTPS_PROXY: 'http://p:1' } }).upstreamProxy).toEqual({ httpsProxy: 'http://p:1', noProxy: '' });
    expect(loadConfig({ env: {} }).upstreamProxy).toBeUndefined();
  });
});

describe('the proxy a URL goes through (as undici’s EnvHttpProxyAgent chooses for the calls upstream)', () => {
  const both = { httpProxy: 'http://plain:3128', httpsProxy: 'http://tls:3128', noProxy: '' };

  it('is HTTPS_PROXY for https (else HTTP_PROXY), HTTP_PROXY for http, none without a proxy or for other schemes', () => {
    expect(proxyForUrl(both, 'https://api.honeycomb.io/v1/traces')).toBe('http://tls:3128');
    expect(proxyForUrl(both, 'http://collector:4318/v1/traces')).toBe('http://plain:3128');
    expect(proxyForUrl({ httpProxy: 'http://plain:3128', noProxy: '' }, 'https://api.honeycomb.io')).toBe('http://plain:3128');
    expect(proxyForUrl({ httpsProxy: 'http://tls:3128', noProxy: '' }, 'http://collector:4318')).toBeUndefined();
    expect(proxyForUrl(undefined, 'https://api.honeycomb.io')).toBeUndefined();
    expect(proxyForUrl(both, 'ftp://files.example')).toBeUndefined();
    expect(proxyForUrl(both, 'not a url')).toBeUndefined();
  });

  it('is none for NO_PROXY’s hosts and their subdomains, a host:port entry for that port only, and everything with *', () => {
    const noProxy = (value: string, url: string) => proxyForUrl({ ...both, noProxy: value }, url);
    expect(noProxy('example.com', 'https://example.com/x')).toBeUndefined();
    expect(noProxy('example.com', 'https://otel.example.com/x')).toBeUndefined();
    expect(noProxy('.example.com', 'https://otel.example.com/x')).toBeUndefined();
    expect(noProxy('*.example.com', 'https://EXAMPLE.com/x')).toBeUndefined();
    expect(noProxy('example.com', 'https://notexample.com/x')).toBe('http://tls:3128');
    expect(noProxy('localhost, 10.0.0.7:4318', 'http://10.0.0.7:4318/v1/traces')).toBeUndefined();
    expect(noProxy('localhost, 10.0.0.7:4318', 'http://10.0.0.7:4317/v1/traces')).toBe('http://plain:3128');
    expect(noProxy('collector:443', 'https://collector/v1/traces')).toBeUndefined();
    expect(noProxy('*', 'https://anything.example')).toBeUndefined();
    expect(noProxy(' , ', 'https://anything.example')).toBe('http://tls:3128');
  });
});
