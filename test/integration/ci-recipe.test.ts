// The README's record-here, replay-in-CI recipe, run as written: its `npx llm-relay …` lines are read from
// the README (between the ci-recipe markers) and run in order against the built command, with another API
// key on the replay side, as in a real CI. Every recorded call must come back a HIT with the same body, and
// the upstream must see nothing during the replay.
import { execFile } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import OpenAI from 'openai-current';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { tempDir } from '../helpers/relay.js';
import { CLI, type RelayProcess, spawnRelay } from '../helpers/relay-process.js';

const run = promisify(execFile);
const README = fileURLToPath(new URL('../../README.md', import.meta.url));

interface Step {
  args: string[];
  /** `> FILE`: stdout goes to this file */
  stdoutTo?: string;
  /** a relay that keeps running (no `cache` subcommand) */
  server: boolean;
}

/** The recipe's command lines: `npx llm-relay ARGS [> FILE] [&]`, comments dropped. */
async function recipe(): Promise<Step[]> {
  const text = await readFile(README, 'utf8');
  const block = /<!-- ci-recipe[^>]*-->\s*```sh\n([\s\S]*?)```\s*<!-- \/ci-recipe -->/.exec(text);
  expect(block, 'README has the ci-recipe block').not.toBeNull();
  const steps: Step[] = [];
  for (const raw of block![1]!.split('\n')) {
    const line = raw.replace(/#.*$/, '').trim();
    if (line === '') continue;
    const words = line.replace(/&$/, '').trim().split(/\s+/);
    expect(words.slice(0, 2), line).toEqual(['npx', 'llm-relay']);
    const args = words.slice(2);
    const redirect = args.indexOf('>');
    const step: Step = { args: redirect < 0 ? args : args.slice(0, redirect), server: args[0] !== 'cache' };
    if (redirect >= 0) step.stdoutTo = args[redirect + 1]!;
    steps.push(step);
  }
  return steps;
}

let up: FakeUpstream;
let cwd: string;
const relays: RelayProcess[] = [];

beforeAll(async () => {
  up = await startFakeUpstream();
  cwd = await tempDir('llm-relay-ci-recipe-');
});
afterAll(async () => {
  for (const r of relays) r.child.kill('SIGKILL');
  await up.close();
  await rm(cwd, { recursive: true, force: true });
});

const CALLS = ['What is a cache?', 'Name three colours', 'Say hello to CI'];

async function ask(url: string, apiKey: string) {
  const client = new OpenAI({ apiKey, baseURL: `${url}/v1`, maxRetries: 0 });
  const out = [];
  for (const content of CALLS) {
    const { data, response } = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }] }).withResponse();
    out.push({ data, cache: response.headers.get('x-relay-cache') });
  }
  return out;
}

it('records with one key and replays offline in a fresh data dir with another: every call a HIT, nothing upstream', async () => {
  const steps = await recipe();
  expect(steps.map((s) => (s.server ? 'relay' : s.args.slice(0, 2).join(' ')))).toEqual(['relay', 'cache export', 'cache import', 'relay']);
  // How the test stands in for the user: the relays listen on a free port and record from the fake upstream.
  const env = { PORT: '0', RELAY_UPSTREAM_URL: up.url, RELAY_LOG_LEVEL: 'info' };
  let recorded: Awaited<ReturnType<typeof ask>> | undefined;
  let replayed: Awaited<ReturnType<typeof ask>> | undefined;

  for (const step of steps) {
    if (step.server) {
      const relay = await spawnRelay(env, step.args, cwd);
      relays.push(relay);
      if (!recorded) {
        recorded = await ask(relay.url, 'sk-developer-own-key');
        expect(recorded.map((r) => r.cache)).toEqual(['MISS', 'MISS', 'MISS']);
        relay.child.kill('SIGINT'); // "then stop the relay (Ctrl-C)"
        expect((await relay.exited).code).toBe(0);
      } else {
        const before = up.calls.length;
        replayed = await ask(relay.url, 'sk-ci-another-key');
        expect(up.calls.length - before).toBe(0);
      }
      continue;
    }
    const { stdout } = await run(process.execPath, [CLI, ...step.args], { cwd, env: { PATH: process.env.PATH ?? '' } });
    if (step.stdoutTo) await writeFile(join(cwd, step.stdoutTo), stdout);
  }

  expect(replayed!.map((r) => r.cache)).toEqual(['HIT', 'HIT', 'HIT']);
  expect(replayed!.map((r) => r.data)).toEqual(recorded!.map((r) => r.data));
  expect((await readFile(join(cwd, 'llm-cache.ndjson'), 'utf8')).trim().split('\n')).toHaveLength(CALLS.length);
});
