// undici's HTTP parser (llhttp, WebAssembly) compiled with TurboFan before the first call upstream
// (src/upstream/parser-warmup.ts). Checked on V8 itself: a Node started with --trace-wasm-compilation-times
// prints a line for every function it compiles and with which compiler, and the relay's first call must
// compile nothing with the baseline compiler (Liftoff) — undici gets the warmed module from V8's cache.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { LLHTTP_FILES, V8_WASM_DEFAULTS, undiciUsesSimd, upstreamParserFromEnv, wasmFlagsGiven } from '../../src/upstream/parser-warmup.js';
import { startFakeUpstream } from '../helpers/fake-upstream.js';
import { spawnRelay } from '../helpers/relay-process.js';
import { tempDir } from '../helpers/relay.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WARMUP = fileURLToPath(new URL('../../dist/upstream/parser-warmup.js', import.meta.url));

// one call through undici to a local server, after the warm-up or without it; `other` then compiles the other
// llhttp build (bytes V8 has not seen): with V8's flags set back it is compiled lazily, so it adds no line
const script = (warm: boolean, other: boolean): string => `
const http = await import('node:http');
const { createRequire } = await import('node:module');
${warm ? `const warmed = await (await import(${JSON.stringify(WARMUP)})).warmUpstreamParser('simd');
if (!(warmed instanceof WebAssembly.Module)) throw new Error('nothing warmed');` : ''}
const server = http.createServer((req, res) => res.end('x'.repeat(1000)));
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const { request } = await import('undici');
const res = await request('http://127.0.0.1:' + server.address().port + '/');
if ((await res.body.text()).length !== 1000) throw new Error('short body');
server.close();
${other ? `new WebAssembly.Module(createRequire(${JSON.stringify(`${ROOT}/`)})(${JSON.stringify(LLHTTP_FILES.plain)}));` : ''}
process.exit(0);
`;

interface Compiles {
  liftoff: number;
  turbofan: number;
}

const count = (trace: string): Compiles => ({
  liftoff: trace.split('\n').filter((l) => /^Compiled function .* using Liftoff/.test(l)).length,
  turbofan: trace.split('\n').filter((l) => /^Compiled function .* using TurboFan/.test(l)).length,
});

async function compiles(warm: boolean, other = false): Promise<Compiles> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--trace-wasm-compilation-times', '--input-type=module', '-e', script(warm, other)], {
    cwd: ROOT,
    timeout: 60_000,
  });
  return count(stdout);
}

describe("undici's parser compiled ahead of the first call (parser-warmup.ts)", () => {
  it('leaves nothing for the first call to compile with Liftoff, and sets V8 back to lazy baseline compiles', async () => {
    const cold = await compiles(false);
    expect(cold.liftoff).toBeGreaterThan(0); // (what undici does on its own: the warm-up must change it)
    const warm = await compiles(true);
    expect(warm).toEqual({ liftoff: 0, turbofan: expect.any(Number) });
    expect(warm.turbofan).toBeGreaterThan(10); // (llhttp's functions, all of them)
    // a module compiled after the warm-up is compiled as V8 does by default: lazily, nothing up front
    expect(await compiles(true, true)).toEqual(warm);
  }, 120_000);

  it('is done by the relay before it listens: its first call upstream compiles nothing with Liftoff', async () => {
    const upstream = await startFakeUpstream();
    const relay = await spawnRelay(
      { RELAY_UPSTREAM_URL: upstream.url, RELAY_DATA_DIR: await tempDir(), RELAY_LOG_LEVEL: 'debug', RELAY_LOG_FORMAT: 'json' },
      [],
      undefined,
      ['--trace-wasm-compilation-times'],
    );
    try {
      // compiled, and its memory handed back, before the relay said it listens
      const lines = relay.output().split('\n');
      const compiled = lines.findIndex((l) => l.includes('"msg":"upstream parser compiled"'));
      expect(compiled).toBeGreaterThanOrEqual(0);
      // (`trimmed`: malloc_trim's answer, true when it gave pages back — whether it had any is glibc's business)
      expect(JSON.parse(lines[compiled]!)).toMatchObject({ compiled: true, trimmed: expect.any(Boolean) });
      expect(compiled).toBeLessThan(lines.findIndex((l) => l.includes('listening on http://')));
      const res = await fetch(`${relay.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test' },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] }),
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      relay.child.kill('SIGTERM');
      expect((await relay.exited).code).toBe(0);
      const seen = count(relay.output());
      expect(seen.liftoff).toBe(0);
      expect(seen.turbofan).toBeGreaterThan(10);
    } finally {
      relay.child.kill('SIGKILL');
      await upstream.close();
    }
  }, 60_000);
});

describe('the flags the warm-up sets back', () => {
  it("are this V8's own defaults (a Node whose defaults differ would otherwise be left changed)", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--v8-options'], { maxBuffer: 16 * 1024 * 1024 });
    for (const flag of V8_WASM_DEFAULTS) {
      const name = flag.slice(2);
      const entry = stdout.match(new RegExp(`^\\s+--${name} \\(.*\\)\\n\\s+type: bool\\s+default: (\\S+)`, 'm'));
      expect(entry?.[1], name).toBe(flag);
    }
  });
});

describe('which llhttp build undici compiles', () => {
  it('is the SIMD one unless the environment or an old Node on ppc64 says otherwise, as in undici', () => {
    expect(undiciUsesSimd({}, 'x64', '20.20.0')).toBe(true);
    expect(undiciUsesSimd({ UNDICI_NO_WASM_SIMD: '1' }, 'x64', '24.12.0')).toBe(false);
    expect(undiciUsesSimd({}, 'ppc64', '24.11.0')).toBe(false);
    expect(undiciUsesSimd({}, 'ppc64', '24.12.0')).toBe(true);
    expect(undiciUsesSimd({}, 'ppc64', '25.0.0')).toBe(true);
    expect(undiciUsesSimd({ UNDICI_NO_WASM_SIMD: '0' }, 'ppc64', '20.20.0')).toBe(true);
  });

  it("is read from the files undici's own loader names", async () => {
    const { readFile } = await import('node:fs/promises');
    const loader = await readFile(`${ROOT}/node_modules/undici/lib/dispatcher/client-h1.js`, 'utf8');
    for (const file of Object.values(LLHTTP_FILES)) expect(loader).toContain(`require('${file.replace('undici/lib/', '../')}')`);
  });

  it("stays out of the way of the operator's own WebAssembly flags, and of an offline relay", () => {
    expect(upstreamParserFromEnv({}, [])).toBe('simd');
    expect(upstreamParserFromEnv({ UNDICI_NO_WASM_SIMD: '1' }, [])).toBe('plain');
    expect(upstreamParserFromEnv({ NODE_OPTIONS: '--no-liftoff' }, [])).toBeUndefined();
    expect(upstreamParserFromEnv({}, ['--wasm-lazy-compilation'])).toBeUndefined();
    expect(loadConfig({ env: { UNDICI_NO_WASM_SIMD: '1' } }).upstreamParser).toBe('plain');
    expect(loadConfig({ env: { RELAY_OFFLINE: 'true' } }).upstreamParser).toBeUndefined();
    expect(wasmFlagsGiven(['--no-liftoff'])).toBe(true);
    expect(wasmFlagsGiven(['--max-old-space-size=100 --wasm-lazy-compilation'])).toBe(true);
    expect(wasmFlagsGiven(['--no-wasm-tier-up'])).toBe(true);
    expect(wasmFlagsGiven(['--max-semi-space-size=8', ''])).toBe(false);
  });
});
