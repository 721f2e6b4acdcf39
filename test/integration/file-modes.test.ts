// What the relay keeps in its data dir (prompts, answers, reports) is readable by its owner only: the dir
// is created 0700 and every file the relay or `cache import` makes there is 0600, whatever the umask.
import { readdirSync, statSync } from 'node:fs';
import { chmod, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { chat } from '../helpers/proxy-call.js';
import { runCli } from '../helpers/relay-process.js';
import { startRelay, tempDir } from '../helpers/relay.js';

let up: FakeUpstream;
const dirs: string[] = [];

beforeAll(async () => {
  up = await startFakeUpstream();
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

const cli = (args: string[], stdin: string) => runCli(args, { stdin });

describe('file modes', () => {
  it('the data dir is created 0700 and every file the relay makes in it is 0600; looser files it finds are tightened', async () => {
    const dir = await dataDir();
    const relay = await startRelay({ dataDir: dir, cacheUrl: 'sqlite', reportsUrl: 'sqlite', upstreamUrl: up.url });
    try {
      expect((await chat(relay.url, 'a prompt')).status).toBe(200);
      await relay.reports.flush();
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      const modes = Object.fromEntries(readdirSync(dir).sort().map((f) => [f, (statSync(join(dir, f)).mode & 0o777).toString(8)]));
      expect(modes).toEqual({
        'cache.sqlite': '600',
        'cache.sqlite-shm': '600',
        'cache.sqlite-wal': '600',
        'outbox.ndjson': '600',
        'relay.lock': '600',
        'relay.lock.json': '600',
        'reports.journal': '600',
        'reports.sqlite': '600',
        'reports.sqlite-shm': '600',
        'reports.sqlite-wal': '600',
      });
    } finally {
      await relay.close();
    }

    // Left readable by others (an older relay): tightened at the next start.
    await chmod(join(dir, 'cache.sqlite'), 0o644);
    await chmod(join(dir, 'outbox.ndjson'), 0o644);
    await chmod(join(dir, 'reports.journal'), 0o644);
    const again = await startRelay({ dataDir: dir, cacheUrl: 'sqlite', reportsUrl: 'sqlite', upstreamUrl: up.url });
    await again.close();
    expect((statSync(join(dir, 'cache.sqlite')).mode & 0o777).toString(8)).toBe('600');
    expect((statSync(join(dir, 'outbox.ndjson')).mode & 0o777).toString(8)).toBe('600');
    expect((statSync(join(dir, 'reports.journal')).mode & 0o777).toString(8)).toBe('600');
  });

  it('cache import into a new data dir makes it 0700 with 0600 files', async () => {
    const dir = await dataDir();
    const entry = JSON.stringify({
      key: `ci:${'a'.repeat(64)}`,
      createdAt: Date.now(),
      expiresAt: Date.now() + 60_000,
      value: { v: 1, status: 200, headers: { 'content-type': 'application/json' }, body: { ok: true } },
    });
    expect(await cli(['cache', 'import', '-', '--data-dir', dir], `${entry}\n`)).toEqual({
      code: 0,
      stdout: '',
      stderr: 'imported 1 entries, skipped 0\n',
    });
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const f of readdirSync(dir)) expect((statSync(join(dir, f)).mode & 0o777).toString(8), f).toBe('600');
    expect(readdirSync(dir).sort()).toEqual(['cache.sqlite', 'relay.lock']);
  });
});
