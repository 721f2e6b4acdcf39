// Token estimates for OpenAI answers that carry no usage: OpenAI's documented message overhead over
// gpt-tokenizer's counts, the encoding chosen by model, and nothing invented where there is nothing to count.
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import { describe, expect, it } from 'vitest';
import { encodingOf, estimateUsage } from '../../../src/core/token-estimate.js';

const answer = (content: string, model = 'gpt-4o-mini') => ({
  object: 'chat.completion',
  model,
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
});

describe('estimateUsage', () => {
  it('counts chat messages with 3 tokens each, their role and content, a name, and 3 to prime the reply', () => {
    const request = {
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', name: 'ada', content: [{ type: 'text', text: 'What is 2+2?' }, { type: 'image_url', image_url: { url: 'x' } }] },
      ],
    };
    const c = o200k.countTokens;
    const input = 3 + (3 + c('system') + c('Be brief.')) + (3 + c('user') + c('What is 2+2?') + c('ada') + 1);
    expect(estimateUsage(request, answer('Four.'))).toEqual({ inputTokens: input, outputTokens: c('Four.'), totalTokens: input + c('Four.'), estimated: true });
  });

  it('counts tool calls (name and arguments) on both sides', () => {
    const call = { id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } };
    const request = { model: 'gpt-4.1', messages: [{ role: 'assistant', content: null, tool_calls: [call] }] };
    const response = { object: 'chat.completion', model: 'gpt-4.1', choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [call] } }] };
    const c = o200k.countTokens;
    const args = c('get_weather') + c('{"city":"Oslo"}');
    expect(estimateUsage(request, response)).toEqual({ inputTokens: 3 + 3 + c('assistant') + args, outputTokens: args, totalTokens: 6 + c('assistant') + 2 * args, estimated: true });
  });

  it('uses cl100k for GPT-4 and GPT-3.5, o200k for newer models and unknown ones', () => {
    expect(encodingOf('gpt-4o-mini-2024-07-18')).toBe('o200k_base');
    expect(encodingOf('o3-mini')).toBe('o200k_base');
    expect(encodingOf('gpt-5')).toBe('o200k_base');
    expect(encodingOf('gpt-4-turbo')).toBe('cl100k_base');
    expect(encodingOf('gpt-3.5-turbo')).toBe('cl100k_base');
    expect(encodingOf('my-finetune')).toBe('o200k_base');
    const text = 'Ünïcødé and emoji 🎉 count differently per encoding';
    const usage = estimateUsage({ model: 'gpt-3.5-turbo', prompt: text }, { object: 'text_completion', model: 'gpt-3.5-turbo', choices: [{ text }] });
    expect(usage).toEqual({ inputTokens: cl100k.countTokens(text), outputTokens: cl100k.countTokens(text), totalTokens: 2 * cl100k.countTokens(text), estimated: true });
  });

  it('counts nothing it cannot read', () => {
    expect(estimateUsage(undefined, answer('x'))).toBeNull();
    expect(estimateUsage({ messages: [] }, { object: 'list', data: [] })).toBeNull();
    expect(estimateUsage({ prompt: '' }, { object: 'text_completion', choices: [{ text: '' }] })).toBeNull();
  });
});

describe('the cost of an estimate stays bounded, whatever the text', () => {
  // Uncut, the 2 MB run would take the tokenizer many minutes (BPE is quadratic in a run's length): the test's
  // own timeout is the guard.
  it('counts a 2 MB run without spaces and a 4 MB text from their start, scaled to their length', () => {
    const run = estimateUsage({ model: 'gpt-4o', prompt: 'x'.repeat(2_000_000) }, { object: 'text_completion', model: 'gpt-4o', choices: [{ text: '' }] });
    const words = estimateUsage({ model: 'gpt-4o', prompt: 'hello world '.repeat(350_000) }, { object: 'text_completion', model: 'gpt-4o', choices: [{ text: '' }] });
    // 'x' runs cut every 256 characters; 'hello world ' is 2 tokens per 12 characters exactly.
    expect(run!.inputTokens).toBeGreaterThan(2_000_000 / 16);
    expect(run!.inputTokens).toBeLessThan(2_000_000 / 4);
    expect(words!.inputTokens).toBe(Math.round((o200k.countTokens('hello world '.repeat(350_000).slice(0, 32_768)) * 4_200_000) / 32_768));
  });
});
