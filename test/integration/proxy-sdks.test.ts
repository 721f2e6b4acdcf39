// The official SDKs pointed at the relay: openai (current) on the default route, @anthropic-ai/sdk on a
// named route. First call MISS and reaches the upstream; the identical second call HIT without reaching
// it, with identical content — streamed and not.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai-current';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type FakeUpstream, anthropicMessage, chatCompletion, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type TestRelay, get, startRelay } from '../helpers/relay.js';

let relay: TestRelay;
let openaiUp: FakeUpstream;
let anthropicUp: FakeUpstream;

beforeAll(async () => {
  openaiUp = await startFakeUpstream();
  anthropicUp = await startFakeUpstream();
  relay = await startRelay({
    cacheUrl: 'sqlite',
    upstreamUrl: openaiUp.url,
    routes: [{ prefix: '/anthropic', upstream: anthropicUp.url }],
  });
});
afterAll(async () => {
  await relay.close();
  await openaiUp.close();
  await anthropicUp.close();
});
beforeEach(() => {
  openaiUp.reset();
  anthropicUp.reset();
});

async function reportById(id: string | null) {
  expect(id).toMatch(/^[0-9a-f-]{36}$/);
  await relay.reports.flush();
  const res = await get(`${relay.url}/api/reporting/v2/requests/${id}`);
  expect(res.status).toBe(200);
  return res.body;
}

describe('openai SDK through the default route', () => {
  const openai = () => new OpenAI({ apiKey: 'sk-test-openai-key', baseURL: `${relay.url}/v1`, maxRetries: 0 });

  it('non-streamed: MISS then HIT with the same content', async () => {
    const params = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'sdk json' }] };
    const first = await openai().chat.completions.create(params).withResponse();
    expect(first.response.headers.get('x-relay-cache')).toBe('MISS');
    expect(openaiUp.calls).toHaveLength(1);
    expect(openaiUp.calls[0]!.path).toBe('/v1/chat/completions');
    expect(JSON.parse(openaiUp.calls[0]!.body)).toEqual(params);
    expect(openaiUp.calls[0]!.headers.authorization).toBe('Bearer sk-test-openai-key');
    expect(first.data).toEqual(chatCompletion('echo: sdk json'));

    const second = await openai().chat.completions.create(params).withResponse();
    expect(second.response.headers.get('x-relay-cache')).toBe('HIT');
    expect(second.response.headers.get('age')).toMatch(/^\d+$/);
    expect(second.response.headers.get('x-relay-cache-key')).toBe(first.response.headers.get('x-relay-cache-key'));
    expect(second.response.headers.get('server-timing')).toMatch(/^relay;dur=\d+\.\d{3}$/);
    expect(openaiUp.calls).toHaveLength(1);
    expect(second.data).toEqual(first.data);

    const miss = await reportById(first.response.headers.get('x-relay-report-id'));
    expect(miss).toMatchObject({
      cacheEnabled: true,
      cacheHit: false,
      status: 200,
      model: 'gpt-4o-mini',
      provider: 'openai',
      usage: { inputTokens: 12, outputTokens: 7, totalTokens: 19 },
      costUsd: (12 * 0.15 + 7 * 0.6) / 1e6,
      metadata: { client: 'llm-relay', environment: 'development' },
      request: { body: params },
      response: { status: 200, body: chatCompletion('echo: sdk json'), streamed: false },
      proxy: { method: 'POST', path: '/v1/chat/completions', cacheStatus: 'MISS', outcome: 'complete' },
    });
    const hit = await reportById(second.response.headers.get('x-relay-report-id'));
    expect(hit).toMatchObject({
      cacheEnabled: true,
      cacheHit: true,
      costUsd: 0,
      costSavedUsd: miss.costUsd,
      originReportId: miss.id,
      response: { status: 200, body: chatCompletion('echo: sdk json') },
      proxy: { cacheStatus: 'HIT' },
    });
  });

  it('streamed: MISS then HIT replaying the same events', async () => {
    const params = {
      model: 'gpt-4o-mini',
      messages: [{ role: 'user' as const, content: 'stream me please' }],
      stream: true as const,
      stream_options: { include_usage: true },
    };
    const collect = async () => {
      const { data: stream, response } = await openai().chat.completions.create(params).withResponse();
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      return { chunks, response };
    };
    const first = await collect();
    expect(first.response.headers.get('x-relay-cache')).toBe('MISS');
    expect(first.response.headers.get('content-type')).toBe('text/event-stream');
    expect(first.chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('echo: stream me please');
    expect(openaiUp.calls).toHaveLength(1);

    const second = await collect();
    expect(second.response.headers.get('x-relay-cache')).toBe('HIT');
    expect(second.response.headers.get('content-type')).toBe('text/event-stream');
    expect(second.chunks).toEqual(first.chunks);
    expect(openaiUp.calls).toHaveLength(1);

    const miss = await reportById(first.response.headers.get('x-relay-report-id'));
    expect(miss.response.streamed).toBe(true);
    expect(miss.response.body).toEqual({
      id: 'chatcmpl-fake-s',
      object: 'chat.completion',
      created: 1_700_000_000,
      model: 'gpt-4o-mini',
      choices: [{ index: 0, message: { role: 'assistant', content: 'echo: stream me please' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 },
    });
    expect(miss.usage).toEqual({ inputTokens: 12, outputTokens: 4, totalTokens: 16 });
    expect(miss.costUsd).toBe((12 * 0.15 + 4 * 0.6) / 1e6);
    const hit = await reportById(second.response.headers.get('x-relay-report-id'));
    expect(hit).toMatchObject({ cacheHit: true, costUsd: 0, costSavedUsd: miss.costUsd, originReportId: miss.id, response: { body: miss.response.body } });
  });
});

describe('@anthropic-ai/sdk through a named route', () => {
  const anthropic = () => new Anthropic({ apiKey: 'sk-ant-test-key', baseURL: `${relay.url}/anthropic`, maxRetries: 0 });
  const params = { model: 'claude-3-5-haiku-20241022', max_tokens: 64, messages: [{ role: 'user' as const, content: 'hello claude' }] };

  it('non-streamed: MISS then HIT with the same content', async () => {
    const first = await anthropic().messages.create(params).withResponse();
    expect(first.response.headers.get('x-relay-cache')).toBe('MISS');
    expect(anthropicUp.calls).toHaveLength(1);
    expect(anthropicUp.calls[0]!.path).toBe('/v1/messages');
    // Credentials and provider headers reach the upstream unchanged (this SDK sends a bearer token).
    const sent = anthropicUp.calls[0]!.headers;
    expect(sent.authorization ?? sent['x-api-key']).toMatch(/sk-ant-test-key$/);
    expect(sent['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(first.data).toEqual(anthropicMessage('echo: hello claude', params.model));
    expect(openaiUp.calls).toHaveLength(0);

    const second = await anthropic().messages.create(params).withResponse();
    expect(second.response.headers.get('x-relay-cache')).toBe('HIT');
    expect(second.data).toEqual(first.data);
    expect(anthropicUp.calls).toHaveLength(1);

    const miss = await reportById(first.response.headers.get('x-relay-report-id'));
    expect(miss).toMatchObject({
      provider: 'anthropic',
      model: 'claude-3-5-haiku-20241022',
      usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
      costUsd: (10 * 0.8 + 5 * 4) / 1e6,
      proxy: { path: '/anthropic/v1/messages', upstream: anthropicUp.url },
    });
  });

  it('streamed: MISS then HIT with the same events', async () => {
    const collect = async () => {
      const stream = anthropic().messages.stream(params);
      const events: unknown[] = [];
      for await (const e of stream) events.push(e);
      return { events, final: await stream.finalMessage() };
    };
    const first = await collect();
    expect(anthropicUp.calls).toHaveLength(1);
    expect(first.final.content).toEqual([{ type: 'text', text: 'echo: hello claude' }]);
    const second = await collect();
    expect(anthropicUp.calls).toHaveLength(1);
    expect(second.events).toEqual(first.events);
    expect(second.final).toEqual(first.final);

    await relay.reports.flush(); // reports of proxied calls are written after the answer
    const reports = await get(`${relay.url}/api/reporting/v2/requests?model=claude-3-5-haiku-20241022&limit=10`);
    const streamed = reports.body.items.filter((r: any) => r.response.streamed);
    expect(streamed.map((r: any) => r.proxy.cacheStatus)).toEqual(['HIT', 'MISS']);
    expect(streamed[1].response.body).toMatchObject({
      type: 'message',
      role: 'assistant',
      content: [{ type: 'text', text: 'echo: hello claude' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 10, output_tokens: 3 },
    });
    expect(streamed[1].usage).toEqual({ inputTokens: 10, outputTokens: 3, totalTokens: 13 });
  });
});
