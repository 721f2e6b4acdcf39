import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, DEFAULTS, SETTINGS, flagName, helpText, loadConfig, splitArgv } from '../../src/config.js';
import { tempDir } from '../helpers/relay.js';

async function configFile(content: unknown): Promise<string> {
  const dir = await tempDir('relay-config-');
  const file = join(dir, 'relay.json');
  await writeFile(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({ env: {}, argv: [] });
    // (undici's parser build, compiled at start: upstream/parser-warmup.ts; the plain one on an old ppc64 Node)
    expect(c).toEqual({ ...DEFAULTS, dataDir: resolve('./data'), upstreamParser: expect.stringMatching(/^(simd|plain)$/) });
    expect(c).toMatchObject({
      port: 8787,
      host: '127.0.0.1',
      upstreamUrl: 'https://api.openai.com',
      cacheUrl: 'sqlite',
      reportsUrl: 'sqlite',
      cache: true,
      cacheTtl: 604800,
      cacheMaxBytes: 1073741824,
      cacheMaxEntryBytes: 8388608,
      cacheScope: 'credential',
      offline: false,
      apiTokens: [],
      logLevel: 'info',
      maxBodyBytes: 33554432,
      shutdownGraceMs: 10000,
    });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('applies defaults → file → environment → flags', async () => {
    const file = await configFile({
      port: 1111,
      cacheTtl: 5,
      host: '0.0.0.0',
      routes: [{ prefix: '/anthropic', upstream: 'https://api.anthropic.com/' }],
    });
    const c = loadConfig({
      env: { RELAY_CONFIG: file, PORT: '2222', RELAY_CACHE_TTL: '6', RELAY_API_TOKENS: 'a, b,,c', RELAY_CACHE: 'off' },
      argv: ['--port', '3333', '--offline', '--cache-scope=shared'],
    });
    expect(c.port).toBe(3333);
    expect(c.cacheTtl).toBe(6);
    expect(c.host).toBe('0.0.0.0');
    expect(c.apiTokens).toEqual(['a', 'b', 'c']);
    expect(c.cache).toBe(false);
    expect(c.offline).toBe(true);
    expect(c.cacheScope).toBe('shared');
    expect(c.routes).toEqual([{ prefix: '/anthropic', upstream: 'https://api.anthropic.com' }]);
  });

  it('--config wins over RELAY_CONFIG', async () => {
    const a = await configFile({ port: 1 });
    const b = await configFile({ port: 2 });
    expect(loadConfig({ env: { RELAY_CONFIG: a }, argv: ['--config', b] }).port).toBe(2);
  });

  it('reports every problem at once', async () => {
    const file = await configFile({ colour: 'blue', routes: [{ prefix: 'nope', upstream: 'ftp://x' }, { prefix: '/api', upstream: 'http://x' }] });
    const list = problems(() =>
      loadConfig({
        env: {
          RELAY_CONFIG: file,
          PORT: 'eighty',
          RELAY_CACHE_TTL: '0',
          RELAY_CACHE_URL: 'mongodb://x',
          RELAY_REPORTS_URL: 'postgres',
          RELAY_CACHE_SCOPE: 'everyone',
          RELAY_OFFLINE: 'maybe',
          RELAY_UPSTREAM_URL: 'api.openai.com',
          RELAY_LOG_LEVEL: 'loud',
        },
        argv: ['--no-such-flag', '1'],
      }),
    );
    expect(list).toEqual(
      expect.arrayContaining([
        expect.stringContaining('unknown setting "colour"'),
        expect.stringContaining('routes[0].prefix'),
        expect.stringContaining('routes[0].upstream'),
        expect.stringContaining('routes[1].prefix: /api is served by the relay itself'),
        'PORT: "eighty" is not a whole number',
        'cacheTtl (RELAY_CACHE_TTL): must be at least 1',
        expect.stringContaining('RELAY_CACHE_URL'),
        expect.stringContaining('RELAY_REPORTS_URL'),
        expect.stringContaining('RELAY_CACHE_SCOPE'),
        'RELAY_OFFLINE: "maybe" is not true or false',
        expect.stringContaining('RELAY_UPSTREAM_URL'),
        expect.stringContaining('RELAY_LOG_LEVEL'),
        'unknown option --no-such-flag (see --help)',
      ]),
    );
    expect(list.length).toBeGreaterThanOrEqual(13);
  });

  it('refuses an upstream ending in /v1 (the OPENAI_BASE_URL habit), saying what to write instead', async () => {
    for (const [given, origin] of [
      ['http://host/v1', 'http://host'],
      ['http://host:8080/v1/', 'http://host:8080'],
      ['https://api.groq.com/openai/v1', 'https://api.groq.com/openai'],
    ]) {
      expect(problems(() => loadConfig({ env: { RELAY_UPSTREAM_URL: given } }))).toEqual([
        `upstreamUrl (RELAY_UPSTREAM_URL): must be the origin without /v1: use "${origin}"; a request for /v1/chat/completions already carries /v1`,
      ]);
    }
    expect(problems(() => loadConfig({ env: {}, argv: ['--upstream-url', 'http://host/v1'] }))).toEqual([
      'upstreamUrl (RELAY_UPSTREAM_URL): must be the origin without /v1: use "http://host"; a request for /v1/chat/completions already carries /v1',
    ]);
    const file = await configFile({ routes: [{ prefix: '/anthropic', upstream: 'https://api.anthropic.com/v1' }] });
    expect(problems(() => loadConfig({ env: { RELAY_CONFIG: file } }))).toEqual([
      'routes[0].upstream: must be the origin without /v1: use "https://api.anthropic.com"; a request for /anthropic/v1/chat/completions already carries /v1',
    ]);
  });

  it('keeps a base path that is not /v1, and an upstream ending in /v1 under a prefix that ends in /v1', async () => {
    const file = await configFile({
      upstreamUrl: 'https://gateway.example/openai/',
      routes: [
        { prefix: '/groq/v1', upstream: 'https://api.groq.com/openai/v1' },
        { prefix: '/v1beta', upstream: 'https://example.com/v1beta' },
      ],
    });
    const c = loadConfig({ env: { RELAY_CONFIG: file } });
    expect(c.upstreamUrl).toBe('https://gateway.example/openai');
    expect(c.routes).toEqual([
      { prefix: '/groq/v1', upstream: 'https://api.groq.com/openai/v1' },
      { prefix: '/v1beta', upstream: 'https://example.com/v1beta' },
    ]);
  });

  it('never echoes a password from a bad store URL', () => {
    const list = problems(() => loadConfig({ env: { RELAY_REPORTS_URL: 'mysql://u:hunter2@db/x' } }));
    expect(list.join('\n')).not.toContain('hunter2');
  });

  it('an unreadable config file is a problem, not a crash', () => {
    expect(problems(() => loadConfig({ env: { RELAY_CONFIG: '/nonexistent/relay.json' } }))[0]).toContain('/nonexistent/relay.json');
  });
});

describe('retention settings', () => {
  it('default to 90 days of reports, 30 days of bodies and no size budget', () => {
    expect(loadConfig({ env: {}, argv: [] })).toMatchObject({
      reportRetentionMs: 90 * 86_400_000,
      bodyRetentionMs: 30 * 86_400_000,
      dataMaxBytes: 0,
    });
    expect(helpText('1.0.0')).toContain('env RELAY_REPORT_RETENTION, default 90d');
    expect(helpText('1.0.0')).toContain('env RELAY_BODY_RETENTION, default 30d');
  });

  it('take durations from the environment, flags and the file (text or milliseconds), and off', async () => {
    expect(loadConfig({ env: { RELAY_REPORT_RETENTION: '12h', RELAY_BODY_RETENTION: 'off', RELAY_DATA_MAX_BYTES: '1048576' } })).toMatchObject({
      reportRetentionMs: 12 * 3_600_000,
      bodyRetentionMs: 0,
      dataMaxBytes: 1_048_576,
    });
    expect(loadConfig({ env: {}, argv: ['--report-retention', '2w', '--body-retention=45s'] })).toMatchObject({
      reportRetentionMs: 14 * 86_400_000,
      bodyRetentionMs: 45_000,
    });
    const file = await configFile({ reportRetentionMs: '7d', bodyRetentionMs: 60_000 });
    expect(loadConfig({ env: {}, argv: ['--config', file] })).toMatchObject({ reportRetentionMs: 7 * 86_400_000, bodyRetentionMs: 60_000 });
  });

  it('refuse what is not a duration or a byte count, naming the setting and the form expected', async () => {
    const file = await configFile({ bodyRetentionMs: -5 });
    let err: unknown;
    try {
      loadConfig({ env: { RELAY_REPORT_RETENTION: '90 days', RELAY_DATA_MAX_BYTES: '1GB' }, argv: ['--config', file] });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems).toEqual([
      'RELAY_REPORT_RETENTION: "90 days" is not a duration such as 90d, 12h, 30m or 45s (units ms, s, m, h, d, w), or off',
      'RELAY_DATA_MAX_BYTES: "1GB" is not a whole number',
      'bodyRetentionMs (RELAY_BODY_RETENTION): must be a duration such as 90d, 12h, 30m or 45s (units ms, s, m, h, d, w), or off',
    ]);
  });
});

describe('splitArgv', () => {
  it('separates the command and its arguments from the options, each option with its value', () => {
    expect(splitArgv(['--data-dir', 'X', 'cache', 'import', 'FILE'])).toEqual({ positionals: ['cache', 'import', 'FILE'], options: ['--data-dir', 'X'] });
    expect(splitArgv(['cache', 'import', 'FILE', '--data-dir', 'X'])).toEqual({ positionals: ['cache', 'import', 'FILE'], options: ['--data-dir', 'X'] });
    expect(splitArgv(['cache', '--data-dir=X', 'export', '--port', '1'])).toEqual({ positionals: ['cache', 'export'], options: ['--data-dir=X', '--port', '1'] });
    expect(splitArgv(['cache', 'import', '-', '--offline'])).toEqual({ positionals: ['cache', 'import', '-'], options: ['--offline'] });
    expect(splitArgv(['--offline', 'cache', 'export'])).toEqual({ positionals: ['cache', 'export'], options: ['--offline'] });
    expect(splitArgv(['--offline', 'off', 'cache'])).toEqual({ positionals: ['cache'], options: ['--offline', 'off'] });
    expect(splitArgv(['--help', 'cache', '-h', '--version'])).toEqual({ positionals: ['cache'], options: ['--help', '-h', '--version'] });
    expect(splitArgv(['--port', '1', '--', '--not-an-option'])).toEqual({ positionals: ['--not-an-option'], options: ['--port', '1'] });
  });

  it('loadConfig reads the options wherever they stand, and names a stray word', () => {
    expect(loadConfig({ env: {}, argv: ['--offline', '--port', '1'] })).toMatchObject({ offline: true, port: 1 });
    expect(loadConfig({ env: {}, argv: ['--offline', 'no'] }).offline).toBe(false);
    expect(problems(() => loadConfig({ env: {}, argv: ['--port', '1', 'serve', '--host'] }))).toEqual([
      'unexpected argument "serve" (see --help)',
      '--host needs a value',
    ]);
  });
});

describe('helpText', () => {
  it('lists every option with its flag, variable and default', () => {
    const text = helpText('9.9.9');
    for (const s of SETTINGS) {
      expect(text).toContain(flagName(s));
      expect(text).toContain(s.env);
    }
    expect(text).toContain('--config FILE');
  });
});

describe('config/example.json', () => {
  it('explains and sets every setting, and loads', () => {
    const file = resolve(__dirname, '../../config/example.json');
    const example = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    for (const s of SETTINGS) {
      expect(example, s.key).toHaveProperty(s.key);
      expect(String(example[`$${s.key}`]), s.key).toContain(s.env);
    }
    expect(loadConfig({ env: {}, argv: ['--config', file] }).routes).toEqual([{ prefix: '/anthropic', upstream: 'https://api.anthropic.com' }]);
  });
});
