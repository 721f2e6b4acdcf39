// Prompt and answer content in spans only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, in
// the GenAI conventions' message form (gen_ai.system_instructions, gen_ai.input.messages,
// gen_ai.output.messages as JSON text); OpenAI and Anthropic shapes alike.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import type { TestRelay } from '../helpers/relay.js';
import { startTracedRelay } from '../helpers/traced-relay.js';

let up: FakeUpstream;
let otlp: OtlpReceiver;
let relay: TestRelay;
beforeAll(async () => {
  up = await startFakeUpstream();
  otlp = await startOtlpReceiver();
  relay = await startTracedRelay(
    { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' },
    { upstreamUrl: up.url, routes: [{ prefix: '/anthropic', upstream: up.url }] },
  );
});
afterAll(async () => {
  await relay.close();
  await otlp.close();
  await up.close();
});

async function serverSpan(reportId: string) {
  await expect.poll(() => otlp.spans.some((s) => s.attributes['llm_relay.report.id'] === reportId), { timeout: 10_000 }).toBe(true);
  return otlp.spans.find((s) => s.attributes['llm_relay.report.id'] === reportId)!;
}

it('OpenAI chat: system instructions, input and output messages', async () => {
  const res = await fetch(`${relay.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-content' },
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'What is the capital of France?' },
      ],
    }),
  });
  expect(res.status).toBe(200);
  const span = await serverSpan(res.headers.get('x-relay-report-id')!);
  expect(JSON.parse(span.attributes['gen_ai.system_instructions'] as string)).toEqual([{ type: 'text', content: 'Be brief.' }]);
  expect(JSON.parse(span.attributes['gen_ai.input.messages'] as string)).toEqual([
    { role: 'user', parts: [{ type: 'text', content: 'What is the capital of France?' }] },
  ]);
  expect(JSON.parse(span.attributes['gen_ai.output.messages'] as string)).toEqual([
    { role: 'assistant', parts: [{ type: 'text', content: 'echo: What is the capital of France?' }], finish_reason: 'stop' },
  ]);
  // content, still never a credential
  expect(JSON.stringify(otlp.spans, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toContain('sk-content');
});

it('Anthropic messages, streamed: the assembled answer', async () => {
  const res = await fetch(`${relay.url}/anthropic/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-content', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'claude-3-5-haiku-20241022', max_tokens: 64, stream: true, system: 'Answer in French.', messages: [{ role: 'user', content: 'Hello there' }] }),
  });
  expect(res.status).toBe(200);
  await res.text();
  const span = await serverSpan(res.headers.get('x-relay-report-id')!);
  expect(span.name).toBe('chat claude-3-5-haiku-20241022');
  expect(span.attributes).toMatchObject({
    'gen_ai.provider.name': 'anthropic',
    'gen_ai.operation.name': 'chat',
    'gen_ai.response.finish_reasons': ['end_turn'],
    'gen_ai.usage.input_tokens': 10,
    'gen_ai.request.stream': true,
  });
  expect(JSON.parse(span.attributes['gen_ai.system_instructions'] as string)).toEqual([{ type: 'text', content: 'Answer in French.' }]);
  expect(JSON.parse(span.attributes['gen_ai.input.messages'] as string)).toEqual([{ role: 'user', parts: [{ type: 'text', content: 'Hello there' }] }]);
  expect(JSON.parse(span.attributes['gen_ai.output.messages'] as string)).toEqual([
    { role: 'assistant', parts: [{ type: 'text', content: 'echo: Hello there' }], finish_reason: 'end_turn' },
  ]);
  expect(JSON.stringify(otlp.spans, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toContain('sk-ant-content');
});
