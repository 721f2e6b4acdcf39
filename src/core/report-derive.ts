// Turns a report as a client sent it into the stored report: the client's fields as sent (unknown ones
// included) plus the fields the relay derives on write. Derived names are reserved: they overwrite
// same-named client fields.
import { hash } from 'node:crypto';
import { timestampMs } from '../storage/report-cursor.js';
import type { ReportFields, StoredReport } from '../storage/report-store.js';
import type { PriceTable } from './pricing.js';
import { estimateUsage } from './token-estimate.js';
import { extractUsage } from './usage.js';

export type ReportInput = ReportFields;

function obj(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

interface BodyFacts {
  bytes: number;
  sha256: string | null;
  /** the JSON text cut to the limit, when the body was over it */
  cut?: string;
}

/** Size and hash of a body already known as bytes (the proxy has the wire text), so it is not serialized again. */
export interface KnownBody {
  bytes: number;
  sha256: string;
  /** the text, for cutting a body over the limit (serialized from the object when absent) */
  text?: () => string;
}

function bodyFacts(body: unknown, maxBytes: number, known?: KnownBody): BodyFacts {
  if (body === undefined) return { bytes: 0, sha256: null };
  if (known) {
    const facts: BodyFacts = { bytes: known.bytes, sha256: known.sha256 };
    if (known.bytes > maxBytes)
      facts.cut = Buffer.from(known.text ? known.text() : JSON.stringify(body)).subarray(0, maxBytes).toString('utf8');
    return facts;
  }
  const buf = Buffer.from(JSON.stringify(body));
  const facts: BodyFacts = { bytes: buf.length, sha256: hash('sha256', buf, 'hex') };
  if (buf.length > maxBytes) facts.cut = buf.subarray(0, maxBytes).toString('utf8');
  return facts;
}

/** A body over the limit is kept as the start of its JSON text, marked truncated; sizes and hashes stay the original's. */
function keep<T extends { body?: unknown }>(part: T, facts: BodyFacts): T {
  return facts.cut === undefined ? part : Object.assign({}, part, { body: facts.cut, truncated: true });
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
  maxBodyBytes = Number.POSITIVE_INFINITY,
  known: { request?: KnownBody; response?: KnownBody } = {},
): StoredReport {
  const requestBody = input.request.body;
  const responseBody = input.response.body;
  const started = timestampMs(input.request.timestamp);
  const ended = timestampMs(input.response.timestamp);
  const status = input.response.status;
  const model = str(obj(responseBody)?.model) ?? str(obj(requestBody)?.model) ?? null;
  const provider = detectProvider(input.metadata, requestBody, responseBody);
  // A streamed OpenAI answer carries usage only when the client asked for it (include_usage): without it the
  // relay counts the tokens itself, marked estimated, so every streamed call has tokens and a cost.
  const usage =
    extractUsage(responseBody) ??
    (provider === 'openai' && input.response.streamed === true ? estimateUsage(requestBody, responseBody) : null);
  const req = bodyFacts(requestBody, maxBodyBytes, known.request);
  const res = bodyFacts(responseBody, maxBodyBytes, known.response);
  const cost = prices.cost(model, usage);
  // A cache hit costs nothing upstream; what it avoided is the original call's cost.
  const hit = input.cacheHit === true;
  const saved = hit ? (typeof input.costSavedUsd === 'number' ? input.costSavedUsd : cost) : undefined;

  // Object.assign, not a spread followed by properties: V8 builds that by a slow path, and this runs for
  // every report.
  const report: StoredReport = Object.assign({}, input, {
    request: keep(input.request, req),
    response: keep(input.response, res),
    id: ids.id,
    receivedAt: ids.receivedAt,
    durationMs: Number.isFinite(started) && Number.isFinite(ended) ? ended - started : null,
    status: Number.isInteger(status) ? (status as number) : null,
    model,
    provider,
    usage,
    costUsd: hit ? 0 : cost,
    requestBytes: req.bytes,
    responseBytes: res.bytes,
    requestSha256: req.sha256,
    responseSha256: res.sha256,
  });
  if (hit) report.costSavedUsd = saved ?? null;
  return report;
}
