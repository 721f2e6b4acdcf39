// The proxy for calls upstream, from HTTPS_PROXY, HTTP_PROXY and NO_PROXY (src/upstream/upstream-proxy.ts).
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { proxyFromEnv } from '../../../src/upstream/upstream-proxy.js';

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
