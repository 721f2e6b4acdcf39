// A start that loaded a team store's client gives back the heap it grew before the relay listens
// (memory-trim.ts, giveBackAfterStart); the embedded default's start has nothing to give back and pays nothing.
import { afterEach, describe, expect, it } from 'vitest';
import { type RelayProcess, spawnRelay } from '../helpers/relay-process.js';
import { tempDir } from '../helpers/relay.js';
import { REDIS_URL, requireRedis } from '../helpers/servers.js';

const GIVEN_BACK = "the start's heap given back before listening";
let running: RelayProcess | undefined;

afterEach(async () => {
  if (!running) return;
  running.child.kill('SIGTERM');
  await running.exited;
  running = undefined;
});

async function start(env: Record<string, string>): Promise<string> {
  running = await spawnRelay({ RELAY_DATA_DIR: await tempDir(), RELAY_LOG_LEVEL: 'debug', HOST: '127.0.0.1', ...env });
  return running.output();
}

describe("the start's heap", () => {
  it('is given back before the relay listens when the Redis client grew it', async () => {
    await requireRedis();
    const out = await start({ RELAY_CACHE_URL: REDIS_URL });
    const given = out.indexOf(GIVEN_BACK);
    expect(given, out).toBeGreaterThan(-1);
    expect(given).toBeLessThan(out.indexOf('listening on'));
    const line = JSON.parse(out.split('\n').find((l) => l.includes(GIVEN_BACK))!);
    expect(line).toMatchObject({ level: 20, ms: expect.any(Number), rssBeforeMb: expect.any(Number), rssAfterMb: expect.any(Number) });
  });

  it('is left alone on the embedded default, which holds little it does not use', async () => {
    const out = await start({});
    expect(out).toContain('listening on');
    expect(out).not.toContain(GIVEN_BACK);
  });
});
