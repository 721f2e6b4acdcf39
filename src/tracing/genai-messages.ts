// Prompt and answer content in the GenAI conventions' message form (v1.41.0: gen-ai-input-messages.json,
// gen-ai-output-messages.json, gen-ai-system-instructions.json), from the OpenAI and Anthropic bodies the
// report already parsed. Only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true: content is off
// by default, and never includes a header (credentials travel in headers, not bodies).

type Json = Record<string, unknown>;
type Part = Json;

export interface Messages {
  system?: Part[];
  input?: Json[];
  output?: Json[];
}

const obj = (v: unknown): Json | undefined => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

function argumentsOf(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}

/** One content block (OpenAI or Anthropic) as a message part. */
function partOf(block: unknown): Part | undefined {
  if (typeof block === 'string') return { type: 'text', content: block };
  const b = obj(block);
  if (!b) return undefined;
  switch (b.type) {
    case 'text':
    case 'input_text':
    case 'output_text':
      return { type: 'text', content: str(b.text) ?? '' };
    case 'thinking':
      return { type: 'reasoning', content: str(b.thinking) ?? '' };
    case 'tool_use':
      return { type: 'tool_call', id: b.id, name: b.name, arguments: b.input };
    case 'tool_result':
      return { type: 'tool_call_response', id: b.tool_use_id, response: b.content };
    default:
      // images, audio, files: named by their kind, their bytes are not copied into a span
      return typeof b.type === 'string' ? { type: b.type } : undefined;
  }
}

function partsOf(content: unknown): Part[] {
  if (content === undefined || content === null) return [];
  if (!Array.isArray(content)) return [partOf(content)].filter((p): p is Part => p !== undefined);
  return content.map(partOf).filter((p): p is Part => p !== undefined);
}

function toolCallsOf(calls: unknown): Part[] {
  if (!Array.isArray(calls)) return [];
  return calls.flatMap((c) => {
    const call = obj(c);
    const fn = obj(call?.function);
    return call ? [{ type: 'tool_call', id: call.id, name: fn?.name, arguments: argumentsOf(fn?.arguments) }] : [];
  });
}

function chatMessage(m: unknown): Json | undefined {
  const msg = obj(m);
  if (!msg) return undefined;
  const role = str(msg.role) ?? 'user';
  if (role === 'tool') return { role, parts: [{ type: 'tool_call_response', id: msg.tool_call_id, response: msg.content }] };
  return { role, parts: [...partsOf(msg.content), ...toolCallsOf(msg.tool_calls)] };
}

/** The prompt's messages and system instructions, from a chat, messages or completions request body. */
function inputOf(request: Json, out: Messages): void {
  const system = request.system;
  if (system !== undefined) out.system = partsOf(system);
  const messages = Array.isArray(request.messages) ? request.messages : undefined;
  if (messages) {
    const input: Json[] = [];
    for (const m of messages) {
      const msg = chatMessage(m);
      if (!msg) continue;
      // OpenAI keeps its instructions among the messages; the convention keeps them apart.
      if (msg.role === 'system' || msg.role === 'developer') (out.system ??= []).push(...(msg.parts as Part[]));
      else input.push(msg);
    }
    out.input = input;
  } else if (request.prompt !== undefined) {
    out.input = [{ role: 'user', parts: partsOf(request.prompt) }];
  } else if (request.input !== undefined) {
    // the Responses API: a string, or a list of messages
    out.input = Array.isArray(request.input) ? request.input.map(chatMessage).filter((m): m is Json => m !== undefined) : [{ role: 'user', parts: partsOf(request.input) }];
  }
}

function outputOf(response: Json, out: Messages): void {
  if (Array.isArray(response.choices)) {
    out.output = response.choices.flatMap((c) => {
      const choice = obj(c);
      if (!choice) return [];
      const msg = obj(choice.message);
      const parts = msg ? [...partsOf(msg.content), ...toolCallsOf(msg.tool_calls)] : partsOf(choice.text);
      return [{ role: str(msg?.role) ?? 'assistant', parts, finish_reason: str(choice.finish_reason) ?? 'stop' }];
    });
  } else if (response.type === 'message' && Array.isArray(response.content)) {
    out.output = [{ role: 'assistant', parts: partsOf(response.content), finish_reason: str(response.stop_reason) ?? 'stop' }];
  }
}

export function messagesOf(request: unknown, response: unknown): Messages {
  const out: Messages = {};
  const req = obj(request);
  const res = obj(response);
  if (req) inputOf(req, out);
  if (res) outputOf(res, out);
  return out;
}

/** gen_ai.response.finish_reasons of an OpenAI or Anthropic answer. */
export function finishReasonsOf(response: unknown): string[] | undefined {
  const res = obj(response);
  if (!res) return undefined;
  if (Array.isArray(res.choices)) {
    const reasons = res.choices.map((c) => str(obj(c)?.finish_reason)).filter((r): r is string => r !== undefined);
    return reasons.length > 0 ? reasons : undefined;
  }
  const stop = str(res.stop_reason);
  if (stop) return [stop];
  const status = str(res.status);
  // the Responses API says how it ended in `status`
  return res.object === 'response' && status ? [status] : undefined;
}
