// The built command as users run it.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { SETTINGS, flagName } from '../../src/config.js';
import { CLI } from '../helpers/relay-process.js';

const run = promisify(execFile);

describe('llm-relay command', () => {
  it('--help lists every option', async () => {
    const { stdout } = await run(process.execPath, [CLI, '--help']);
    for (const s of SETTINGS) expect(stdout).toContain(flagName(s));
    expect(stdout).toContain('--config FILE');
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
