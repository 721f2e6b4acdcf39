// Starts the real app on port 0 with a temporary data dir; every test gets its own relay.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { type AppOverrides, type Relay, buildApp } from '../../src/app.js';
import { type RelayConfig, loadConfig } from '../../src/config.js';

export interface TestRelay extends Relay {
  url: string;
  dataDir: string;
  logs: string[];
  close(): Promise<void>;
}

/** the directories tempDir made while this test file ran */
const made: string[] = [];

/** A new directory under the system's temp dir, removed once the test file is done (removeTempDirs). */
export async function tempDir(prefix = 'llm-relay-test-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** Removes every directory tempDir made: run after each test file (test/setup/temp-dirs.ts). */
export async function removeTempDirs(): Promise<void> {
  for (const dir of made.splice(0)) await rm(dir, { recursive: true, force: true, maxRetries: 3 });
}

/** `env` is read as `npm start` reads the environment (e.g. the OTEL_* variables, see traced-relay.ts). */
export async function startRelay(
  settings: Partial<RelayConfig> = {},
  overrides: AppOverrides = {},
  env: Record<string, string> = {},
): Promise<TestRelay> {
  const dataDir = settings.dataDir ?? (await tempDir());
  const config = loadConfig({
    env,
    overrides: { port: 0, logLevel: 'info', cacheUrl: 'memory', reportFlushMs: 1, ...settings, dataDir },
  });
  const logs: string[] = [];
  const logStream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString());
      cb();
    },
  });
  const relay = await buildApp(config, { logStream, ...overrides });
  const url = await relay.listen(0, '127.0.0.1');
  return {
    ...relay,
    url,
    dataDir,
    logs,
    async close() {
      await relay.close();
      if (!settings.dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** POST JSON (or raw text) and return status + parsed body. */
export async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

export async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
