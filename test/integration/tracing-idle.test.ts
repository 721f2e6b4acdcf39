// With tracing on, the report worker holds the span queue and the exporter: it is not stopped when idle
// (RELAY_REPORT_WORKER_IDLE_MS), so the span counters in /metrics only grow and no report waits on an export
// to a collector before a new worker can take it.
import { afterAll, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { chat } from '../helpers/proxy-call.js';
import type { TestRelay } from '../helpers/relay.js';
import { startTracedRelay } from '../helpers/traced-relay.js';

let up: FakeUpstream;
let otlp: OtlpReceiver;
let relay: TestRelay;
afterAll(async () => {
  await relay?.close();
  await otlp?.close();
  await up?.close();
});

async function exported(): Promise<number> {
  const text = await (await fetch(`${relay.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('llm_relay_trace_spans_exported_total'));
  return Number(line?.split(' ')[1] ?? 0);
}

it('keeps the report worker, and its span counters, through idle spells', async () => {
  up = await startFakeUpstream();
  otlp = await startOtlpReceiver();
  relay = await startTracedRelay(
    { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '20' },
    // an idle stop this soon would happen between every two calls here
    { upstreamUrl: up.url, reportWorkerIdleMs: 50 },
  );
  for (let i = 1; i <= 3; i++) {
    expect((await chat(relay.url, `idle spell ${i}`)).cache).toBe('MISS');
    // two spans a miss (the exchange and its upstream call)
    await expect.poll(exported, { timeout: 5_000 }).toBe(2 * i);
    await new Promise((r) => setTimeout(r, 300));
  }
  expect(await otlp.waitForSpans(6)).toHaveLength(6);
});
