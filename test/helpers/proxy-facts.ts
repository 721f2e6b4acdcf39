// The facts of a plain proxied miss (a JSON chat completion answered 200 by the upstream), as the event loop
// hands them to the report worker; a test overrides what it asserts on. And the bytes such an exchange carries.
import type { ProxyFacts } from '../../src/core/exchange-record.js';

/** A chat request's wire text, and the chat completion (with usage) answering it. */
export const REQUEST = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}';
export const ANSWER = JSON.stringify({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  model: 'gpt-4o-mini',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 },
});

export function missFacts(over: Partial<ProxyFacts> = {}): ProxyFacts {
  return {
    id: 'r-1',
    startedAt: 1_700_000_000_000,
    endedAt: 1_700_000_000_001,
    status: 200,
    cacheStatus: 'MISS',
    outcome: 'complete',
    method: 'POST',
    url: '/v1/chat/completions',
    upstream: 'http://up',
    relayHeaders: [],
    cacheEnabled: true,
    cacheKey: null,
    streamed: false,
    requestJson: 'checked',
    ...over,
  };
}
