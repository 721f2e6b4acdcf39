import { describe, expect, it } from 'vitest';
import { createPriceTable, loadPriceTable } from '../../../src/core/pricing.js';
import { deriveReport } from '../../../src/core/report-derive.js';
import { extractUsage } from '../../../src/core/usage.js';
import fc from 'fast-check';
import { jsonDepth } from '../../../src/core/json-guard.js';
import { DEFAULTS } from '../../../src/config.js';

describe('extractUsage', () => {
  it('reads OpenAI chat usage with cached tokens', () => {
    expect(extractUsage({ usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 4 } } })).toEqual({
      inputTokens: 10,
      outputTokens: 5,
      totalTokens: 15,
      cachedInputTokens: 4,
    });
  });

  it('reads Anthropic usage, counting cache reads and writes as input', () => {
    expect(extractUsage({ usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 100, cache_creation_input_tokens: 20 } })).toEqual({
      inputTokens: 130,
      outputTokens: 5,
      totalTokens: 135,
      cachedInputTokens: 100,
      cacheCreationInputTokens: 20,
    });
  });

  it('reads the OpenAI responses API shape', () => {
    expect(extractUsage({ usage: { input_tokens: 8, output_tokens: 2, total_tokens: 10, input_tokens_details: { cached_tokens: 3 } } })).toEqual({
      inputTokens: 8,
      outputTokens: 2,
      totalTokens: 10,
      cachedInputTokens: 3,
    });
  });

  it('is null without usage or with garbage', () => {
    expect(extractUsage(undefined)).toBeNull();
    expect(extractUsage({ usage: 'lots' })).toBeNull();
    expect(extractUsage({ usage: { prompt_tokens: -1 } })).toBeNull();
  });
});

describe('price table', () => {
  const prices = createPriceTable({
    'gpt-4o': { input: 2.5, output: 10, cachedInput: 1.25 },
    'gpt-4o-mini': { input: 0.15, output: 0.6 },
    'claude-3-5-haiku': { input: 0.8, output: 4, cachedInput: 0.08, cacheWrite: 1 },
  });

  it('prices dated models by their longest listed prefix', () => {
    expect(prices.priceOf('gpt-4o-2024-08-06')).toEqual({ input: 2.5, output: 10, cachedInput: 1.25 });
    expect(prices.priceOf('gpt-4o-mini-2024-07-18')).toEqual({ input: 0.15, output: 0.6 });
    expect(prices.priceOf('gpt-4omega')).toBeUndefined();
  });

  it('computes cost with cached and cache-write tokens', () => {
    // 1M plain input at 2.5 + 1M cached at 1.25 + 1M output at 10
    expect(prices.cost('gpt-4o', { inputTokens: 2_000_000, outputTokens: 1_000_000, totalTokens: 3_000_000, cachedInputTokens: 1_000_000 })).toBe(13.75);
    // 10 plain + 100 read + 20 written input, 5 output
    expect(prices.cost('claude-3-5-haiku-20241022', { inputTokens: 130, outputTokens: 5, totalTokens: 135, cachedInputTokens: 100, cacheCreationInputTokens: 20 })).toBe(
      (10 * 0.8 + 100 * 0.08 + 20 * 1 + 5 * 4) / 1e6,
    );
  });

  it('is null for an unknown model or missing usage', () => {
    expect(prices.cost('mystery', { inputTokens: 1, outputTokens: 1, totalTokens: 2 })).toBeNull();
    expect(prices.cost('gpt-4o', null)).toBeNull();
    expect(prices.cost(null, { inputTokens: 1, outputTokens: 1, totalTokens: 2 })).toBeNull();
  });

  it('the shipped config/prices.json loads and prices common models', () => {
    const shipped = loadPriceTable(DEFAULTS.pricesFile);
    for (const model of ['gpt-4o-mini', 'gpt-4o-2024-08-06', 'gpt-3.5-turbo', 'claude-3-5-sonnet-20241022', 'claude-sonnet-4-5']) {
      expect(shipped.priceOf(model), model).toBeDefined();
    }
  });
});

describe('deriveReport', () => {
  const prices = createPriceTable({ 'claude-3-5-haiku': { input: 0.8, output: 4 } });

  it('derives duration, status, model, provider, usage, cost and sizes; keeps unknown fields', () => {
    const input = {
      request: { timestamp: '2024-01-01T00:00:00.000Z', body: { model: 'claude-3-5-haiku-latest', max_tokens: 10 } },
      response: {
        timestamp: '2024-01-01T00:00:02.500+00:00',
        status: 200,
        body: { type: 'message', model: 'claude-3-5-haiku-20241022', usage: { input_tokens: 1000, output_tokens: 100 } },
      },
      extra: [1, 2],
    };
    const out = deriveReport(input, { id: 'id-1', receivedAt: '2024-01-01T00:00:03.000Z' }, prices);
    expect(out).toEqual({
      ...input,
      id: 'id-1',
      receivedAt: '2024-01-01T00:00:03.000Z',
      durationMs: 2500,
      status: 200,
      model: 'claude-3-5-haiku-20241022',
      provider: 'anthropic',
      usage: { inputTokens: 1000, outputTokens: 100, totalTokens: 1100 },
      costUsd: (1000 * 0.8 + 100 * 4) / 1e6,
      requestBytes: Buffer.byteLength(JSON.stringify(input.request.body)),
      responseBytes: Buffer.byteLength(JSON.stringify(input.response.body)),
      requestSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      responseSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
  });

  it('takes a declared provider in lower case', () => {
    const out = deriveReport(
      { metadata: { provider: 'OpenAI' }, request: { timestamp: 'x' }, response: { timestamp: 'y' } },
      { id: 'i', receivedAt: 'r' },
      prices,
    );
    expect(out.provider).toBe('openai');
    expect(out.durationMs).toBeNull();
  });
});

describe('jsonDepth', () => {
  it('counts nesting outside strings only', () => {
    expect(jsonDepth('1', 10)).toBe(0);
    expect(jsonDepth('{"a":[1,{"b":[]}]}', 10)).toBe(4);
    expect(jsonDepth('{"a":"[[[[[[\\"[[["}', 10)).toBe(1);
    expect(jsonDepth('['.repeat(100000), 64)).toBe(65);
    expect(jsonDepth('["a\\\\",[["\\\\\\"]"]]]', 10)).toBe(3); // an escaped backslash, then an escaped quote
    expect(jsonDepth('{"a":"[[[', 10)).toBe(1); // unterminated string
  });

  it('agrees with a character-by-character scan on any text', () => {
    // the scan it replaced, kept here as the reference
    const reference = (text: string, limit: number): number => {
      let depth = 0;
      let max = 0;
      let inString = false;
      for (let i = 0; i < text.length; i++) {
        const c = text[i];
        if (inString) {
          if (c === '\\') i++;
          else if (c === '"') inString = false;
          continue;
        }
        if (c === '"') inString = true;
        else if (c === '{' || c === '[') {
          depth++;
          if (depth > max) {
            max = depth;
            if (max > limit) return max;
          }
        } else if (c === '}' || c === ']') depth--;
      }
      return max;
    };
    const jsonish = fc.string({ unit: fc.constantFrom('"', '\\', '[', ']', '{', '}', 'a', ',', ':'), maxLength: 60 });
    fc.assert(fc.property(jsonish, fc.integer({ min: 0, max: 8 }), (t, limit) => jsonDepth(t, limit) === reference(t, limit)), { numRuns: 5000 });
    fc.assert(fc.property(fc.json(), (t) => jsonDepth(t, 64) === reference(t, 64)), { numRuns: 2000 });
  });
});

describe('timestamps', () => {
  it('a leap second counts as the last millisecond before it, not as 1970', () => {
    const prices = createPriceTable({});
    const out = deriveReport(
      { request: { timestamp: '2016-12-31T23:59:60Z' }, response: { timestamp: '2017-01-01T00:00:01.000Z' } },
      { id: 'i', receivedAt: 'r' },
      prices,
    );
    expect(out.durationMs).toBe(1001);
  });
});
