// Cost in USD from a price table (config/prices.json): USD per million tokens for input, output, cached
// input reads and cache writes. A dated model id (gpt-4o-2024-08-06) is priced by its longest listed
// prefix (gpt-4o). Unknown model → null, never an error.
import { readFileSync } from 'node:fs';
import type { TokenUsage } from '../storage/report-store.js';

export interface ModelPrice {
  input: number;
  output: number;
  cachedInput?: number;
  cacheWrite?: number;
}

export interface PriceTable {
  priceOf(model: string): ModelPrice | undefined;
  cost(model: string | null, usage: TokenUsage | null): number | null;
}

export function loadPriceTable(file: string): PriceTable {
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as { models?: Record<string, ModelPrice> };
  return createPriceTable(parsed.models ?? {});
}

export function createPriceTable(models: Record<string, ModelPrice>): PriceTable {
  // Longest names first, so the first prefix that matches is the most specific one.
  const names = Object.keys(models).sort((a, b) => b.length - a.length);
  const memo = new Map<string, ModelPrice | undefined>();

  function priceOf(model: string): ModelPrice | undefined {
    if (memo.has(model)) return memo.get(model);
    const name = names.find((n) => model === n || model.startsWith(`${n}-`) || model.startsWith(`${n}@`));
    const price = name === undefined ? undefined : models[name];
    if (memo.size < 10_000) memo.set(model, price);
    return price;
  }

  return {
    priceOf,
    cost(model, usage) {
      if (!model || !usage) return null;
      const p = priceOf(model);
      if (!p) return null;
      const cached = usage.cachedInputTokens ?? 0;
      const writes = usage.cacheCreationInputTokens ?? 0;
      const plainInput = Math.max(0, usage.inputTokens - cached - writes);
      const usd =
        plainInput * p.input +
        cached * (p.cachedInput ?? p.input) +
        writes * (p.cacheWrite ?? p.input) +
        usage.outputTokens * p.output;
      // Round to a millionth of a cent so sums stay readable.
      return Math.round((usd / 1_000_000) * 1e8) / 1e8;
    },
  };
}
