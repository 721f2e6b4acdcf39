// Record in one place, replay in CI: calls recorded through relay A are exported as NDJSON (with the
// built command, and over HTTP), imported into a fresh store, and replayed by an offline relay without a
// single upstream request.
import { execFile, spawn } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import type { CacheStore } from '../../src/storage/cache-store.js';
import { createMemoryCacheStore } from '../../src/storage/memory-cache-store.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type ProxyResult, chat } from '../helpers/proxy-call.js';
import { type TestRelay, post, startRelay, tempDir } from '../helpers/relay.js';
import { CLI } from '../helpers/relay-process.js';

const run = promisify(execFile);
const KEY = /^[A-Za-z0-9._-]{1,128}:[0-9a-f]{64}$/;

interface Call {
  content: string;
  opts: { stream?: boolean; headers?: Record<string, string> };
}

const CALLS: Call[] = [
  { content: 'What is the capital of France?', opts: {} },
  { content: 'Stream me a haiku about caches', opts: { stream: true } },
  { content: 'And one in the ci namespace', opts: { headers: { 'x-relay-cache-namespace': 'ci' } } },
  { content: 'Streamed, in the ci namespace', opts: { stream: true, headers: { 'x-relay-cache-namespace': 'ci' } } },
];

let up: FakeUpstream;
const dirs: string[] = [];

beforeAll(async () => {
  up = await startFakeUpstream();
});

afterAll(async () => {
  await up.close();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

async function dir(): Promise<string> {
  const d = await tempDir('llm-relay-transfer-');
  dirs.push(d);
  return d;
}

/**
 * Makes every call through the relay (each a MISS that reaches the upstream), then makes them again: each is
 * now a HIT with the body of the MISS. Returns those hits, what a replay elsewhere must equal.
 */
async function record(relay: TestRelay): Promise<ProxyResult[]> {
  const before = up.calls.length;
  const misses: ProxyResult[] = [];
  for (const call of CALLS) {
    const res = await chat(relay.url, call.content, call.opts);
    expect(res).toMatchObject({ status: 200, cache: 'MISS' });
    misses.push(res);
  }
  expect(up.calls.length - before).toBe(CALLS.length);
  const hits: ProxyResult[] = [];
  for (const [i, call] of CALLS.entries()) {
    const res = await chat(relay.url, call.content, call.opts);
    expect(res).toMatchObject({ status: 200, cache: 'HIT', text: misses[i]!.text });
    hits.push(res);
  }
  expect(up.calls.length - before).toBe(CALLS.length);
  return hits;
}

/** The same calls through an offline relay: every one a HIT with the same body, none reaching the upstream. */
async function replayOffline(relay: TestRelay, recorded: ProxyResult[]): Promise<void> {
  const before = up.calls.length;
  for (const [i, call] of CALLS.entries()) {
    const res = await chat(relay.url, call.content, call.opts);
    expect(res.status).toBe(200);
    expect(res.cache).toBe('HIT');
    expect(res.text).toBe(recorded[i]!.text);
    expect(res.headers.get('content-type')).toBe(recorded[i]!.headers.get('content-type'));
    expect(res.headers.get('x-relay-cache-key')).toBe(recorded[i]!.headers.get('x-relay-cache-key'));
  }
  const fresh = await chat(relay.url, 'A question nobody recorded');
  expect(fresh.status).toBe(504);
  expect(JSON.parse(fresh.text)).toMatchObject({ statusCode: 504, code: 'RELAY_ERR_CACHE_ONLY_MISS' });
  expect(up.calls.length - before).toBe(0);
}

function expectEntries(ndjson: string): void {
  const lines = ndjson.split('\n');
  expect(lines.pop()).toBe(''); // every line ends with "\n"
  expect(lines).toHaveLength(CALLS.length);
  for (const line of lines) {
    const entry = JSON.parse(line);
    expect(Object.keys(entry).sort()).toEqual(['createdAt', 'expiresAt', 'key', 'value']);
    expect(entry.key).toMatch(KEY);
    expect(entry.expiresAt).toBeGreaterThan(entry.createdAt);
    expect(entry.value).toMatchObject({ v: 1, status: 200 });
  }
  expect(lines.filter((l) => JSON.parse(l).value.sse !== undefined)).toHaveLength(2);
}

function cli(args: string[], stdin?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '' } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  child.stdin.end(stdin ?? '');
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('llm-relay cache export | import', () => {
  it('moves recorded calls to a fresh data dir, where an offline relay replays them all', async () => {
    const dirA = await dir();
    const a = await startRelay({ cacheUrl: 'sqlite', upstreamUrl: up.url, dataDir: dirA });
    let recorded: ProxyResult[];
    let exported: { stdout: string; stderr: string };
    try {
      recorded = await record(a);
      // Exported while A runs (SQLite in WAL mode lets the command read alongside it).
      exported = await run(process.execPath, [CLI, 'cache', 'export', '--data-dir', dirA, '--cache-url', 'sqlite'], {
        env: { PATH: process.env.PATH ?? '' },
      });
    } finally {
      await a.close();
    }
    expectEntries(exported.stdout);
    expect(exported.stderr).toBe(`exported ${CALLS.length} entries\n`);

    const file = join(await dir(), 'entries.ndjson');
    await writeFile(file, exported.stdout);
    const dirB = await dir();
    const imported = await run(process.execPath, [CLI, 'cache', 'import', file, '--data-dir', dirB, '--cache-url', 'sqlite'], {
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(imported).toEqual({ stdout: '', stderr: `imported ${CALLS.length} entries, skipped 0\n` });

    const b = await startRelay({ cacheUrl: 'sqlite', upstreamUrl: up.url, dataDir: dirB, offline: true });
    try {
      await replayOffline(b, recorded);
    } finally {
      await b.close();
    }
  });

  it('imports from stdin with -, and the export of the result is the same set of entries', async () => {
    const dirA = await dir();
    const a = await startRelay({ cacheUrl: 'sqlite', upstreamUrl: up.url, dataDir: dirA });
    try {
      await record(a);
    } finally {
      await a.close();
    }
    const first = await cli(['cache', 'export', '--data-dir', dirA]);
    expect(first.code).toBe(0);
    const dirB = await dir();
    const imported = await cli(['cache', 'import', '-', '--data-dir', dirB], first.stdout);
    expect(imported).toEqual({ code: 0, stdout: '', stderr: `imported ${CALLS.length} entries, skipped 0\n` });
    const second = await cli(['cache', 'export', `--data-dir=${dirB}`]);
    expect(second.stdout.split('\n').sort()).toEqual(first.stdout.split('\n').sort());
  });

  it('refuses a file with a bad line, naming it, and changes nothing (exit 1)', async () => {
    const dirB = await dir();
    const good = JSON.stringify({
      key: `ci:${'a'.repeat(64)}`,
      createdAt: Date.now(),
      expiresAt: Date.now() + 60_000,
      value: { v: 1, status: 200, headers: { 'content-type': 'application/json' }, body: { ok: true } },
    });
    const expired = good.replace(/"expiresAt":\d+/, `"expiresAt":${Date.now() - 1}`).replace(/"createdAt":\d+/, '"createdAt":0');
    const bad = await cli(['cache', 'import', '-', '--data-dir', dirB], `${good}\n${expired}\n{"key":"nope"}\n`);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe('llm-relay: cache import failed: line 3: key must be <namespace>:<sha256 hex> (^[A-Za-z0-9._-]{1,128}:[0-9a-f]{64}$)\n');
    expect((await cli(['cache', 'export', '--data-dir', dirB])).stdout).toBe('');

    const ok = await cli(['cache', 'import', '-', '--data-dir', dirB], `${good}\n${expired}\n`);
    expect(ok).toMatchObject({ code: 0, stderr: 'imported 1 entries, skipped 1\n' });
    expect((await cli(['cache', 'export', '--data-dir', dirB])).stdout).toBe(`${good}\n`);
  });

  it('exits 2 on bad arguments or configuration, 1 when the file cannot be read', async () => {
    const d = await dir();
    expect(await cli(['cache', 'import'])).toMatchObject({ code: 2, stderr: expect.stringContaining('cache import needs the NDJSON file') });
    expect(await cli(['cache', 'import', '--data-dir', d])).toMatchObject({ code: 2 });
    expect(await cli(['cache', 'purge'])).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown cache subcommand "purge"') });
    expect(await cli(['cache', 'export', '--cache-url', 'mysql://x'])).toMatchObject({ code: 2, stderr: expect.stringContaining('Invalid configuration') });
    expect(await cli(['cache', 'export', '--data-dir', d, 'extra'])).toMatchObject({ code: 2, stderr: expect.stringContaining('unexpected argument "extra"') });
    const missing = await cli(['cache', 'import', join(d, 'nope.ndjson'), '--data-dir', d]);
    expect(missing).toMatchObject({ code: 1, stderr: expect.stringContaining('ENOENT') });
    const help = await cli(['--help']);
    expect(help.stdout).toContain('llm-relay cache export [options]');
    expect(help.stdout).toContain('llm-relay cache import FILE|- [options]');
  });
});

describe('GET /api/cache/v1/export | POST /api/cache/v1/import', () => {
  it('moves recorded calls from relay A to a fresh offline relay C, which replays them all', async () => {
    const a = await startRelay({ cacheUrl: 'sqlite', upstreamUrl: up.url });
    let recorded: ProxyResult[];
    let ndjson: string;
    try {
      recorded = await record(a);
      const res = await fetch(`${a.url}/api/cache/v1/export`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/x-ndjson');
      ndjson = await res.text();
    } finally {
      await a.close();
    }
    expectEntries(ndjson);

    const c = await startRelay({ cacheUrl: 'memory', upstreamUrl: up.url, offline: true });
    try {
      const res = await post(`${c.url}/api/cache/v1/import`, ndjson, { 'content-type': 'application/x-ndjson' });
      expect(res).toMatchObject({ status: 200, body: { imported: CALLS.length, skipped: 0 } });
      await replayOffline(c, recorded);
      // And back out: C's export holds the same entries.
      const again = await (await fetch(`${c.url}/api/cache/v1/export`)).text();
      expect(again.split('\n').sort()).toEqual(ndjson.split('\n').sort());
    } finally {
      await c.close();
    }
  });

  it('answers an empty store with an empty body, and an empty import with zero counts', async () => {
    const r = await startRelay();
    try {
      const res = await fetch(`${r.url}/api/cache/v1/export`);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('');
      expect(await post(`${r.url}/api/cache/v1/import`, '', { 'content-type': 'application/x-ndjson' })).toMatchObject({
        status: 200,
        body: { imported: 0, skipped: 0 },
      });
    } finally {
      await r.close();
    }
  });

  it('refuses a bad line (400 naming it), another content type (415) and a body over the limit (413)', async () => {
    const r = await startRelay({ maxBodyBytes: 1024 });
    try {
      const good = JSON.stringify({
        key: `ci:${'b'.repeat(64)}`,
        createdAt: Date.now(),
        expiresAt: Date.now() + 60_000,
        value: { v: 1, status: 200, headers: {}, body: null },
      });
      const bad = await post(`${r.url}/api/cache/v1/import`, `${good}\r\n{"key":"ci:${'b'.repeat(64)}","createdAt":"now"}\r\n`, {
        'content-type': 'application/x-ndjson; charset=utf-8',
      });
      expect(bad).toMatchObject({
        status: 400,
        body: {
          statusCode: 400,
          code: 'RELAY_ERR_VALIDATION',
          error: 'Bad Request',
          message: 'line 2: createdAt must be a non-negative whole number (epoch ms)',
        },
      });
      expect(await (await fetch(`${r.url}/api/cache/v1/export`)).text()).toBe('');

      const json = await post(`${r.url}/api/cache/v1/import`, good, { 'content-type': 'application/json' });
      expect(json).toMatchObject({
        status: 415,
        body: {
          statusCode: 415,
          code: 'RELAY_ERR_UNSUPPORTED_MEDIA_TYPE',
          message: 'Unsupported content type application/json: this endpoint takes application/x-ndjson',
        },
      });

      const big = await post(`${r.url}/api/cache/v1/import`, `${good}\n`.repeat(20), { 'content-type': 'application/x-ndjson' });
      expect(big).toMatchObject({ status: 413, body: { statusCode: 413, code: 'RELAY_ERR_BODY_TOO_LARGE' } });

      const ok = await post(`${r.url}/api/cache/v1/import`, `${good}\n`, { 'content-type': 'application/x-ndjson' });
      expect(ok).toMatchObject({ status: 200, body: { imported: 1, skipped: 0 } });
      expect(await (await fetch(`${r.url}/api/cache/v1/export`)).text()).toBe(`${good}\n`);
    } finally {
      await r.close();
    }
  });

  it('answers 503 when the cache store fails', async () => {
    const memory = createMemoryCacheStore({ maxBytes: 1024 * 1024 });
    const down = new StoreUnavailableError('cache', 'connection refused');
    const broken: CacheStore = {
      ...memory,
      set: async () => {
        throw down;
      },
      async *entries() {
        throw down;
      },
    };
    const r = await startRelay({}, { cacheStore: broken });
    try {
      const unavailable = { statusCode: 503, code: 'RELAY_ERR_CACHE_UNAVAILABLE', message: 'The cache store is unavailable: connection refused' };
      const res = await fetch(`${r.url}/api/cache/v1/export`);
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject(unavailable);
      const line = JSON.stringify({
        key: `ci:${'c'.repeat(64)}`,
        createdAt: Date.now(),
        expiresAt: Date.now() + 60_000,
        value: { v: 1, status: 200, headers: {}, body: null },
      });
      expect(await post(`${r.url}/api/cache/v1/import`, line, { 'content-type': 'application/x-ndjson' })).toMatchObject({
        status: 503,
        body: unavailable,
      });
    } finally {
      await r.close();
    }
  });

  it('needs a relay token when RELAY_API_TOKENS is set', async () => {
    const r = await startRelay({ apiTokens: ['t0ken'] });
    try {
      expect((await fetch(`${r.url}/api/cache/v1/export`)).status).toBe(401);
      const ok = await fetch(`${r.url}/api/cache/v1/export`, { headers: { authorization: 'Bearer t0ken' } });
      expect(ok.status).toBe(200);
      const imp = await post(`${r.url}/api/cache/v1/import`, '', { 'content-type': 'application/x-ndjson' });
      expect(imp.status).toBe(401);
    } finally {
      await r.close();
    }
  });
});
