// Token counts for an OpenAI answer that carries none: a streamed chat completion (or legacy completion)
// whose client did not ask for `stream_options.include_usage`. The relay never changes the client's request,
// so it counts the tokens itself (bpe-count.ts: OpenAI's BPE encodings from gpt-tokenizer's rank files, with
// gpt-tokenizer's counts) and the report says they are estimated. Chat messages are counted the way OpenAI documents it (3 tokens per message, 1 per name, 3 to
// prime the reply); tool definitions and images are not counted, so an estimate is a floor.
import { LRUCache } from 'lru-cache';
import type { TokenUsage } from '../storage/report-store.js';
import { type Encoding, createBpeCounter } from './bpe-count.js';

type Counter = (text: string) => number;

// Built on first use, synchronously (reports are derived synchronously): a relay whose clients get usage
// from the provider never pays for the encoding tables (3.2 MB for o200k, 1.6 for cl100k).
const counters = new Map<Encoding, Counter>();

/**
 * Counts of texts seen before: a conversation sends its whole history again with every turn, and every hit
 * of a stream reports its origin's answer again; each message is counted once, not once per turn. Bounded by
 * the characters of the texts it holds (they are shared with the bodies that hold them while those live).
 */
const MEMO_CHARS = 1 << 20;
/** Shorter texts (a role, a short reply) cost less to count than to look up. */
const MEMO_FROM = 64;

/** Text counted exactly; a longer text is counted on its start and scaled to its length. */
const SAMPLE_CHARS = 32_768;
/** BPE is quadratic in the length of a run without spaces ('x' × 32 KB takes most of a second): runs are cut. */
const RUN_LIMIT = 256;
const LONG_RUN = /\S{256}(?=\S)/g;

/** Whether the text has a run of RUN_LIMIT characters without a space (prose has none: found by indexOf hops). */
function hasLongRun(text: string): boolean {
  let at = 0;
  while (at + RUN_LIMIT < text.length) {
    const space = text.indexOf(' ', at);
    if (space < 0 || space - at >= RUN_LIMIT) {
      // a stretch without a plain space: whether it has no other whitespace either is the regex's call
      LONG_RUN.lastIndex = 0;
      const found = LONG_RUN.test(text);
      LONG_RUN.lastIndex = 0;
      return found;
    }
    at = space + 1;
  }
  return false;
}

function counter(encoding: Encoding): Counter {
  let count = counters.get(encoding);
  if (!count) {
    const mod = createBpeCounter(encoding);
    const memo = new LRUCache<string, number>({ maxSize: MEMO_CHARS, sizeCalculation: (_n, text) => text.length });
    const exact = (text: string): number => {
      // A client's text is arbitrary: its cost to count must stay bounded, whatever it holds.
      const sample = text.length > SAMPLE_CHARS ? text.slice(0, SAMPLE_CHARS) : text;
      const tokens = mod.count(hasLongRun(sample) ? sample.replace(LONG_RUN, '$& ') : sample);
      return sample === text ? tokens : Math.round((tokens * text.length) / sample.length);
    };
    count = (text) => {
      if (text.length === 0) return 0;
      if (text.length < MEMO_FROM || text.length > MEMO_CHARS / 16) return exact(text);
      let tokens = memo.get(text);
      if (tokens === undefined) memo.set(text, (tokens = exact(text)));
      return tokens;
    };
    counters.set(encoding, count);
  }
  return count;
}

/** The encoding of a model: cl100k for GPT-4 and GPT-3.5 and their embeddings, o200k for everything newer. */
export function encodingOf(model: string | undefined): Encoding {
  const m = (model ?? '').toLowerCase();
  if (/^(gpt-4o|gpt-4\.|chatgpt|o\d|gpt-5|gpt-oss)/.test(m)) return 'o200k_base';
  if (/^(gpt-4|gpt-3\.5|text-embedding-(ada|3)|davinci-002|babbage-002)/.test(m)) return 'cl100k_base';
  return 'o200k_base';
}

function obj(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** The text of a message's content: a string, or the text parts of an array of parts. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content) {
    const p = obj(part);
    if (typeof p?.text === 'string') text += p.text;
    else if (typeof p?.refusal === 'string') text += p.refusal;
  }
  return text;
}

/** A message's tool calls (name and arguments) as text. */
function toolCallText(message: Record<string, unknown>): string {
  if (!Array.isArray(message.tool_calls)) return '';
  let text = '';
  for (const call of message.tool_calls) {
    const fn = obj(obj(call)?.function);
    if (typeof fn?.name === 'string') text += fn.name;
    if (typeof fn?.arguments === 'string') text += fn.arguments;
  }
  return text;
}

function countMessages(messages: unknown[], count: Counter): number {
  let tokens = 3; // every reply is primed with <|start|>assistant<|message|>
  for (const m of messages) {
    const message = obj(m);
    if (!message) continue;
    tokens += 3;
    if (typeof message.role === 'string') tokens += count(message.role);
    tokens += count(contentText(message.content)) + count(toolCallText(message));
    if (typeof message.name === 'string') tokens += count(message.name) + 1;
  }
  return tokens;
}

function countPrompt(prompt: unknown, count: Counter): number {
  if (typeof prompt === 'string') return count(prompt);
  if (Array.isArray(prompt)) return prompt.reduce((n: number, p) => n + (typeof p === 'string' ? count(p) : 0), 0);
  return 0;
}

/**
 * Estimated usage of an OpenAI chat completion or legacy completion (request body as sent, response body
 * as assembled from its stream), or null when neither side has anything to count.
 */
export function estimateUsage(request: unknown, response: unknown): TokenUsage | null {
  const req = obj(request);
  const res = obj(response);
  if (!req || !res || !Array.isArray(res.choices)) return null;
  const count = counter(encodingOf(typeof res.model === 'string' ? res.model : typeof req.model === 'string' ? req.model : undefined));
  let inputTokens = 0;
  if (Array.isArray(req.messages)) inputTokens = countMessages(req.messages, count);
  else if (req.prompt !== undefined) inputTokens = countPrompt(req.prompt, count);
  let outputTokens = 0;
  for (const c of res.choices) {
    const choice = obj(c);
    if (!choice) continue;
    const message = obj(choice.message);
    if (message) outputTokens += count(contentText(message.content)) + count(toolCallText(message)) + count(contentText(message.refusal));
    else if (typeof choice.text === 'string') outputTokens += count(choice.text);
  }
  if (inputTokens === 0 && outputTokens === 0) return null;
  return { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens, estimated: true };
}
