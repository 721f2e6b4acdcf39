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
