// What a person sees when the relay starts: one block naming where it listens, where calls go, where it
// keeps things and how it behaves, with no password or token in it. JSON lines when stdout is not a
// terminal (the default here: a pipe), readable lines with RELAY_LOG_FORMAT=pretty, redacted either way.
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CLI, type RelayProcess, spawnRelay } from '../helpers/relay-process.js';
import { tempDir } from '../helpers/relay.js';
import { DATABASE_URL, requirePostgres } from '../helpers/servers.js';

let up: FakeUpstream;
let dir: string;
let configFile: string;
/** The test database's URL with a password in it (trust authentication ignores it). */
let reportsUrl: string;

beforeAll(async () => {
  await requirePostgres();
  up = await startFakeUpstream();
  dir = await tempDir();
  configFile = join(dir, 'relay.json');
  await writeFile(configFile, JSON.stringify({ routes: [{ prefix: '/anthropic', upstream: 'https://api.anthropic.example' }] }));
  const u = new URL(DATABASE_URL);
  u.password = 's3cret-pw';
  reportsUrl = u.toString();
});
afterAll(async () => {
  await up.close();
});

async function start(env: Record<string, string>): Promise<RelayProcess> {
  return spawnRelay({
    RELAY_CONFIG: configFile,
    RELAY_DATA_DIR: join(dir, `data-${env.RELAY_LOG_FORMAT ?? 'auto'}`),
    RELAY_UPSTREAM_URL: up.url,
    RELAY_CACHE_URL: 'memory',
    RELAY_REPORTS_URL: reportsUrl,
    RELAY_CACHE_SCOPE: 'shared',
    RELAY_CACHE: 'off',
    RELAY_OFFLINE: 'true',
    RELAY_API_TOKENS: 'tok-one,tok-two',
    ...env,
  });
}

async function stop(relay: RelayProcess): Promise<string> {
  // Answered once start-up is through (signal handlers in place): the SIGTERM below is a graceful stop.
  expect((await fetch(`${relay.url}/healthz`)).status).toBe(200);
  relay.child.kill('SIGTERM');
  expect(await relay.exited).toEqual({ code: 0, signal: null });
  return relay.output();
}

describe('start-up banner', () => {
  it('JSON (stdout is not a terminal): one info line with the banner text and its facts, passwords redacted', async () => {
    const relay = await start({});
    const output = await stop(relay);
    const lines = output.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, any>);
    const banners = lines.filter((l) => 'startup' in l);
    expect(banners).toHaveLength(1);
    const { level, startup, msg } = banners[0]!;
    const dataDir = join(dir, 'data-auto');
    const redactedReports = reportsUrl.replace('s3cret-pw', '***');
    expect(level).toBe(30);
    expect(startup).toEqual({
      version: VERSION,
      url: relay.url,
      upstream: up.url,
      routes: [{ prefix: '/anthropic', upstream: 'https://api.anthropic.example' }],
      dataDir,
      cacheStore: 'memory',
      reportStore: redactedReports,
      cache: false,
      cacheScope: 'shared',
      offline: true,
      tokensRequired: true,
      tracing: 'off',
      dashboard: `${relay.url}/dashboard/`,
    });
    expect(msg).toBe(
      [
        `llm-relay ${VERSION} listening on ${relay.url}`,
        `  upstream   ${up.url}`,
        '  route      /anthropic → https://api.anthropic.example',
        `  data dir   ${dataDir}`,
        '  cache      memory; off (x-relay-cache: on turns it on per call), scope shared',
        `  reports    ${redactedReports}`,
        '  offline    yes: nothing goes upstream, a miss is a 504',
        '  tokens     required (x-relay-token, or Authorization: Bearer on /api)',
        '  tracing    off (OTEL_EXPORTER_OTLP_ENDPOINT is not set)',
        `  dashboard  ${relay.url}/dashboard/#token=YOUR_TOKEN`,
      ].join('\n'),
    );
    for (const secret of ['s3cret-pw', 'tok-one', 'tok-two']) expect(output).not.toContain(secret);
  });

  it('pretty (RELAY_LOG_FORMAT=pretty): readable lines, not JSON, still redacted', async () => {
    const relay = await start({ RELAY_LOG_FORMAT: 'pretty' });
    const res = await fetch(`${relay.url}/dashboard/?token=tok-one`);
    expect(res.status).toBe(200);
    await res.text();
    const output = await stop(relay);
    const dataDir = join(dir, 'data-pretty');
    expect(output).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: llm-relay /);
    expect(output).toContain(
      [
        `INFO: llm-relay ${VERSION} listening on ${relay.url}`,
        `  upstream   ${up.url}`,
        '  route      /anthropic → https://api.anthropic.example',
        `  data dir   ${dataDir}`,
        '  cache      memory; off (x-relay-cache: on turns it on per call), scope shared',
        `  reports    ${reportsUrl.replace('s3cret-pw', '***')}`,
        '  offline    yes: nothing goes upstream, a miss is a 504',
        '  tokens     required (x-relay-token, or Authorization: Bearer on /api)',
        '  tracing    off (OTEL_EXPORTER_OTLP_ENDPOINT is not set)',
        `  dashboard  ${relay.url}/dashboard/#token=YOUR_TOKEN\n`,
      ].join('\n'),
    );
    expect(output).toContain('"url":"/dashboard/?token=[redacted]"');
    expect(output).not.toContain('"startup"');
    expect(output).not.toMatch(/^\{/m);
    for (const secret of ['s3cret-pw', 'tok-one', 'tok-two']) expect(output).not.toContain(secret);
  });

  it('auto (the default) is pretty, in colour, when stdout is a terminal', async () => {
    // util-linux `script` runs the relay on a pseudo-terminal and copies what it writes to our pipe.
    const child = spawn('script', ['-q', '-e', '-c', `${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)}`, '/dev/null'], {
      env: { PATH: process.env.PATH ?? '', TERM: 'xterm', PORT: '0', RELAY_DATA_DIR: join(dir, 'data-tty'), RELAY_UPSTREAM_URL: up.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const exited = new Promise((resolve) => child.on('exit', resolve));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no banner:\n${output}`)), 20_000);
      child.stdout.on('data', (c: Buffer) => {
        output += c.toString();
        if (output.includes('dashboard')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    child.kill('SIGTERM');
    await exited;
    // Green INFO, then the banner's first line; no JSON.
    expect(output).toMatch(new RegExp(`\\[\\d\\d:\\d\\d:\\d\\d\\.\\d{3}\\] \u001b\\[32mINFO\u001b\\[39m: \u001b\\[36mllm-relay ${VERSION.replace(/\./g, '\\.')} listening on http://127\\.0\\.0\\.1:\\d+\r\n`));
    expect(output).toContain(`  upstream   ${up.url}\r\n`);
    expect(output).not.toContain('{"level"');
  });
});
