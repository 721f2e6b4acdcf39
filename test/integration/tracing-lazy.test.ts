// Tracing off (no OTLP endpoint) costs nothing: not one @opentelemetry module is loaded, and a proxy-only
// relay still does not load fastify. With an endpoint set, the tracing modules are loaded at start, and
// fastify still is not. (This file runs in a process of its own, so what is loaded is what these relays
// loaded.)
import { createRequire } from 'node:module';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { chat } from '../helpers/proxy-call.js';
import { startTracedRelay } from '../helpers/traced-relay.js';

const loaded = (pkg: string): boolean =>
  Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes(`/node_modules/${pkg}/`));

let up: FakeUpstream;
let otlp: OtlpReceiver;
beforeAll(async () => {
  up = await startFakeUpstream();
  otlp = await startOtlpReceiver();
});
afterAll(async () => {
  await otlp.close();
  await up.close();
});

it('off without an endpoint (or with OTEL_SDK_DISABLED): no OpenTelemetry SDK module is loaded, nor fastify', async () => {
  const settings: Record<string, string>[] = [
    {},
    { OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' },
    { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SDK_DISABLED: 'true' },
  ];
  for (const otel of settings) {
    const relay = await startTracedRelay(otel, { upstreamUrl: up.url });
    try {
      expect((await chat(relay.url, 'untraced')).cache).toBe('MISS');
      expect((await chat(relay.url, 'untraced')).cache).toBe('HIT');
      expect((await chat(relay.url, 'untraced stream', { stream: true })).status).toBe(200);
      await relay.reports.flush();
      // the upstream got no traceparent the relay made
      expect(up.calls.every((c) => c.headers.traceparent === undefined)).toBe(true);
    } finally {
      await relay.close();
    }
  }
  expect(otlp.spans).toEqual([]);
  // (@opentelemetry/api itself comes with prom-client, for its exemplars, whether tracing is on or not:
  // a few interfaces, no SDK)
  for (const pkg of ['core', 'sdk-trace-base', 'sdk-trace', 'resources', 'otlp-exporter-base', 'otlp-transformer'])
    expect(loaded(`@opentelemetry/${pkg}`), pkg).toBe(false);
  expect(loaded('fastify')).toBe(false);
});

it('on with an endpoint: the tracing modules are loaded at start; fastify still is not', async () => {
  const relay = await startTracedRelay({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '20' }, { upstreamUrl: up.url });
  try {
    expect(loaded('@opentelemetry/core')).toBe(true);
    expect((await chat(relay.url, 'traced')).status).toBe(200);
    await otlp.waitForSpans(2);
    expect(loaded('fastify')).toBe(false);
  } finally {
    await relay.close();
  }
});
