// An OTLP endpoint that is down or hangs never delays or changes an answer: spans are exported from the
// report worker through a bounded queue, and what cannot be delivered is counted in /metrics. The relay
// runs as `npm start` runs it (the built command), configured by OTEL_* variables in its environment.
import { createServer } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { parse } from '../helpers/prometheus.js';
import { type RelayProcess, spawnRelay } from '../helpers/relay-process.js';

const CALLS = 40;

let up: FakeUpstream;
let hanging: OtlpReceiver;
let closedPort: number;
const dirs: string[] = [];
const relays: RelayProcess[] = [];

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function relay(otel: Record<string, string>): Promise<RelayProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'llm-relay-otel-'));
  dirs.push(dir);
  const r = await spawnRelay({ RELAY_DATA_DIR: dir, RELAY_UPSTREAM_URL: up.url, RELAY_CACHE_URL: 'memory', ...otel });
  relays.push(r);
  return r;
}

/** CALLS different misses in a row: each answer's status and body, and the time they all took. */
async function drive(url: string, tag: string): Promise<{ answers: { status: number; body: string }[]; ms: number }> {
  const answers: { status: number; body: string }[] = [];
  const t0 = performance.now();
  for (let i = 0; i < CALLS; i++) {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-faults' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `call ${i} ${tag}` }] }),
    });
    answers.push({ status: res.status, body: (await res.text()).replace(tag, 'TAG') });
  }
  return { answers, ms: performance.now() - t0 };
}

async function spanCounters(url: string): Promise<Record<string, number>> {
  const samples = parse(await (await fetch(`${url}/metrics`)).text());
  const value = (name: string) => samples.find((s) => s.name === name)?.value ?? NaN;
  return {
    exported: value('llm_relay_trace_spans_exported_total'),
    failed: value('llm_relay_trace_spans_failed_total'),
    dropped: value('llm_relay_trace_spans_dropped_total'),
  };
}

const TRACING = {
  OTEL_EXPORTER_OTLP_TIMEOUT: '500',
  OTEL_BSP_SCHEDULE_DELAY: '20',
  OTEL_BSP_MAX_QUEUE_SIZE: '8',
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '4',
};

let baseline: Awaited<ReturnType<typeof drive>>;
beforeAll(async () => {
  up = await startFakeUpstream();
  hanging = await startOtlpReceiver();
  hanging.hang = true;
  closedPort = await freePort();
  const plain = await relay({});
  baseline = await drive(plain.url, 'plain');
  expect(baseline.answers.every((a) => a.status === 200)).toBe(true);
});
afterAll(async () => {
  for (const r of relays) if (r.child.exitCode === null) r.child.kill('SIGKILL');
  await hanging.close();
  await up.close();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

it.each([
  ['a closed port', () => `http://127.0.0.1:${closedPort}`],
  ['a receiver that never answers', () => hanging.url],
])('with the endpoint at %s, answers are the same and no slower; every span is counted failed or dropped', async (_name, endpoint) => {
  for (const protocol of ['http/protobuf', 'http/json']) {
    const traced = await relay({ ...TRACING, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint(), OTEL_EXPORTER_OTLP_PROTOCOL: protocol });
    const run = await drive(traced.url, `traced ${protocol}`);
    expect(run.answers).toEqual(baseline.answers);
    // generous: the same calls on a relay without tracing, plus slack for a machine shared with other work
    expect(run.ms).toBeLessThan(baseline.ms * 2 + 1500);

    // Two spans per miss (the exchange and its upstream call): each one either failed to export or was
    // dropped from the full queue; none was exported, and none is lost from the count.
    await expect
      .poll(async () => {
        const c = await spanCounters(traced.url);
        return c.failed! + c.dropped!;
      }, { timeout: 15_000, interval: 200 })
      .toBe(2 * CALLS);
    const c = await spanCounters(traced.url);
    expect(c.exported).toBe(0);
    expect(c.failed).toBeGreaterThan(0);
    expect(c.dropped).toBeGreaterThan(0);
    expect(traced.output()).toContain('trace export failed');

    // Stopping does not wait on the endpoint for long either.
    const t0 = performance.now();
    traced.child.kill('SIGTERM');
    expect((await traced.exited).code).toBe(0);
    expect(performance.now() - t0).toBeLessThan(8000);
  }
});
