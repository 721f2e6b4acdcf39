import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assembleStream, mayReportError, parseSse, readStream, sseOutcome } from '../../../src/core/sse.js';
import { typedEvents } from '../../../src/core/sse-assemble.js';

/** An SSE text as the provider writes it: one `data:` line per event, a blank line after each. */
function openAiSse(chunks: unknown[], done = true): string {
  return chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('') + (done ? 'data: [DONE]\n\n' : '');
}

function anthropicSse(events: Array<Record<string, unknown> & { type: string }>): string {
  return events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('');
}

const base = { id: 'chatcmpl-9', object: 'chat.completion.chunk', created: 1718000000, model: 'gpt-4o-mini-2024-07-18', system_fingerprint: 'fp_44709d6fcb' };

const OPENAI_TEXT = openAiSse([
  { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }], usage: null },
  { ...base, choices: [{ index: 0, delta: { content: 'Hello' }, logprobs: null, finish_reason: null }], usage: null },
  { ...base, choices: [{ index: 0, delta: { content: ', world' }, logprobs: null, finish_reason: null }], usage: null },
  { ...base, choices: [{ index: 0, delta: { content: '!' }, logprobs: null, finish_reason: null }], usage: null },
  { ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }], usage: null },
  {
    ...base,
    choices: [],
    usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16, prompt_tokens_details: { cached_tokens: 0 } },
  },
]);

const OPENAI_TOOLS = openAiSse([
  { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }] }, finish_reason: null }] },
  { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }, finish_reason: null }] },
  { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }, finish_reason: null }] },
  { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '' } }] }, finish_reason: null }] },
  { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 1, function: { arguments: '{"tz":"Europe/' } }] }, finish_reason: null }] },
  { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 1, function: { arguments: 'Paris"}' } }] }, finish_reason: null }] },
  { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
]);

const message = {
  id: 'msg_01XFDUDYJgAACzvnptvVoYEL',
  type: 'message',
  role: 'assistant',
  model: 'claude-sonnet-4-20250514',
  content: [],
  stop_reason: null,
  stop_sequence: null,
  usage: { input_tokens: 25, cache_creation_input_tokens: 0, cache_read_input_tokens: 5, output_tokens: 1 },
};

const ANTHROPIC_TEXT = anthropicSse([
  { type: 'message_start', message },
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'ping' },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: ' there!' } },
  { type: 'content_block_stop', index: 0 },
  { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 15 } },
  { type: 'message_stop' },
]);

const ANTHROPIC_TOOL = anthropicSse([
  { type: 'message_start', message },
  { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'The user wants ' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'the weather.' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'EqQBCgIYAhIM' } },
  { type: 'content_block_stop', index: 0 },
  { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: {} } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '' } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"location": "San Fra' } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: 'ncisco, CA", "unit": "celsius"}' } },
  { type: 'content_block_stop', index: 1 },
  { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'toolu_02', name: 'get_time', input: {} } },
  { type: 'content_block_stop', index: 2 },
  {
    type: 'message_delta',
    delta: { stop_reason: 'tool_use', stop_sequence: null },
    usage: { input_tokens: null, cache_read_input_tokens: null, output_tokens: 89 },
  },
  { type: 'message_stop' },
]);

describe('parseSse', () => {
  it('reads event names, ids, comments and multi-line data', () => {
    const text = ': keep-alive\n\nevent: note\nid: 7\ndata: first line\ndata: second line\n\ndata: {"a":1}\n\n';
    expect(parseSse(text)).toEqual([
      { event: 'note', id: '7', data: 'first line\nsecond line' },
      { data: '{"a":1}' },
    ]);
  });

  it('reads \\r\\n line endings like \\n', () => {
    expect(parseSse(ANTHROPIC_TEXT.replaceAll('\n', '\r\n'))).toEqual(parseSse(ANTHROPIC_TEXT));
    expect(parseSse('event: a\r\ndata: x\r\n\r\ndata: y\r\n\r\n')).toEqual([{ event: 'a', data: 'x' }, { data: 'y' }]);
  });

  it('drops an event whose blank line never came', () => {
    expect(parseSse('data: one\n\ndata: {"cut": tr')).toEqual([{ data: 'one' }]);
  });

  it('returns nothing for an empty text', () => {
    expect(parseSse('')).toEqual([]);
  });
});

describe('typedEvents', () => {
  it("reads an event's data as JSON.parse would, keeping objects only (and parses nothing that cannot be one)", () => {
    const reference = (data: string): unknown => {
      try {
        const v: unknown = JSON.parse(data);
        return typeof v === 'object' && v !== null && !Array.isArray(v) ? v : undefined;
      } catch {
        return undefined;
      }
    };
    const space = fc.stringMatching(/^[ \t\r\n]{0,3}$/);
    const data = fc.oneof(
      fc.json(),
      fc.string(),
      fc.tuple(space, fc.json(), space).map(([a, j, b]) => a + j + b),
      fc.constantFrom('[DONE]', ' [DONE]', '{', '{"a":1', '\t{"a":[1]}\r', '\u00a0{"a":1}', 'null', '[{"a":1}]'),
    );
    fc.assert(
      fc.property(data, (d) => {
        expect(typedEvents([{ data: d }])[0]!.data).toEqual(reference(d));
      }),
      { numRuns: 500 },
    );
  });
});

describe('mayReportError', () => {
  // events of every kind the providers send, errors among them, with prose that talks about errors
  const prose = fc.oneof(fc.string(), fc.constantFrom('the error is on line 3', 'an "error" key', 'event: error', 'Error:\n', 'response.failed?', '\\"error\\"'));
  const data = fc.oneof(
    prose.map((content) => ({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] })),
    prose.map((message) => ({ error: { message, type: 'server_error', code: null } })),
    fc.constantFrom('error', 'response.failed', 'response.completed', 'message_stop', 'content_block_delta').map((type) => ({ type })),
    prose.map((text) => ({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } })),
    fc.constant('[DONE]'),
  );
  const event = fc.record({
    name: fc.option(fc.constantFrom('error', 'response.failed', 'message_stop', 'ping', 'errors'), { nil: undefined }),
    data,
    space: fc.boolean(),
  });
  const stream = fc.tuple(fc.array(event, { maxLength: 6 }), fc.constantFrom('\n', '\r\n', '\r')).map(([events, nl]) =>
    events
      .map(({ name, data: d, space }) => {
        const sep = space ? ': ' : ':';
        return `${name === undefined ? '' : `event${sep}${name}${nl}`}data${sep}${typeof d === 'string' ? d : JSON.stringify(d)}${nl}${nl}`;
      })
      .join(''),
  );

  it('is true of every stream sseOutcome finds an error in', () => {
    fc.assert(
      fc.property(stream, (text) => {
        if (sseOutcome(parseSse(text)).error) expect(mayReportError(text)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('is false of an answer that only talks about errors, so it is not parsed again', () => {
    const chunk = (content: string) => ({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] });
    const text = openAiSse([chunk('The "error" says: event: error\n'), chunk('TypeError: x is undefined (the response failed? no)')]);
    expect(text).toContain('error');
    expect(mayReportError(text)).toBe(false);
    expect(sseOutcome(parseSse(text)).error).toBe(false);
  });
});

describe('readStream', () => {
  it('reads a stream once into what assembleStream and sseOutcome say of it', () => {
    const error = 'data: {"error":{"message":"The server had an error","type":"server_error","code":null}}\n\n';
    const cut = OPENAI_TEXT.slice(0, OPENAI_TEXT.indexOf('data: [DONE]'));
    for (const text of [OPENAI_TEXT, OPENAI_TOOLS, ANTHROPIC_TEXT, ANTHROPIC_TOOL, error, cut, '']) {
      const events = parseSse(text);
      expect(readStream(events)).toEqual({ body: assembleStream(events), ...sseOutcome(events) });
    }
    expect(readStream(parseSse(ANTHROPIC_TEXT)).body).toMatchObject({ type: 'message', role: 'assistant' });
    expect(readStream(parseSse(error))).toMatchObject({ terminal: false, error: true });
  });
});

describe('sseOutcome', () => {
  it('sees OpenAI [DONE] as the end', () => {
    expect(sseOutcome(parseSse(OPENAI_TEXT))).toEqual({ terminal: true, error: false });
  });

  it('sees Anthropic message_stop as the end', () => {
    expect(sseOutcome(parseSse(ANTHROPIC_TEXT))).toEqual({ terminal: true, error: false });
    // the event name alone is enough
    expect(sseOutcome([{ event: 'message_stop', data: '{}' }])).toEqual({ terminal: true, error: false });
  });

  it('sees response.completed as the end', () => {
    const text = 'event: response.completed\ndata: {"type":"response.completed","response":{"id":"resp_1","status":"completed"}}\n\n';
    expect(sseOutcome(parseSse(text))).toEqual({ terminal: true, error: false });
  });

  it('reports a truncated stream as not terminal', () => {
    const cut = OPENAI_TEXT.slice(0, OPENAI_TEXT.indexOf('data: [DONE]'));
    expect(sseOutcome(parseSse(cut))).toEqual({ terminal: false, error: false });
    const anthropicCut = ANTHROPIC_TEXT.slice(0, ANTHROPIC_TEXT.indexOf('event: message_delta'));
    expect(sseOutcome(parseSse(anthropicCut))).toEqual({ terminal: false, error: false });
  });

  it('reports an Anthropic error event', () => {
    const text =
      ANTHROPIC_TEXT.slice(0, ANTHROPIC_TEXT.indexOf('event: content_block_stop')) +
      'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n';
    expect(sseOutcome(parseSse(text))).toEqual({ terminal: false, error: true });
  });

  it('reports an OpenAI error chunk and a failed response', () => {
    const chunk = 'data: {"error":{"message":"The server had an error","type":"server_error","code":null}}\n\n';
    expect(sseOutcome(parseSse(chunk))).toEqual({ terminal: false, error: true });
    const failed = 'event: response.failed\ndata: {"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"code":"server_error"}}}\n\n';
    expect(sseOutcome(parseSse(failed))).toEqual({ terminal: true, error: true });
  });

  it('reports a stream with no events as neither ended nor failed', () => {
    expect(sseOutcome(parseSse(': nothing but a comment\n\n'))).toEqual({ terminal: false, error: false });
    expect(sseOutcome([])).toEqual({ terminal: false, error: false });
  });
});

describe('assembleStream', () => {
  it('rebuilds an OpenAI chat completion with its usage', () => {
    expect(assembleStream(parseSse(OPENAI_TEXT))).toEqual({
      id: 'chatcmpl-9',
      object: 'chat.completion',
      created: 1718000000,
      model: 'gpt-4o-mini-2024-07-18',
      system_fingerprint: 'fp_44709d6fcb',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello, world!', refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16, prompt_tokens_details: { cached_tokens: 0 } },
    });
  });

  it('merges OpenAI tool calls by index, with null content', () => {
    expect(assembleStream(parseSse(OPENAI_TOOLS))).toEqual({
      id: 'chatcmpl-9',
      object: 'chat.completion',
      created: 1718000000,
      model: 'gpt-4o-mini-2024-07-18',
      system_fingerprint: 'fp_44709d6fcb',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
              { id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '{"tz":"Europe/Paris"}' } },
            ],
          },
          finish_reason: 'tool_calls',
        },
      ],
    });
  });

  it('keeps choices apart and sorted by index (n > 1)', () => {
    const chunk = (index: number, content: string, finish: string | null = null) => ({ ...base, choices: [{ index, delta: { content }, finish_reason: finish }] });
    const body = assembleStream(parseSse(openAiSse([chunk(1, 'B'), chunk(0, 'A'), chunk(1, 'b', 'stop'), chunk(0, 'a', 'length')]))) as {
      choices: unknown[];
    };
    expect(body.choices).toEqual([
      { index: 0, message: { role: 'assistant', content: 'Aa' }, finish_reason: 'length' },
      { index: 1, message: { role: 'assistant', content: 'Bb' }, finish_reason: 'stop' },
    ]);
  });

  it('rebuilds a legacy text completion', () => {
    const legacy = { id: 'cmpl-1', object: 'text_completion', created: 1718000000, model: 'gpt-3.5-turbo-instruct' };
    const text = openAiSse([
      { ...legacy, choices: [{ text: 'Once', index: 0, logprobs: null, finish_reason: null }] },
      { ...legacy, choices: [{ text: ' upon a time', index: 0, logprobs: null, finish_reason: 'length' }] },
    ]);
    expect(assembleStream(parseSse(text))).toEqual({
      ...legacy,
      choices: [{ index: 0, text: 'Once upon a time', logprobs: null, finish_reason: 'length' }],
    });
  });

  it('rebuilds an Anthropic message, keeping input and cache tokens from message_start', () => {
    expect(assembleStream(parseSse(ANTHROPIC_TEXT))).toEqual({
      ...message,
      content: [{ type: 'text', text: 'Hello there!' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 25, cache_creation_input_tokens: 0, cache_read_input_tokens: 5, output_tokens: 15 },
    });
  });

  it('rebuilds Anthropic thinking and tool_use blocks from their deltas', () => {
    expect(assembleStream(parseSse(ANTHROPIC_TOOL))).toEqual({
      ...message,
      content: [
        { type: 'thinking', thinking: 'The user wants the weather.', signature: 'EqQBCgIYAhIM' },
        { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { location: 'San Francisco, CA', unit: 'celsius' } },
        { type: 'tool_use', id: 'toolu_02', name: 'get_time', input: {} },
      ],
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: { input_tokens: 25, cache_creation_input_tokens: 0, cache_read_input_tokens: 5, output_tokens: 89 },
    });
  });

  it('assembles the same from \\r\\n line endings', () => {
    expect(assembleStream(parseSse(ANTHROPIC_TOOL.replaceAll('\n', '\r\n')))).toEqual(assembleStream(parseSse(ANTHROPIC_TOOL)));
    expect(assembleStream(parseSse(OPENAI_TEXT.replaceAll('\n', '\r\n')))).toEqual(assembleStream(parseSse(OPENAI_TEXT)));
  });

  it('takes the response of response.completed', () => {
    const response = { id: 'resp_1', object: 'response', status: 'completed', output: [], usage: { input_tokens: 8, output_tokens: 2, total_tokens: 10 } };
    const text = [
      `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', response: { ...response, status: 'in_progress', usage: null } })}\n\n`,
      `event: response.output_text.delta\ndata: ${JSON.stringify({ type: 'response.output_text.delta', delta: 'Hi' })}\n\n`,
      `event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', response })}\n\n`,
    ].join('');
    expect(assembleStream(parseSse(text))).toEqual(response);
  });

  it('skips malformed JSON lines without throwing', () => {
    const lines = OPENAI_TEXT.split('\n\n');
    const text = [lines[0], 'data: {"choices": [{"index": 0, "delta": {"content": "lost', 'data: not json at all', ...lines.slice(1)].join('\n\n');
    const events = parseSse(text);
    expect(sseOutcome(events)).toEqual({ terminal: true, error: false });
    expect(assembleStream(events)).toEqual(assembleStream(parseSse(OPENAI_TEXT)));
    expect(() => assembleStream(parseSse(anthropicSse([{ type: 'message_start', message: 'oops' }, { type: 'message_stop' }])))).not.toThrow();
  });

  it('does not let a __proto__ key from upstream reach an object it builds', () => {
    const text =
      `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message })}\n\n` +
      'event: message_delta\ndata: {"type":"message_delta","delta":{"__proto__":{"polluted":true},"stop_reason":"end_turn"},"usage":{"output_tokens":3}}\n\n';
    const body = assembleStream(parseSse(text)) as Record<string, unknown>;
    expect(Object.getPrototypeOf(body)).toBe(Object.prototype);
    expect(body.polluted).toBeUndefined();
    expect(body.stop_reason).toBe('end_turn');
  });

  it('answers null for an unknown format or no events', () => {
    expect(assembleStream([])).toBeNull();
    expect(assembleStream(parseSse('data: [DONE]\n\n'))).toBeNull();
    expect(assembleStream(parseSse('data: {"hello":"world"}\n\ndata: plain text\n\n'))).toBeNull();
  });
});
