// The relay loads only the parts of undici it calls (src/upstream/upstream-client.ts, UNDICI_PARTS), by their
// file paths: undici 7 has no `exports` map. These are the very classes and function undici's index exports,
// so an upgrade of undici that moves or changes them fails here, not at a relay's first call upstream.
import { execFileSync } from 'node:child_process';
import { Agent, Dispatcher, EnvHttpProxyAgent } from 'undici';
import { describe, expect, it } from 'vitest';
import { loadUndiciParts } from '../../../src/upstream/upstream-client.js';

describe("undici's parts, loaded on their own", () => {
  it('are the Agent, the request API and (behind a proxy) the EnvHttpProxyAgent undici exports', async () => {
    const parts = await loadUndiciParts(true);
    expect(parts.Agent).toBe(Agent);
    expect(parts.EnvHttpProxyAgent).toBe(EnvHttpProxyAgent);
    // undici's index attaches its API to every dispatcher: the relay calls the same function on its agent
    expect(parts.request).toBe((Dispatcher.prototype as unknown as { request: unknown }).request);
  });

  it('leave the proxy agent out when no proxy is set', async () => {
    const parts = await loadUndiciParts(false);
    expect(parts.EnvHttpProxyAgent).toBeUndefined();
    expect(parts.Agent).toBe(Agent);
  });

  it("load neither undici's index nor fetch without a proxy, and the index behind one (a fresh process, the build)", () => {
    const loaded = (proxied: boolean): string[] => {
      const script = [
        `const { loadUndiciParts } = await import(${JSON.stringify(new URL('../../../dist/upstream/upstream-client.js', import.meta.url).href)});`,
        `await loadUndiciParts(${proxied});`,
        "const { createRequire } = await import('node:module');",
        "const files = Object.keys(createRequire(import.meta.url).cache).filter((f) => f.includes('/node_modules/undici/'));",
        'console.log(JSON.stringify(files.map((f) => f.slice(f.indexOf("/node_modules/undici/") + 21))));',
      ].join('\n');
      return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as string[];
    };
    const lean = loaded(false);
    expect(lean).toContain('lib/dispatcher/agent.js');
    expect(lean).toContain('lib/api/api-request.js');
    expect(lean).not.toContain('index.js');
    expect(lean.filter((f) => f.startsWith('lib/web/'))).toEqual([]);
    expect(loaded(true)).toContain('index.js');
  });
});
