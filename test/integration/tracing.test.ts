// Tracing (OTEL_* variables): every proxied exchange is a GenAI span (semconv 1.41.0) sent over OTLP to a
// receiver this test runs, in http/json and in http/protobuf; a client's traceparent is joined and the
// upstream call is a child span whose context goes upstream; prompts and answers only when asked for.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { chat } from '../helpers/proxy-call.js';
import type { TestRelay } from '../helpers/relay.js';
import { startTracedRelay } from '../helpers/traced-relay.js';

const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;

function byReport(spans: ReceivedSpan[], reportId: string): ReceivedSpan {
  const found = spans.filter((s) => s.attributes['llm_relay.report.id'] === reportId);
  expect(found, `server span of report ${reportId}`).toHaveLength(1);
  return found[0]!;
}

const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan) => spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);

describe.each(['http/json', 'http/protobuf'])('spans over OTLP %s', (protocol) => {
  let up: FakeUpstream;
  let otlp: OtlpReceiver;
  let relay: TestRelay;
  beforeAll(async () => {
    up = await startFakeUpstream();
    otlp = await startOtlpReceiver();
    relay = await startTracedRelay(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
        OTEL_EXPORTER_OTLP_HEADERS: 'x-otlp-token=s3cret%20token',
        OTEL_SERVICE_NAME: 'relay-under-test',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test,team=llm',
        OTEL_BSP_SCHEDULE_DELAY: '50',
      },
      { upstreamUrl: up.url, routes: [{ prefix: '/dead', upstream: 'http://127.0.0.1:9' }] },
    );
  });
  afterAll(async () => {
    await relay.close();
    await otlp.close();
    await up.close();
  });

  it('a miss: a SERVER span with the GenAI attributes and a CLIENT child whose context went upstream', async () => {
    const res = await chat(relay.url, 'traced miss');
    expect(res.cache).toBe('MISS');
    const reportId = res.headers.get('x-relay-report-id')!;
    const spans = await otlp.waitForSpans(2);
    const server = byReport(spans, reportId);
    expect(server.format).toBe(protocol === 'http/json' ? 'json' : 'protobuf');
    expect(server.name).toBe('chat gpt-4o-mini');
    expect(server.kind).toBe(SERVER);
    expect(server.parentSpanId).toBe('');
    const port = Number(new URL(up.url).port);
    expect(server.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.response.model': 'gpt-4o-mini',
      'gen_ai.response.id': 'chatcmpl-fake-1',
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.usage.input_tokens': 12,
      'gen_ai.usage.output_tokens': 7,
      'http.response.status_code': 200,
      'llm_relay.cache.status': 'MISS',
      'llm_relay.cache.key': res.headers.get('x-relay-cache-key'),
      'llm_relay.report.id': reportId,
    });
    // a complete exchange on a GenAI path: no outcome, method or path attributes to repeat what the name says
    expect(Object.keys(server.attributes).filter((k) => ['llm_relay.outcome', 'http.request.method', 'url.path'].includes(k))).toEqual([]);
    expect(server.attributes['llm_relay.cache.namespace']).toMatch(/^cred-[0-9a-f]{32}$/);
    expect(server.attributes['error.type']).toBeUndefined();
    expect(server.statusCode).toBe(0);
    // the report id on the span is the stored report's
    await relay.reports.flush();
    expect((await relay.reports.get(reportId))?.id).toBe(reportId);

    const [client, ...more] = childrenOf(spans, server);
    expect(more).toEqual([]);
    expect(client!.kind).toBe(CLIENT);
    expect(client!.name).toBe('chat gpt-4o-mini');
    expect(client!.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o-mini',
      'server.address': '127.0.0.1',
      'server.port': port,
      'http.response.status_code': 200,
    });
    // the server reached is the child's to say; the answer's model, id and tokens the exchange's (once a trace)
    expect(server.attributes['server.address']).toBeUndefined();
    expect(client!.startNs >= server.startNs && client!.endNs <= server.endNs).toBe(true);
    // the upstream got the child span's context, not the relay's own span's
    expect(up.calls.at(-1)!.headers.traceparent).toBe(`00-${server.traceId}-${client!.spanId}-01`);

    expect(server.resource).toMatchObject({ 'service.name': 'relay-under-test', 'deployment.environment.name': 'test', team: 'llm', 'telemetry.sdk.language': 'nodejs' });
    expect(server.scope.name).toBe('llm-relay');
    expect(otlp.requests.at(-1)!.headers['x-otlp-token']).toBe('s3cret token');
    expect(otlp.requests.at(-1)!.contentType).toBe(protocol === 'http/json' ? 'application/json' : 'application/x-protobuf');
  });

  it('a hit: its own span, answered from the cache, with no upstream child', async () => {
    const first = await chat(relay.url, 'traced hit');
    const hit = await chat(relay.url, 'traced hit');
    expect(hit.cache).toBe('HIT');
    const reportId = hit.headers.get('x-relay-report-id')!;
    const spans = await otlp.waitForSpans(otlp.spans.length + 1);
    await expect.poll(() => otlp.spans.some((s) => s.attributes['llm_relay.report.id'] === reportId)).toBe(true);
    const span = byReport(otlp.spans, reportId);
    expect(span.attributes).toMatchObject({
      'llm_relay.cache.status': 'HIT',
      'llm_relay.origin_report.id': first.headers.get('x-relay-report-id'),
      'gen_ai.usage.input_tokens': 12,
      'gen_ai.usage.output_tokens': 7,
      'gen_ai.response.finish_reasons': ['stop'],
      'http.response.status_code': 200,
    });
    expect(childrenOf(spans, span)).toEqual([]);
  });

  it('a stream: time to first chunk on both spans, the assembled answer in the attributes', async () => {
    up.eventGapMs = 20;
    try {
      const res = await chat(relay.url, 'streamed words here', { stream: true });
      expect(res.status).toBe(200);
      const reportId = res.headers.get('x-relay-report-id')!;
      await expect.poll(() => otlp.spans.some((s) => s.attributes['llm_relay.report.id'] === reportId), { timeout: 10_000 }).toBe(true);
      const server = byReport(otlp.spans, reportId);
      await expect.poll(() => childrenOf(otlp.spans, server).length).toBe(1);
      const client = childrenOf(otlp.spans, server)[0]!;
      expect(server.attributes).toMatchObject({
        'gen_ai.request.stream': true,
        'gen_ai.response.id': 'chatcmpl-fake-s',
        'gen_ai.response.finish_reasons': ['stop'],
        'llm_relay.cache.status': 'MISS',
        'llm_relay.usage.estimated': true,
      });
      expect(server.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
      const ttfc = server.attributes['gen_ai.response.time_to_first_chunk'] as number;
      const upstreamTtfc = client.attributes['gen_ai.response.time_to_first_chunk'] as number;
      const duration = Number(server.endNs - server.startNs) / 1e9;
      // the first chunk came before the stream's end (events 20 ms apart), the upstream's no earlier than the relay's view of it
      expect(ttfc).toBeGreaterThan(0);
      expect(ttfc).toBeLessThan(duration - 0.03);
      expect(upstreamTtfc).toBeGreaterThan(0);
      expect(upstreamTtfc).toBeLessThanOrEqual(ttfc);
    } finally {
      up.reset();
    }
  });

  it('coalesced calls: each its own span, naming (JSON) or linking to (stream) the call that answered it', async () => {
    up.delayMs = 300;
    try {
      const [a, b] = await Promise.all([chat(relay.url, 'coalesce me'), chat(relay.url, 'coalesce me')]);
      expect([a.cache, b.cache].sort()).toEqual(['COALESCED', 'MISS']);
      const [leader, follower] = a.cache === 'MISS' ? [a, b] : [b, a];
      const followerId = follower.headers.get('x-relay-report-id')!;
      await expect.poll(() => otlp.spans.some((s) => s.attributes['llm_relay.report.id'] === followerId), { timeout: 10_000 }).toBe(true);
      const span = byReport(otlp.spans, followerId);
      expect(span.attributes['llm_relay.cache.status']).toBe('COALESCED');
      expect(span.attributes['llm_relay.origin_report.id']).toBe(leader.headers.get('x-relay-report-id'));
      expect(childrenOf(otlp.spans, span)).toEqual([]);
    } finally {
      up.reset();
    }

    up.eventGapMs = 30;
    try {
      const calls = up.calls.length;
      const first = chat(relay.url, 'coalesce a stream', { stream: true });
      // the second call starts once the first one's is upstream (and streaming, 30 ms between events)
      await expect.poll(() => up.calls.length).toBe(calls + 1);
      const [a, b] = await Promise.all([first, chat(relay.url, 'coalesce a stream', { stream: true })]);
      expect([a.cache, b.cache]).toEqual(['MISS', 'COALESCED']);
      expect(b.text).toBe(a.text);
      const leaderId = a.headers.get('x-relay-report-id')!;
      const followerId = b.headers.get('x-relay-report-id')!;
      await expect.poll(() => [leaderId, followerId].every((id) => otlp.spans.some((s) => s.attributes['llm_relay.report.id'] === id)), { timeout: 10_000 }).toBe(true);
      const leader = byReport(otlp.spans, leaderId);
      const follower = byReport(otlp.spans, followerId);
      expect(follower.links).toEqual([{ traceId: leader.traceId, spanId: leader.spanId, attributes: { 'llm_relay.link.leader': true } }]);
    } finally {
      up.reset();
    }
  });

  it('errors: an upstream error status and an unreachable upstream carry error.type and an error status', async () => {
    up.failWith(500, { error: { message: 'boom', type: 'server_error' } });
    let res;
    try {
      res = await chat(relay.url, 'fails upstream');
    } finally {
      up.reset();
    }
    expect(res.status).toBe(500);
    const failedId = res.headers.get('x-relay-report-id')!;
    const dead = await fetch(`${relay.url}/dead/v1/chat/completions?api-version=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-dead' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'nobody there' }] }),
    });
    expect(dead.status).toBe(502);
    const deadId = dead.headers.get('x-relay-report-id')!;
    await expect.poll(() => [failedId, deadId].every((id) => otlp.spans.some((s) => s.attributes['llm_relay.report.id'] === id)), { timeout: 10_000 }).toBe(true);

    const failed = byReport(otlp.spans, failedId);
    expect(failed.attributes).toMatchObject({ 'error.type': '500', 'http.response.status_code': 500, 'llm_relay.cache.status': 'MISS' });
    expect(failed.statusCode).toBe(ERROR);
    await expect.poll(() => childrenOf(otlp.spans, failed).length).toBe(1);
    expect(childrenOf(otlp.spans, failed)[0]!.attributes).toMatchObject({ 'error.type': '500', 'http.response.status_code': 500 });

    const unreachable = byReport(otlp.spans, deadId);
    expect(unreachable.attributes).toMatchObject({ 'error.type': 'RELAY_ERR_UPSTREAM_UNREACHABLE', 'http.response.status_code': 502, 'llm_relay.outcome': 'upstream-error' });
    expect(unreachable.statusCode).toBe(ERROR);
    expect(unreachable.name).toBe('chat gpt-4o-mini');
    await expect.poll(() => childrenOf(otlp.spans, unreachable).length).toBe(1);
    const child = childrenOf(otlp.spans, unreachable)[0]!;
    expect(child.attributes).toMatchObject({ 'error.type': 'RELAY_ERR_UPSTREAM_UNREACHABLE', 'server.address': '127.0.0.1', 'server.port': 9 });
    expect(child.attributes['http.response.status_code']).toBeUndefined();

    // a 200 stream that carries an error event did not complete: its span says so
    up.errorEventAfter = 2;
    let broken;
    try {
      broken = await chat(relay.url, 'a stream that breaks', { stream: true });
    } finally {
      up.reset();
    }
    expect(broken.status).toBe(200);
    const brokenId = broken.headers.get('x-relay-report-id')!;
    await expect.poll(() => otlp.spans.some((s) => s.attributes['llm_relay.report.id'] === brokenId), { timeout: 10_000 }).toBe(true);
    const streamSpan = byReport(otlp.spans, brokenId);
    expect(streamSpan.attributes).toMatchObject({ 'error.type': 'stream-error', 'llm_relay.outcome': 'stream-error', 'http.response.status_code': 200 });
    expect(streamSpan.statusCode).toBe(ERROR);
  });

  it('a client traceparent is joined; the upstream gets the relay child span as its parent, with the tracestate', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parent = '00f067aa0ba902b7';
    const res = await chat(relay.url, 'joined trace', { headers: { traceparent: `00-${traceId}-${parent}-01`, tracestate: 'vendor=abc,other=1' } });
    const reportId = res.headers.get('x-relay-report-id')!;
    await expect.poll(() => otlp.spans.some((s) => s.attributes['llm_relay.report.id'] === reportId), { timeout: 10_000 }).toBe(true);
    const server = byReport(otlp.spans, reportId);
    expect(server.traceId).toBe(traceId);
    expect(server.parentSpanId).toBe(parent);
    await expect.poll(() => childrenOf(otlp.spans, server).length).toBe(1);
    const client = childrenOf(otlp.spans, server)[0]!;
    const call = up.calls.at(-1)!;
    expect(call.headers.traceparent).toBe(`00-${traceId}-${client.spanId}-01`);
    expect(call.headers.tracestate).toBe('vendor=abc,other=1');

    // A client that says "not sampled": the default sampler (parentbased_always_on) follows it, no span is
    // made, and the client's own context goes upstream untouched.
    const before = otlp.spans.length;
    const quiet = await chat(relay.url, 'not sampled', { headers: { traceparent: `00-${traceId}-${parent}-00` } });
    expect(quiet.status).toBe(200);
    expect(up.calls.at(-1)!.headers.traceparent).toBe(`00-${traceId}-${parent}-00`);
    await chat(relay.url, 'after the quiet one');
    await otlp.waitForSpans(before + 2);
    await new Promise((r) => setTimeout(r, 200));
    expect(otlp.spans.some((s) => s.attributes['llm_relay.report.id'] === quiet.headers.get('x-relay-report-id'))).toBe(false);
  });

  it('no prompt or answer text by default, and never a credential', async () => {
    const res = await chat(relay.url, 'a private prompt text', { headers: { authorization: 'Bearer sk-very-secret-key', cookie: 'session=cookie-secret' } });
    const reportId = res.headers.get('x-relay-report-id')!;
    await expect.poll(() => otlp.spans.filter((s) => s.attributes['llm_relay.report.id'] === reportId || s.parentSpanId === byId(reportId)).length, { timeout: 10_000 }).toBe(2);
    const all = JSON.stringify(otlp.spans, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
    for (const secret of ['a private prompt text', 'echo: a private', 'sk-very-secret-key', 'cookie-secret', 'sk-default', 's3cret']) expect(all).not.toContain(secret);
    expect(all).not.toContain('gen_ai.input.messages');
    expect(all).not.toContain('gen_ai.output.messages');
  });

  /** the span id of a report's server span, once it arrived */
  const byId = (reportId: string): string | undefined => otlp.spans.find((s) => s.attributes['llm_relay.report.id'] === reportId)?.spanId;
});
