// With tracing on, the report worker still stops when idle (RELAY_REPORT_WORKER_IDLE_MS), giving its memory
// back: it closes its files, answers, and only then hands its last spans to the endpoint, so the next
// worker starts at once, even while that endpoint hangs. The span counters in /metrics carry on across
// workers (they only grow), and every span arrives.
import { afterEach, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { chat } from '../helpers/proxy-call.js';
import type { TestRelay } from '../helpers/relay.js';
import { startTracedRelay } from '../helpers/traced-relay.js';

let up: FakeUpstream | undefined;
let otlp: OtlpReceiver | undefined;
let relay: TestRelay | undefined;
afterEach(async () => {
  await relay?.close();
  if (otlp) otlp.hang = false;
  await otlp?.close();
  await up?.close();
  relay = otlp = up = undefined;
});

async function counter(name: 'exported' | 'failed'): Promise<number> {
  const text = await (await fetch(`${relay!.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`llm_relay_trace_spans_${name}_total`));
  return Number(line?.split(' ')[1] ?? 0);
}

/** worker threads of this process: the relay's report worker, while it runs (vitest runs in forks) */
function workers(): number {
  return (process.report.getReport() as { workers: unknown[] }).workers.length;
}

it('stops the idle report worker; its spans are exported and the counters carry on', async () => {
  up = await startFakeUpstream();
  otlp = await startOtlpReceiver();
  relay = await startTracedRelay({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '60000' }, { upstreamUrl: up.url, reportWorkerIdleMs: 50 });
  for (let i = 1; i <= 3; i++) {
    expect((await chat(relay.url, `idle spell ${i}`)).cache).toBe('MISS');
    // the worker stops once idle, and its last spans (two a miss: the exchange and its upstream call) go
    // out then, long before the processor's own schedule (a minute here) would send them
    await expect.poll(workers, { timeout: 5_000 }).toBe(0);
    await expect.poll(() => counter('exported'), { timeout: 5_000 }).toBe(2 * i);
  }
  expect(await otlp.waitForSpans(6)).toHaveLength(6);
});

it('starts the next worker while a stopped one still waits on a hanging endpoint', async () => {
  up = await startFakeUpstream();
  otlp = await startOtlpReceiver();
  otlp.hang = true;
  relay = await startTracedRelay({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_TIMEOUT: '5000' }, { upstreamUrl: up.url, reportWorkerIdleMs: 50 });
  const stored = async (r: { headers: Headers }): Promise<number> =>
    (await fetch(`${relay!.url}/api/reporting/v2/requests/${r.headers.get('x-relay-report-id')}`)).status;
  const first = await chat(relay.url, 'before the idle stop');
  expect(first.cache).toBe('MISS');
  // its worker wrote the report; then, idle, it stops: its files close, and the export of its two spans is
  // held open by the endpoint
  await expect.poll(() => stored(first), { timeout: 5_000 }).toBe(200);
  await new Promise((r) => setTimeout(r, 500));
  const second = await chat(relay.url, 'while the last export hangs');
  expect(second.cache).toBe('MISS');
  // a second worker runs beside the one still waiting on its export, and writes the new report
  await expect.poll(workers, { timeout: 2_000 }).toBe(2);
  await expect.poll(() => stored(second), { timeout: 2_000 }).toBe(200);
  // (nothing failed yet: the hung export has not timed out)
  expect(await counter('failed')).toBe(0);
  // the hung export ends at its timeout, counted; the second worker's spans go the same way at its stop
  await expect.poll(() => counter('failed'), { timeout: 15_000 }).toBe(4);
  expect(await counter('exported')).toBe(0);
});
