// A data dir belongs to one relay at a time (DESIGN §8): a second relay on it, in another process or in
// this one, is refused naming the holder; a holder killed with SIGKILL leaves no lock behind; `cache
// import` into a held dir is sent to the relay's HTTP route, `cache export` reads it.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DataDirInUseError } from '../../src/storage/data-dir-lock.js';
import { VERSION } from '../../src/version.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { chat } from '../helpers/proxy-call.js';
import { type RelayProcess, runCli, spawnRelay } from '../helpers/relay-process.js';
import { type TestRelay, startRelay, tempDir } from '../helpers/relay.js';

let up: FakeUpstream;
const children: ChildProcess[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  up = await startFakeUpstream();
});
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
afterAll(async () => {
  await up.close();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function dataDir(): Promise<string> {
  const d = await tempDir();
  dirs.push(d);
  return join(d, 'data'); // not there yet: the relay makes it
}

async function relayProcess(dir: string): Promise<RelayProcess> {
  const p = await spawnRelay({ RELAY_DATA_DIR: dir, RELAY_UPSTREAM_URL: up.url });
  children.push(p.child);
  return p;
}

/** The built command, to its exit. */
const cli = (args: string[], env: Record<string, string> = {}, stdin = '') =>
  runCli(args, { env: { PORT: '0', ...env }, stdin, onSpawn: (child) => children.push(child) });

function holderOf(dir: string) {
  return JSON.parse(readFileSync(join(dir, 'relay.lock.json'), 'utf8')) as { pid: number; startedAt: string };
}

describe('one relay per data dir', () => {
  it('a second relay process on a held data dir exits 1, naming the holder; one in this process is refused too', async () => {
    const dir = await dataDir();
    const first = await relayProcess(dir);
    const holder = holderOf(dir);
    expect(holder.pid).toBe(first.child.pid);

    const second = await cli([], { RELAY_DATA_DIR: dir, RELAY_UPSTREAM_URL: up.url });
    expect(second).toEqual({
      code: 1,
      stdout: '',
      stderr:
        `llm-relay: could not start: the data dir ${dir} is in use by a running relay (pid ${first.child.pid} on ${hostname()}, ` +
        `llm-relay ${VERSION}, started ${holder.startedAt}, listening on ${first.url}); ` +
        'stop it first, or give this one its own data dir (RELAY_DATA_DIR, --data-dir)\n',
    });

    const inProcess = await startRelay({ dataDir: dir, upstreamUrl: up.url }).catch((e: unknown) => e);
    expect(inProcess).toBeInstanceOf(DataDirInUseError);
    expect((inProcess as DataDirInUseError).holder).toMatchObject({ role: 'relay', pid: first.child.pid, url: first.url });
    // The first one still serves.
    expect((await chat(first.url, 'still here')).status).toBe(200);
    first.child.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });
  });

  it('a second relay in the same process is refused, and the first keeps the dir (another process is refused after it)', async () => {
    const dir = await dataDir();
    const first: TestRelay = await startRelay({ dataDir: dir, cacheUrl: 'sqlite', upstreamUrl: up.url });
    try {
      const err = await startRelay({ dataDir: dir, cacheUrl: 'sqlite', upstreamUrl: up.url }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DataDirInUseError);
      const holder = holderOf(dir);
      expect((err as Error).message).toBe(
        `the data dir ${dir} is in use by a running relay (pid ${process.pid} on ${hostname()}, llm-relay ${VERSION}, ` +
          `started ${holder.startedAt}, listening on ${first.url}); stop it first, or give this one its own data dir (RELAY_DATA_DIR, --data-dir)`,
      );
      expect((await cli([], { RELAY_DATA_DIR: dir })).code).toBe(1);
      expect((await chat(first.url, 'first one')).status).toBe(200);
    } finally {
      await first.close();
    }
    // Closed: the dir is free again.
    const next = await startRelay({ dataDir: dir, cacheUrl: 'sqlite', upstreamUrl: up.url });
    await next.close();
  });

  it('a relay that fails to start (its report store does not answer) gives the data dir back', async () => {
    const dir = await dataDir();
    const failed = await startRelay({ dataDir: dir, upstreamUrl: up.url, reportsUrl: 'postgres://postgres@127.0.0.1:1/test' }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(Error);
    expect(failed).not.toBeInstanceOf(DataDirInUseError);
    const next = await startRelay({ dataDir: dir, upstreamUrl: up.url });
    await next.close();
  });

  it('a data dir that cannot be made stops the start at once with exit 1, naming it (under /proc: no endless mkdir)', async () => {
    const file = join(await tempDir(), 'a-file');
    dirs.push(dirname(file));
    await writeFile(file, 'x');
    for (const [dir, problem] of [
      ['/proc/llm-relay-data', "ENOENT: no such file or directory, mkdir '/proc/llm-relay-data'"],
      [join(file, 'data'), `ENOTDIR: not a directory, mkdir '${join(file, 'data')}'`],
    ] as const) {
      const started = Date.now();
      const run = await cli([], { RELAY_DATA_DIR: dir, RELAY_UPSTREAM_URL: up.url });
      expect(run).toEqual({ code: 1, stdout: '', stderr: `llm-relay: could not start: ${problem}\n` });
      expect(Date.now() - started).toBeLessThan(4000);
    }
  });

  it('after SIGKILL of the holder, a new relay starts on the dir at once (nothing stale is left)', async () => {
    const dir = await dataDir();
    const first = await relayProcess(dir);
    expect((await chat(first.url, 'recorded')).cache).toBe('MISS');
    // Committed to the file (the relay commits cache writes within 50 ms) before the kill.
    expect((await cli(['cache', 'export', '--data-dir', dir])).stderr).toBe('exported 1 entries\n');
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');

    const second = await relayProcess(dir);
    expect(holderOf(dir).pid).toBe(second.child.pid);
    expect((await chat(second.url, 'recorded')).cache).toBe('HIT');
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
  });
});

describe('cache export | import on a held data dir', () => {
  it('import is refused, pointing at the running relay\'s HTTP import; export reads the dir', async () => {
    const dir = await dataDir();
    const relay = await relayProcess(dir);
    await chat(relay.url, 'to export');
    const exported = await cli(['cache', 'export', '--data-dir', dir]);
    expect(exported).toMatchObject({ code: 0, stderr: 'exported 1 entries\n' });
    const file = join(dir, '..', 'entries.ndjson');
    await writeFile(file, exported.stdout);

    const refused = await cli(['cache', 'import', file, '--data-dir', dir]);
    const holder = holderOf(dir);
    expect(refused).toEqual({
      code: 1,
      stdout: '',
      stderr:
        `llm-relay: cache import failed: the data dir ${dir} is in use by a running relay (pid ${relay.child.pid} on ${hostname()}, ` +
        `llm-relay ${VERSION}, started ${holder.startedAt}, listening on ${relay.url}); import through it instead (POST /api/cache/v1/import): ` +
        `curl -s ${relay.url}/api/cache/v1/import -H 'content-type: application/x-ndjson' --data-binary @${file}\n`,
    });
    relay.child.kill('SIGTERM');
    expect(await relay.exited).toEqual({ code: 0, signal: null });

    // Stopped: the import goes in.
    expect(await cli(['cache', 'import', file, '--data-dir', dir])).toEqual({ code: 0, stdout: '', stderr: 'imported 1 entries, skipped 0\n' });
  });
});
