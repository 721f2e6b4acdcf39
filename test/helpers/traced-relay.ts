// A relay built in this process with tracing configured the only way it can be: OTEL_* variables, read by
// loadConfig exactly as `npm start` reads them from the environment.
import { rm } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { buildApp } from '../../src/app.js';
import { type RelayConfig, loadConfig } from '../../src/config.js';
import { type TestRelay, tempDir } from './relay.js';

export async function startTracedRelay(otel: Record<string, string>, settings: Partial<RelayConfig> = {}): Promise<TestRelay> {
  const dataDir = await tempDir();
  const config = loadConfig({
    env: otel,
    overrides: { port: 0, logLevel: 'info', cacheUrl: 'memory', reportFlushMs: 1, ...settings, dataDir },
  });
  const logs: string[] = [];
  const logStream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString());
      cb();
    },
  });
  const relay = await buildApp(config, { logStream });
  const url = await relay.listen(0, '127.0.0.1');
  return {
    ...relay,
    url,
    dataDir,
    logs,
    async close() {
      await relay.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
