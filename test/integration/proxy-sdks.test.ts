// The official SDKs pointed at the relay: openai (current) on the default route, @anthropic-ai/sdk on a
// named route. First call MISS and reaches the upstream; the identical second call HIT without reaching
// it, with identical content — streamed and not. And SDKs given the wrong base URL get the upstream's 404 and
// the relay's hint in its log.
import { createHash } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import OpenAIv4 from 'openai';
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

describe('a streamed OpenAI call without include_usage', () => {
  it('has token counts and a cost in its report, marked estimated; the request reaches the upstream unchanged', async () => {
    const openai = new OpenAI({ apiKey: 'sk-test-openai-key', baseURL: `${relay.url}/v1`, maxRetries: 0 });
    const params = {
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system' as const, content: 'You are terse.' },
        { role: 'user' as const, content: 'count my tokens please' },
      ],
      stream: true as const,
    };
    const { data: stream, response } = await openai.chat.completions.create(params).withResponse();
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('echo: count my tokens please');
    expect(JSON.parse(openaiUp.calls[0]!.body)).toEqual(params); // no stream_options added

    // OpenAI's documented count: 3 per message + role + content, 3 to prime the reply (o200k for gpt-4o-*).
    const count = (s: string) => o200k.countTokens(s);
    const input = 3 + (3 + count('system') + count('You are terse.')) + (3 + count('user') + count('count my tokens please'));
    const output = count('echo: count my tokens please');
    const report = await reportById(response.headers.get('x-relay-report-id'));
    expect(report.usage).toEqual({ inputTokens: input, outputTokens: output, totalTokens: input + output, estimated: true });
    expect(report.costUsd).toBeCloseTo((input * 0.15 + output * 0.6) / 1e6, 15);
    expect(report.response.body.usage).toBeUndefined(); // the stored answer is what the upstream sent

    // The same call again is a hit: its report has the same estimate, and saved what the first one cost.
    const again = await openai.chat.completions.create(params).withResponse();
    for await (const _ of again.data);
    expect(again.response.headers.get('x-relay-cache')).toBe('HIT');
    const hit = await reportById(again.response.headers.get('x-relay-report-id'));
    expect(hit).toMatchObject({ cacheHit: true, costUsd: 0, costSavedUsd: report.costUsd, originReportId: report.id });
    expect(hit.usage).toEqual(report.usage);
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

describe('SDKs pointed at the wrong base URL', () => {
  // What OpenAI answers a path it does not serve; the relay forwards it as it is, and says why in its log.
  const invalidUrl = { error: { message: 'Invalid URL (POST /v1/messages)', type: 'invalid_request_error', param: null, code: null } };
  const hints = () => relay.logs.filter((l) => l.includes('an Anthropic call (it sends anthropic-version) went to the default route'));

  it('gets the upstream’s 404 unchanged, and the relay logs once how to route Anthropic', async () => {
    openaiUp.failWith(404, invalidUrl);
    anthropicUp.failWith(404, { type: 'error', error: { type: 'not_found_error', message: 'model: nope' } });
    const params = { model: 'claude-3-5-haiku-20241022', max_tokens: 16, messages: [{ role: 'user' as const, content: 'misrouted' }] };
    // An OpenAI call refused with 404 and an Anthropic call refused on its named route are no such case.
    const openai = new OpenAI({ apiKey: 'sk-test-openai-key', baseURL: `${relay.url}/v1`, maxRetries: 0 });
    await expect(openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 404 });
    const named = new Anthropic({ apiKey: 'sk-ant-test-key', baseURL: `${relay.url}/anthropic`, maxRetries: 0 });
    await expect(named.messages.create(params)).rejects.toMatchObject({ status: 404 });
    expect(hints()).toHaveLength(0);

    const root = new Anthropic({ apiKey: 'sk-ant-test-key', baseURL: relay.url, maxRetries: 0 });
    for (let i = 0; i < 2; i++) {
      const err = (await root.messages.create(params).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.NotFoundError>;
      expect(err).toBeInstanceOf(Anthropic.NotFoundError);
      expect(err.error).toEqual(invalidUrl);
    }
    expect(openaiUp.calls.map((c) => c.path)).toEqual(['/v1/chat/completions', '/v1/messages', '/v1/messages']);
    const told = hints();
    expect(told).toHaveLength(1);
    const line = JSON.parse(told[0]!) as { level: number; upstream: string; path: string; msg: string };
    expect(line).toMatchObject({ level: 40, upstream: openaiUp.url, path: '/v1/messages' });
    expect(line.msg).toContain('{"routes":[{"prefix":"/anthropic","upstream":"https://api.anthropic.com"}]}');
    expect(line.msg).toContain('ANTHROPIC_BASE_URL=http://HOST:PORT/anthropic');
    // never the caller's key
    expect(told[0]).not.toContain('sk-ant-test-key');
  });

  it('openai without /v1: the upstream’s 404 unchanged, and the relay logs once which base URL to use', async () => {
    openaiUp.failWith(404, { error: { message: 'Invalid URL (POST /chat/completions)', type: 'invalid_request_error', param: null, code: null } });
    const told = () => relay.logs.filter((l) => l.includes('OpenAI\'s paths start with /v1'));
    const noV1 = new OpenAI({ apiKey: 'sk-test-openai-key', baseURL: relay.url, maxRetries: 0 });
    for (let i = 0; i < 2; i++) {
      const err = (await noV1.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'no v1' }] }).catch((e: unknown) => e)) as InstanceType<
        typeof OpenAI.NotFoundError
      >;
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect(err.error).toMatchObject({ message: 'Invalid URL (POST /chat/completions)' });
    }
    expect(openaiUp.calls.map((c) => c.path)).toEqual(['/chat/completions', '/chat/completions']);
    expect(told()).toHaveLength(1);
    expect(JSON.parse(told()[0]!)).toMatchObject({ level: 40, upstream: openaiUp.url, path: '/chat/completions' });
    expect(told()[0]).toContain('OPENAI_BASE_URL=http://HOST:PORT/v1');
    expect(told()[0]).not.toContain('sk-test-openai-key');
  });
});

describe("the relay's own errors reach the SDKs (provider-shaped)", () => {
  const TOKEN_MESSAGE =
    "Missing or invalid relay token: this relay has RELAY_API_TOKENS set, so send one of them as x-relay-token (or Authorization: Bearer on /api); this is the relay's token, not your provider API key";

  it('openai v4 and v6 read the message of a relay 401, a 504 offline miss and a 502', async () => {
    const guarded = await startRelay({ upstreamUrl: openaiUp.url, apiTokens: ['relay-secret'] });
    const offline = await startRelay({ upstreamUrl: openaiUp.url, offline: true, cacheScope: 'shared' });
    const down = await startRelay({ upstreamUrl: 'http://127.0.0.1:9' });
    try {
      for (const [name, Client] of [['openai v4', OpenAIv4], ['openai v6', OpenAI]] as const) {
        // Both majors take the same options and call; typed as the current one for the call below.
        const client = (base: string) => new Client({ apiKey: 'sk-test', baseURL: `${base}/v1`, maxRetries: 0 }) as unknown as OpenAI;
        const params = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: `errors ${name}` }] };

        const denied = await client(guarded.url).chat.completions.create(params).catch((e: unknown) => e);
        expect(denied, name).toBeInstanceOf(Client.APIError);
        const d = denied as InstanceType<typeof Client.APIError>;
        expect(d.status).toBe(401);
        expect((d.error as any).message).toBe(TOKEN_MESSAGE);
        expect(d.message).toBe(`401 ${TOKEN_MESSAGE}`);
        expect(d.code).toBe('RELAY_ERR_UNAUTHORIZED');

        const missed = (await client(offline.url).chat.completions.create(params).catch((e: unknown) => e)) as InstanceType<typeof Client.APIError>;
        expect(missed.status).toBe(504);
        expect((missed.error as any).message).toBe('No cached answer in namespace "shared", and the relay is offline (RELAY_OFFLINE).');
        expect(missed.code).toBe('RELAY_ERR_CACHE_ONLY_MISS');

        const unreachable = (await client(down.url).chat.completions.create(params).catch((e: unknown) => e)) as InstanceType<typeof Client.APIError>;
        expect(unreachable.status).toBe(502);
        expect((unreachable.error as any).message).toBe('The upstream http://127.0.0.1:9 could not be reached (ECONNREFUSED)');
      }
      expect(openaiUp.calls).toHaveLength(0);
    } finally {
      await Promise.all([guarded.close(), offline.close(), down.close()]);
    }
  });

  it('the openai SDK does not retry an offline miss (it would miss again)', async () => {
    const offline = await startRelay({ upstreamUrl: openaiUp.url, offline: true });
    try {
      let attempts = 0;
      const counting: typeof fetch = (input, init) => {
        attempts++;
        return fetch(input, init);
      };
      const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${offline.url}/v1`, maxRetries: 2, fetch: counting });
      const err = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'once' }] }).catch((e: unknown) => e);
      expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(504);
      expect(attempts).toBe(1);
    } finally {
      await offline.close();
    }
  });

  it('the Anthropic SDK reads the message of a relay 401 on a named route, in the Anthropic shape', async () => {
    const guarded = await startRelay({ upstreamUrl: openaiUp.url, routes: [{ prefix: '/anthropic', upstream: anthropicUp.url }], apiTokens: ['relay-secret'] });
    try {
      const client = new Anthropic({ apiKey: 'sk-ant-test', baseURL: `${guarded.url}/anthropic`, maxRetries: 0 });
      const err = await client.messages
        .create({ model: 'claude-3-5-haiku-20241022', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
      const e = err as InstanceType<typeof Anthropic.APIError>;
      expect(e.status).toBe(401);
      expect(e.error).toEqual({
        type: 'error',
        error: { type: 'authentication_error', message: TOKEN_MESSAGE },
        statusCode: 401,
        code: 'RELAY_ERR_UNAUTHORIZED',
        message: TOKEN_MESSAGE,
      });
      expect(e.message).toBe(`401 ${TOKEN_MESSAGE}`);
      expect(anthropicUp.calls).toHaveLength(0);
    } finally {
      await guarded.close();
    }
  });

  it('the Anthropic SDK reads the message of an offline miss and of an unreachable upstream on a named route, and does not retry the miss', async () => {
    const offline = await startRelay({ upstreamUrl: openaiUp.url, routes: [{ prefix: '/anthropic', upstream: anthropicUp.url }], offline: true });
    const down = await startRelay({ upstreamUrl: openaiUp.url, routes: [{ prefix: '/anthropic', upstream: 'http://127.0.0.1:9' }] });
    try {
      let attempts = 0;
      const counting: typeof fetch = (input, init) => {
        attempts++;
        return fetch(input, init);
      };
      const params = { model: 'claude-3-5-haiku-20241022', max_tokens: 16, messages: [{ role: 'user' as const, content: 'offline?' }] };
      const missed = await new Anthropic({ apiKey: 'sk-ant-ci', baseURL: `${offline.url}/anthropic`, maxRetries: 2, fetch: counting })
        .messages.create(params)
        .catch((e: unknown) => e);
      expect(missed).toBeInstanceOf(Anthropic.APIError);
      const m = missed as InstanceType<typeof Anthropic.APIError>;
      expect(m.status).toBe(504);
      expect(attempts).toBe(1);
      // the namespace of the SDK's credential (this SDK sends its key as a bearer token)
      const ns = `cred-${createHash('sha256').update('authorization:Bearer sk-ant-ci').digest('hex').slice(0, 32)}`;
      const message =
        `No cached answer in namespace "${ns}", and the relay is offline (RELAY_OFFLINE). With RELAY_CACHE_SCOPE=credential, ` +
        'entries are kept per upstream credential, so a call with another API key looks in another namespace: record and ' +
        'replay with RELAY_CACHE_SCOPE=shared (or send the same x-relay-cache-namespace) to share entries across keys.';
      expect(m.error).toEqual({
        type: 'error',
        error: { type: 'timeout_error', message },
        statusCode: 504,
        code: 'RELAY_ERR_CACHE_ONLY_MISS',
        message,
      });
      expect(m.message).toBe(`504 ${message}`);

      const unreachable = (await new Anthropic({ apiKey: 'sk-ant-ci', baseURL: `${down.url}/anthropic`, maxRetries: 0 })
        .messages.create(params)
        .catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
      expect(unreachable).toBeInstanceOf(Anthropic.InternalServerError);
      expect(unreachable.status).toBe(502);
      expect((unreachable.error as any).error).toEqual({ type: 'api_error', message: 'The upstream http://127.0.0.1:9 could not be reached (ECONNREFUSED)' });
      expect(anthropicUp.calls).toHaveLength(0);
    } finally {
      await Promise.all([offline.close(), down.close()]);
    }
  });

  it('a call on a named route to anthropic.com gets the Anthropic shape even without anthropic-version (a relay 401 before any upstream call)', async () => {
    const guarded = await startRelay({ upstreamUrl: openaiUp.url, routes: [{ prefix: '/anthropic', upstream: 'https://api.anthropic.com' }], apiTokens: ['relay-secret'] });
    try {
      const res = await fetch(`${guarded.url}/anthropic/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-curl' },
        body: JSON.stringify({ model: 'claude-3-5-haiku-20241022', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({
        type: 'error',
        error: { type: 'authentication_error', message: TOKEN_MESSAGE },
        statusCode: 401,
        code: 'RELAY_ERR_UNAUTHORIZED',
        message: TOKEN_MESSAGE,
      });
      // the default route (OpenAI) keeps OpenAI's shape
      const openai = await fetch(`${guarded.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(await openai.json()).toEqual({
        error: { message: TOKEN_MESSAGE, type: 'authentication_error', code: 'RELAY_ERR_UNAUTHORIZED', param: null },
        statusCode: 401,
        code: 'RELAY_ERR_UNAUTHORIZED',
        message: TOKEN_MESSAGE,
      });
    } finally {
      await guarded.close();
    }
  });
});
