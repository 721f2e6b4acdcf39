// Rebuilds, from the events of a streamed answer, the JSON body the client would have got without
// `stream: true`. The cache keeps it next to the SSE text (so /api/cache retrieve answers a body), and the
// report derives tokens and cost from it with the same code as for a plain JSON answer.
// Upstream data is not trusted to be well formed: a data line that is not JSON is skipped, a field of the
// wrong type is ignored, and nothing here throws.
import type { SseEvent } from './sse.js';

type Json = Record<string, unknown>;

/** An event with its data parsed once and its type read from either place. */
export interface Typed {
  type: string | undefined;
  data: Json | undefined;
}

function obj(v: unknown): Json | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : undefined;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The event's data as a JSON object, or undefined (`[DONE]`, bad JSON, a scalar). Data that does not open
 * with `{` is no object and is not parsed: a `JSON.parse` that fails builds a SyntaxError with its stack,
 * ~7 µs for the `[DONE]` that ends every OpenAI stream, as much as parsing ten of its chunks.
 */
function eventJson(event: SseEvent): Json | undefined {
  const data = event.data;
  let i = 0;
  let c = data.charCodeAt(0);
  // (JSON's whitespace: space, tab, LF, CR)
  while (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) c = data.charCodeAt(++i);
  return c === 0x7b /* { */ ? obj(parseJson(data)) : undefined;
}

/** Anthropic and the responses API name each event twice (event line and data `type`); either will do. */
function eventType(event: SseEvent, data: Json | undefined): string | undefined {
  return str(data?.type) ?? event.event;
}

/** Every event's data parsed, once, for assembleTyped and the stream's outcome. */
export function typedEvents(events: SseEvent[]): Typed[] {
  return events.map((event): Typed => {
    const data = eventJson(event);
    return { type: eventType(event, data), data };
  });
}

export function assembleStream(events: SseEvent[]): unknown | null {
  return assembleTyped(typedEvents(events));
}

export function assembleTyped(typed: Typed[]): unknown | null {
  if (typed.some(({ type }) => type === 'message_start')) return assembleAnthropic(typed);
  if (typed.some(({ type }) => type?.startsWith('response.'))) return assembleResponses(typed);
  for (const object of ['chat.completion.chunk', 'text_completion'] as const) {
    // Azure opens with a chunk of prompt_filter_results and no object: only the real chunks count.
    const chunks = typed.flatMap(({ data }) => (data?.object === object ? [data] : []));
    if (chunks.length > 0) return assembleOpenAi(chunks, object === 'text_completion' ? object : 'chat.completion');
  }
  return null;
}

/** Copies a field onto an object built here; `__proto__` from upstream JSON would swap its prototype. */
function put(target: Json, key: string, value: unknown): void {
  if (key !== '__proto__') target[key] = value;
}

// ---- OpenAI chat completions and legacy completions ----

interface ToolCallParts {
  id?: string;
  type?: string;
  name?: string;
  args: string;
}

interface ChoiceParts {
  role?: string;
  content?: string;
  refusal?: string | null;
  hasRefusal: boolean;
  text: string;
  tools: Map<number, ToolCallParts>;
  logprobs?: Json | null;
  finish: unknown;
}

/** Streamed logprobs arrive in slices; each array field (content, refusal, tokens, …) is concatenated. */
function mergeLogprobs(prev: Json | null | undefined, next: unknown): Json | null {
  const add = obj(next);
  if (!add) return prev ?? null;
  const out: Json = { ...(prev ?? {}) };
  for (const [key, value] of Object.entries(add)) {
    const before = out[key];
    if (Array.isArray(before) && Array.isArray(value)) put(out, key, [...before, ...value]);
    else if (value !== null || !(key in out)) put(out, key, Array.isArray(value) ? [...value] : value);
  }
  return out;
}

function assembleOpenAi(chunks: Json[], object: 'chat.completion' | 'text_completion'): Json {
  const head: Json = {};
  const choices = new Map<number, ChoiceParts>();
  let usage: Json | undefined;

  for (const chunk of chunks) {
    for (const key of ['id', 'created', 'model'] as const) if (head[key] === undefined && chunk[key] !== undefined) head[key] = chunk[key];
    // Optional fields appear only when the provider sends them; a later real value beats an early null.
    for (const key of ['system_fingerprint', 'service_tier'] as const) {
      if (chunk[key] !== undefined && (head[key] === undefined || head[key] === null)) head[key] = chunk[key];
    }
    usage = obj(chunk.usage) ?? usage;
    if (!Array.isArray(chunk.choices)) continue;

    for (const raw of chunk.choices) {
      const choice = obj(raw);
      const index = num(choice?.index);
      if (!choice || index === undefined) continue;
      let parts = choices.get(index);
      if (!parts) choices.set(index, (parts = { hasRefusal: false, text: '', tools: new Map(), finish: null }));
      if (choice.finish_reason !== undefined && choice.finish_reason !== null) parts.finish = choice.finish_reason;
      if ('logprobs' in choice) parts.logprobs = mergeLogprobs(parts.logprobs, choice.logprobs);
      parts.text += str(choice.text) ?? '';

      const delta = obj(choice.delta);
      if (!delta) continue;
      parts.role ??= str(delta.role);
      const content = str(delta.content);
      if (content !== undefined) parts.content = (parts.content ?? '') + content;
      if ('refusal' in delta) {
        parts.hasRefusal = true;
        const refusal = str(delta.refusal);
        if (refusal !== undefined) parts.refusal = (parts.refusal ?? '') + refusal;
      }
      if (Array.isArray(delta.tool_calls)) mergeToolCalls(parts.tools, delta.tool_calls);
    }
  }

  // (Object.assign, not a spread followed by a key the head lacks: V8 builds that by a slow path)
  const out: Json = Object.assign({}, head, { object });
  out.choices = [...choices.entries()]
    .sort(([a], [b]) => a - b)
    .map(([index, parts]) => (object === 'chat.completion' ? chatChoice(index, parts) : textChoice(index, parts)));
  if (usage) out.usage = usage;
  return out;
}

function mergeToolCalls(tools: Map<number, ToolCallParts>, deltas: unknown[]): void {
  for (const raw of deltas) {
    const call = obj(raw);
    const index = num(call?.index);
    if (!call || index === undefined) continue;
    let parts = tools.get(index);
    if (!parts) tools.set(index, (parts = { args: '' }));
    const fn = obj(call.function);
    // id, type and name come once, in the first delta of a call; only the arguments are streamed.
    parts.id ||= str(call.id);
    parts.type ||= str(call.type);
    parts.name ||= str(fn?.name);
    parts.args += str(fn?.arguments) ?? '';
  }
}

function chatChoice(index: number, parts: ChoiceParts): Json {
  const toolCalls = [...parts.tools.entries()]
    .sort(([a], [b]) => a - b)
    .map(([, call]) => ({ id: call.id ?? '', type: call.type ?? 'function', function: { name: call.name ?? '', arguments: call.args } }));
  // As in a non-streamed answer: a message that only calls tools has content null, not ''.
  const content = parts.content === undefined || (parts.content === '' && toolCalls.length > 0) ? null : parts.content;
  const message: Json = { role: parts.role ?? 'assistant', content };
  if (parts.hasRefusal) message.refusal = parts.refusal ?? null;
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  const choice: Json = { index, message };
  if (parts.logprobs !== undefined) choice.logprobs = parts.logprobs;
  choice.finish_reason = parts.finish;
  return choice;
}

function textChoice(index: number, parts: ChoiceParts): Json {
  return { index, text: parts.text, logprobs: parts.logprobs ?? null, finish_reason: parts.finish };
}

// ---- Anthropic messages ----

function assembleAnthropic(events: Typed[]): Json | null {
  let message: Json | undefined;
  const blocks: Json[] = [];
  // tool_use (and server_tool_use) input arrives as pieces of a JSON text, parsed once the block is complete.
  const partialJson = new Map<number, string>();

  const finishBlock = (index: number): void => {
    const json = partialJson.get(index);
    const block = blocks[index];
    if (json === undefined || !block) return;
    partialJson.delete(index);
    if (json.trim() === '') block.input = obj(block.input) ?? {};
    else {
      const input = parseJson(json);
      if (input !== undefined) block.input = input;
    }
  };

  for (const { type, data } of events) {
    if (!data) continue;
    if (type === 'message_start') {
      const start = obj(data.message);
      if (!start) continue;
      message = { ...start, content: [] };
      const usage = obj(start.usage);
      if (usage) message.usage = { ...usage };
      continue;
    }
    if (!message) continue;
    const index = num(data.index);

    if (type === 'content_block_start' && index !== undefined) {
      const block = obj(data.content_block);
      if (block) blocks[index] = { ...block };
    } else if (type === 'content_block_delta' && index !== undefined) {
      const block = blocks[index];
      const delta = obj(data.delta);
      if (!block || !delta) continue;
      if (delta.type === 'text_delta') block.text = (str(block.text) ?? '') + (str(delta.text) ?? '');
      else if (delta.type === 'thinking_delta') block.thinking = (str(block.thinking) ?? '') + (str(delta.thinking) ?? '');
      else if (delta.type === 'signature_delta') block.signature = str(delta.signature) ?? block.signature;
      else if (delta.type === 'input_json_delta') partialJson.set(index, (partialJson.get(index) ?? '') + (str(delta.partial_json) ?? ''));
      else if (delta.type === 'citations_delta' && delta.citation !== undefined) {
        block.citations = [...(Array.isArray(block.citations) ? block.citations : []), delta.citation];
      }
    } else if (type === 'content_block_stop' && index !== undefined) {
      finishBlock(index);
    } else if (type === 'message_delta') {
      const delta = obj(data.delta);
      for (const [key, value] of Object.entries(delta ?? {})) put(message, key, value);
      // output_tokens is cumulative in message_delta; input and cache counts are only there on newer
      // API versions (null or absent otherwise), so message_start's values stand unless replaced.
      const usage = obj(data.usage);
      if (usage) {
        const merged: Json = { ...(obj(message.usage) ?? {}) };
        for (const [key, value] of Object.entries(usage)) if (value !== null && value !== undefined) put(merged, key, value);
        message.usage = merged;
      }
    }
  }
  if (!message) return null;
  // A stream cut before content_block_stop still yields what arrived.
  for (const index of [...partialJson.keys()]) finishBlock(index);
  message.content = blocks.filter((block) => block !== undefined);
  return message;
}

// ---- OpenAI responses API ----

/** The final event carries the whole response; incomplete and failed ones too, with their usage. */
function assembleResponses(events: Typed[]): Json | null {
  let response: Json | null = null;
  for (const { type, data } of events) {
    if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') {
      response = obj(data?.response) ?? response;
    }
  }
  return response;
}
