// The built command as users run it.
import { execFile, fork, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { SETTINGS, flagName, helpText } from '../../src/config.js';
import { semiSpaceMb } from '../../src/memory-trim.js';
import { NODE_MAJOR } from '../../src/node-major.js';
import { VERSION } from '../../src/version.js';
import { CLI, runCli } from '../helpers/relay-process.js';

const run = promisify(execFile);

/** The built command, to its exit. */
const cli = (args: string[], stdin = '') => runCli(args, { stdin });

function entry(n: number): string {
  return JSON.stringify({
    key: `ci:${String(n).repeat(64)}`,
    createdAt: 1_700_000_000_000,
    expiresAt: 4_100_000_000_000,
    value: { v: 1, status: 200, headers: { 'content-type': 'application/json' }, body: { n } },
  });
}

describe('llm-relay command', () => {
  it('--help lists every option', async () => {
    const { stdout } = await run(process.execPath, [CLI, '--help']);
    for (const s of SETTINGS) expect(stdout).toContain(flagName(s));
    expect(stdout).toContain('--config FILE');
    // and what is read from the environment only
    expect(stdout).toContain('HTTPS_PROXY, HTTP_PROXY, NO_PROXY');
    expect(stdout).toContain('OTEL_EXPORTER_OTLP_ENDPOINT');
  });

  it('--help anywhere prints the help, and nothing else happens', async () => {
    for (const args of [['--help'], ['-h'], ['cache', 'import', '--help'], ['--port', '1', '--help'], ['cache', '--help', 'export'], ['nonsense', '--help']]) {
      expect(await cli(args), args.join(' ')).toEqual({ code: 0, stdout: helpText(VERSION), stderr: '' });
    }
    expect(await cli(['cache', 'export', '--version'])).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
  });

  it('options may come before, between or after the command and its arguments', async () => {
    const { tempDir } = await import('../helpers/relay.js');
    const dir = await tempDir();
    try {
      const file = join(dir, 'entries.ndjson');
      await writeFile(file, `${entry(1)}\n${entry(2)}\n`);
      const a = join(dir, 'a');
      const b = join(dir, 'b');
      const imported = { code: 0, stdout: '', stderr: 'imported 2 entries, skipped 0\n' };
      expect(await cli(['--data-dir', a, 'cache', 'import', file])).toEqual(imported);
      expect(await cli(['cache', 'import', file, '--data-dir', b])).toEqual(imported);
      const exported = { code: 0, stdout: `${entry(1)}\n${entry(2)}\n`, stderr: 'exported 2 entries\n' };
      expect(await cli(['cache', '--data-dir', a, 'export'])).toEqual(exported);
      expect(await cli([`--data-dir=${b}`, 'cache', 'export'])).toEqual(exported);
      // --offline stands alone unless a true/false word follows it: `cache` is the command, not its value.
      expect(await cli(['--offline', 'cache', 'export', '--cache-url', 'sqlite', '--data-dir', b])).toEqual(exported);
      expect(await cli(['--offline', 'false', 'cache', 'import', '-', '--data-dir', b], `${entry(3)}\n`)).toEqual({
        code: 0,
        stdout: '',
        stderr: 'imported 1 entries, skipped 0\n',
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('a word that is no command is refused (exit 2), wherever it stands', async () => {
    expect(await cli(['serve'])).toEqual({ code: 2, stdout: '', stderr: 'llm-relay: unexpected argument "serve" (see --help)\n' });
    expect(await cli(['--port', '0', 'serve'])).toEqual({ code: 2, stdout: '', stderr: 'llm-relay: unexpected argument "serve" (see --help)\n' });
    expect(await cli(['cache', 'export', 'extra'])).toEqual({ code: 2, stdout: '', stderr: 'llm-relay: unexpected argument "extra" (see --help)\n' });
    expect(await cli(['cache', 'import', 'a.ndjson', 'b.ndjson'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'llm-relay: unexpected argument "b.ndjson" (see --help)\n',
    });
  });

  it('a bad configuration stops start-up with one message listing every problem', async () => {
    const err = await run(process.execPath, [CLI, '--port', 'x'], {
      env: { PATH: process.env.PATH ?? '', RELAY_CACHE_SCOPE: 'nobody', RELAY_CACHE_TTL: '-1' },
    }).catch((e: { code: number; stderr: string; stdout: string }) => e);
    expect((err as { code: number }).code).toBe(2);
    const stderr = (err as { stderr: string }).stderr;
    expect(stderr).toContain('llm-relay: Invalid configuration:');
    expect(stderr).toContain('--port: "x" is not a whole number');
    expect(stderr).toContain('RELAY_CACHE_SCOPE');
    expect(stderr).toContain('RELAY_CACHE_TTL');
  });

  it('an upstream URL ending in /v1 (the OPENAI_BASE_URL habit) stops start-up, naming the setting and what to write', async () => {
    const refused = {
      code: 2,
      stdout: '',
      stderr:
        'llm-relay: Invalid configuration:\n' +
        '  - upstreamUrl (RELAY_UPSTREAM_URL): must be the origin without /v1: use "http://127.0.0.1:9"; a request for /v1/chat/completions already carries /v1\n',
    };
    expect(await cli(['--port', '0', '--upstream-url', 'http://127.0.0.1:9/v1'])).toEqual(refused);
    expect(await cli(['--upstream-url', 'http://127.0.0.1:9/v1/'])).toEqual(refused);
  });

  it('a port in use stops start-up (exit 1) with what to do about it', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    const dataDir = await mkdtemp(join(tmpdir(), 'relay-cli-port-'));
    try {
      expect(await cli(['--host', '127.0.0.1', '--port', String(port), '--data-dir', dataDir])).toEqual({
        code: 1,
        stdout: '',
        stderr: `llm-relay: could not start: 127.0.0.1:${port} is in use by another program (another relay?): stop it, or give this relay another port (PORT, --port; 0 picks a free one)\n`,
      });
    } finally {
      taken.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('start-up warnings', () => {
  it('says so when it listens beyond loopback without RELAY_API_TOKENS', async () => {
    const { spawnRelay } = await import('../helpers/relay-process.js');
    const { tempDir } = await import('../helpers/relay.js');
    const open = await spawnRelay({ HOST: '0.0.0.0', RELAY_DATA_DIR: await tempDir(), RELAY_CACHE_URL: 'memory' });
    await new Promise((r) => setTimeout(r, 200));
    open.child.kill('SIGTERM');
    await open.exited;
    expect(open.output()).toContain('listening on a non-loopback address without RELAY_API_TOKENS');

    const guarded = await spawnRelay({ HOST: '0.0.0.0', RELAY_API_TOKENS: 't', RELAY_DATA_DIR: await tempDir(), RELAY_CACHE_URL: 'memory' });
    await new Promise((r) => setTimeout(r, 200));
    guarded.child.kill('SIGTERM');
    await guarded.exited;
    expect(guarded.output()).not.toContain('without RELAY_API_TOKENS');
  });
});

// (every other test of the command runs through the restart too: stdin for `cache import -`, exit statuses)
describe('few malloc arenas and a capped young generation (memory-trim.ts, restartForMemory)', () => {
  /** a /proc file of NUL-terminated strings, as a list */
  const procList = async (pid: number, file: 'environ' | 'cmdline') => (await readFile(`/proc/${pid}/${file}`, 'utf8')).split('\0').slice(0, -1);

  it('the relay starts again as the same process with MALLOC_ARENA_MAX=3 and the semi-space cap, its output and exit status intact', async () => {
    const { spawnRelay } = await import('../helpers/relay-process.js');
    const { tempDir } = await import('../helpers/relay.js');
    const relay = await spawnRelay({ RELAY_DATA_DIR: await tempDir(), RELAY_CACHE_URL: 'memory' });
    // the pid the parent spawned now runs with the variable: it was restarted in place, not forked
    expect(await procList(relay.child.pid!, 'environ')).toContain('MALLOC_ARENA_MAX=3');
    // with the command line it was given (ps shows the same), V8's semi-spaces capped
    const cap = [`--max-semi-space-size=${semiSpaceMb(NODE_MAJOR)}`];
    expect(await procList(relay.child.pid!, 'cmdline')).toEqual([process.execPath, ...cap, CLI]);
    const res = await fetch(`${relay.url}/healthz`);
    expect(await res.json()).toEqual({ status: 'ok' });
    relay.child.kill('SIGTERM');
    expect(await relay.exited).toEqual({ code: 0, signal: null });
    // the banner once: the first image printed nothing
    expect(relay.output().match(/listening on/g)).toHaveLength(1);
  });

  it("an operator's MALLOC_ARENA_MAX stands, and the relay is not restarted", async () => {
    const { spawnRelay } = await import('../helpers/relay-process.js');
    const { tempDir } = await import('../helpers/relay.js');
    const relay = await spawnRelay({ RELAY_DATA_DIR: await tempDir(), RELAY_CACHE_URL: 'memory', MALLOC_ARENA_MAX: '16' });
    const env = await procList(relay.child.pid!, 'environ');
    relay.child.kill('SIGTERM');
    await relay.exited;
    expect(env).toContain('MALLOC_ARENA_MAX=16');
    expect(env).not.toContain('MALLOC_ARENA_MAX=3');
  });

  it('a relay forked with an IPC channel (a process manager, cluster) is not restarted, and its channel stays up', async () => {
    const { tempDir } = await import('../helpers/relay.js');
    const child = fork(CLI, [], {
      env: { PATH: process.env.PATH ?? '', PORT: '0', RELAY_LOG_LEVEL: 'info', RELAY_DATA_DIR: await tempDir(), RELAY_CACHE_URL: 'memory' },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    let disconnected = false;
    child.on('disconnect', () => (disconnected = true));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const portOf = () => /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1];
      await expect.poll(portOf, { timeout: 20_000 }).toBeDefined();
      const port = portOf();
      expect(await (await fetch(`http://127.0.0.1:${port}/healthz`)).json()).toEqual({ status: 'ok' });
      expect(await procList(child.pid!, 'environ')).not.toContain('MALLOC_ARENA_MAX=3');
      expect(disconnected).toBe(false);
      expect(child.connected).toBe(true);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL'); // (a failed assertion must not leave the relay running)
    }
  });
});
