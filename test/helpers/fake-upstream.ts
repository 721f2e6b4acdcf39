// A local fake LLM provider on port 0: OpenAI chat completions (JSON and SSE) and Anthropic messages
// (JSON and SSE), with knobs for slow, failing and dropped answers. It counts every call and keeps what
// it received, so tests can assert what reached the upstream.
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedCall {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface FakeUpstream {
  url: string;
  calls: ReceivedCall[];
  /** answer the next calls with this status and body instead of the normal answer */
  failWith(status: number, body: unknown): void;
  /** wait this long before sending headers */
  delayMs: number;
  /** for SSE: wait this long between events */
  eventGapMs: number;
  /** for SSE: drop the connection after this many events (undefined: never) */
  dropAfterEvents: number | undefined;
  /** for SSE: send an error event after this many events, then end the stream cleanly */
  errorEventAfter: number | undefined;
  /** answers whose connection closed before the answer was complete (the relay aborted them) */
  closedEarly: number;
  reset(): void;
  close(): Promise<void>;
}

export function chatCompletion(content: string, model = 'gpt-4o-mini') {
  return {
    id: 'chatcmpl-fake-1',
    object: 'chat.completion',
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
  };
}

function lastUserText(body: any): string {
  const messages = Array.isArray(body?.messages) ? body.messages : [];
  const last = messages[messages.length - 1];
  return typeof last?.content === 'string' ? last.content : JSON.stringify(last?.content ?? '');
}

export async function startFakeUpstream(): Promise<FakeUpstream> {
  let failure: { status: number; body: unknown } | undefined;
  const state = {
    calls: [] as ReceivedCall[],
    delayMs: 0,
    eventGapMs: 0,
    dropAfterEvents: undefined as number | undefined,
    errorEventAfter: undefined as number | undefined,
    closedEarly: 0,
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  async function handle(req: IncomingMessage, res: ServerResponse, raw: string): Promise<void> {
    state.calls.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: raw });
    if (state.delayMs > 0) await sleep(state.delayMs);
    if (failure) {
      res.writeHead(failure.status, { 'content-type': 'application/json' }).end(JSON.stringify(failure.body));
      return;
    }
    let body: any = {};
    try {
      body = raw ? JSON.parse(raw) : {};
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"bad json"}}');
      return;
    }
    const text = `echo: ${lastUserText(body)}`;
    const path = (req.url ?? '').split('?')[0];
    if (path?.endsWith('/chat/completions')) {
      if (body.stream) return streamOpenAI(res, body, text);
      res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req_fake' });
      res.end(JSON.stringify(chatCompletion(text, body.model)));
      return;
    }
    if (path?.endsWith('/messages')) {
      if (body.stream) return streamAnthropic(res, body, text);
      res.writeHead(200, { 'content-type': 'application/json', 'request-id': 'req_fake' });
      res.end(JSON.stringify(anthropicMessage(text, body.model)));
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `no route ${path}` } }));
  }

  async function sendEvents(res: ServerResponse, events: string[]): Promise<void> {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let sent = 0;
    for (const e of events) {
      if (res.destroyed) return;
      if (state.dropAfterEvents !== undefined && sent >= state.dropAfterEvents) {
        res.socket?.destroy();
        return;
      }
      if (state.errorEventAfter !== undefined && sent >= state.errorEventAfter) {
        res.end('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n');
        return;
      }
      res.write(e);
      sent++;
      if (state.eventGapMs > 0) await sleep(state.eventGapMs);
    }
    res.end();
  }

  function streamOpenAI(res: ServerResponse, body: any, text: string): Promise<void> {
    const model = body.model ?? 'gpt-4o-mini';
    const base = { id: 'chatcmpl-fake-s', object: 'chat.completion.chunk', created: 1_700_000_000, model };
    const words = text.split(/(?<= )/);
    const events = [
      { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
      ...words.map((w) => ({ ...base, choices: [{ index: 0, delta: { content: w }, finish_reason: null }] })),
      { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
      ...(body.stream_options?.include_usage
        ? [{ ...base, choices: [], usage: { prompt_tokens: 12, completion_tokens: words.length, total_tokens: 12 + words.length } }]
        : []),
    ].map((e) => `data: ${JSON.stringify(e)}\n\n`);
    return sendEvents(res, [...events, 'data: [DONE]\n\n']);
  }

  function streamAnthropic(res: ServerResponse, body: any, text: string): Promise<void> {
    const msg = anthropicMessage('', body.model);
    const ev = (type: string, data: unknown) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
    const words = text.split(/(?<= )/);
    return sendEvents(res, [
      ev('message_start', { type: 'message_start', message: { ...msg, content: [], stop_reason: null, usage: { input_tokens: 10, output_tokens: 1 } } }),
      ev('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
      ...words.map((w) => ev('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: w } })),
      ev('content_block_stop', { type: 'content_block_stop', index: 0 }),
      ev('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: words.length } }),
      ev('message_stop', { type: 'message_stop' }),
    ]);
  }

  const server: Server = createServer((req, res) => {
    res.once('close', () => {
      if (!res.writableFinished) state.closedEarly++;
    });
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks).toString('utf8')).catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    failWith(status: number, body: unknown) {
      failure = { status, body };
    },
    reset() {
      failure = undefined;
      state.calls.length = 0;
      state.delayMs = 0;
      state.eventGapMs = 0;
      state.dropAfterEvents = undefined;
      state.errorEventAfter = undefined;
      state.closedEarly = 0;
    },
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

export function anthropicMessage(text: string, model = 'claude-3-5-haiku-20241022') {
  return {
    id: 'msg_fake_1',
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 5 },
  };
}
