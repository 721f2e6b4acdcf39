// Turns a report as a client sent it into the stored report: the client's fields as sent (unknown ones
// included) plus the fields the relay derives on write. Derived names are reserved: they overwrite
// same-named client fields.
import { createHash } from 'node:crypto';
import type { StoredReport } from '../storage/report-store.js';
import type { PriceTable } from './pricing.js';
import { extractUsage } from './usage.js';

export interface ReportInput {
  metadata?: Record<string, unknown>;
  request: { timestamp: string; body?: unknown; [k: string]: unknown };
  response: { timestamp: string; body?: unknown; [k: string]: unknown };
  properties?: Record<string, unknown>;
  cacheEnabled?: boolean | null;
  cacheHit?: boolean | null;
  [k: string]: unknown;
}

function obj(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

function bodyFacts(body: unknown): { bytes: number; sha256: string | null } {
  if (body === undefined) return { bytes: 0, sha256: null };
  const text = JSON.stringify(body);
  return { bytes: Buffer.byteLength(text), sha256: createHash('sha256').update(text).digest('hex') };
}

export function detectProvider(metadata: Record<string, unknown> | undefined, request: unknown, response: unknown): string | null {
  const declared = str(metadata?.provider);
  if (declared) return declared.toLowerCase();
  const res = obj(response);
  if (res?.type === 'message' || (res?.type === 'error' && obj(res.error)?.type)) return 'anthropic';
  const object = str(res?.object);
  if (object && /^(chat\.completion|text_completion|response|embedding|list)/.test(object)) return 'openai';
  const req = obj(request);
  if (req && typeof req.max_tokens === 'number' && typeof req.model === 'string' && req.model.startsWith('claude'))
    return 'anthropic';
  return null;
}

export function deriveReport(
  input: ReportInput,
  ids: { id: string; receivedAt: string },
  prices: PriceTable,
): StoredReport {
  const requestBody = input.request.body;
  const responseBody = input.response.body;
  const started = Date.parse(input.request.timestamp);
  const ended = Date.parse(input.response.timestamp);
  const status = input.response.status;
  const model = str(obj(responseBody)?.model) ?? str(obj(requestBody)?.model) ?? null;
  const usage = extractUsage(responseBody);
  const req = bodyFacts(requestBody);
  const res = bodyFacts(responseBody);
  const cost = prices.cost(model, usage);
  // A cache hit costs nothing upstream; what it avoided is the original call's cost.
  const hit = input.cacheHit === true;
  const saved = hit ? (typeof input.costSavedUsd === 'number' ? input.costSavedUsd : cost) : undefined;

  return {
    ...input,
    id: ids.id,
    receivedAt: ids.receivedAt,
    durationMs: Number.isFinite(started) && Number.isFinite(ended) ? ended - started : null,
    status: Number.isInteger(status) ? (status as number) : null,
    model,
    provider: detectProvider(input.metadata, requestBody, responseBody),
    usage,
    costUsd: hit ? 0 : cost,
    ...(hit ? { costSavedUsd: saved ?? null } : {}),
    requestBytes: req.bytes,
    responseBytes: res.bytes,
    requestSha256: req.sha256,
    responseSha256: res.sha256,
  };
}
