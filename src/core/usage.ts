// Token usage from a response body, in the shapes the providers use: OpenAI chat/completions
// (prompt_tokens / completion_tokens), OpenAI responses and Anthropic (input_tokens / output_tokens).
import type { TokenUsage } from '../storage/report-store.js';

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
}

function obj(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

export function extractUsage(body: unknown): TokenUsage | null {
  const usage = obj(obj(body)?.usage);
  if (!usage) return null;

  const prompt = num(usage.prompt_tokens);
  const completion = num(usage.completion_tokens);
  if (prompt !== undefined || completion !== undefined) {
    const out: TokenUsage = {
      inputTokens: prompt ?? 0,
      outputTokens: completion ?? 0,
      totalTokens: num(usage.total_tokens) ?? (prompt ?? 0) + (completion ?? 0),
    };
    const cached = num(obj(usage.prompt_tokens_details)?.cached_tokens);
    if (cached !== undefined) out.cachedInputTokens = cached;
    return out;
  }

  const input = num(usage.input_tokens);
  const output = num(usage.output_tokens);
  if (input === undefined && output === undefined) return null;
  // Anthropic counts cache reads and writes apart from input_tokens; OpenAI's responses API counts them
  // inside input_tokens (input_tokens_details.cached_tokens).
  const cacheRead = num(usage.cache_read_input_tokens);
  const cacheWrite = num(usage.cache_creation_input_tokens);
  const openaiCached = num(obj(usage.input_tokens_details)?.cached_tokens);
  const inputTokens = (input ?? 0) + (cacheRead ?? 0) + (cacheWrite ?? 0);
  const out: TokenUsage = {
    inputTokens,
    outputTokens: output ?? 0,
    totalTokens: num(usage.total_tokens) ?? inputTokens + (output ?? 0),
  };
  if (cacheRead !== undefined || openaiCached !== undefined) out.cachedInputTokens = cacheRead ?? openaiCached!;
  if (cacheWrite !== undefined) out.cacheCreationInputTokens = cacheWrite;
  return out;
}
