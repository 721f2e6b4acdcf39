// The report of one proxied exchange, whatever its outcome, built from plain facts.
import { hash } from 'node:crypto';
import type { KnownBody, ReportInput } from './report-derive.js';

export type CacheStatus = 'HIT' | 'MISS' | 'BYPASS' | 'REFRESH' | 'COALESCED';
export type Outcome = 'complete' | 'upstream-error' | 'stream-error' | 'client-abort' | 'cache-only-miss';

export interface ExchangeFacts {
  method: string;
  url: string;
  upstream: string | null;
  startedAt: number;
  endedAt: number;
  metadata: Record<string, string>;
  properties: Record<string, string>;
  requestBody: unknown;
  /** the request body's wire bytes, when it is reported */
  requestRaw?: KnownBody;
  status: number;
  responseBody: unknown;
  /** the response body's wire text (decoded), for a JSON answer */
  responseRaw?: KnownBody;
  streamed: boolean;
  cacheStatus: CacheStatus;
  cacheEnabled: boolean;
  cacheKey: string | null;
  outcome: Outcome;
  /** ms from arrival to the first response byte from upstream (misses) */
  upstreamMs?: number;
  /** for hits: the report of the call that filled the entry, and what it cost */
  originReportId?: string;
  costSavedUsd?: number | null;
  error?: string;
}

export function proxyReport(f: ExchangeFacts): ReportInput {
  const hit = f.cacheStatus === 'HIT' || f.cacheStatus === 'COALESCED';
  // Built by plain assignments: a spread with properties after it takes V8's slow path (see exchangeFacts).
  const request: ReportInput['request'] = { timestamp: new Date(f.startedAt).toISOString() };
  if (f.requestBody !== undefined) request.body = f.requestBody;
  const response: ReportInput['response'] = { timestamp: new Date(f.endedAt).toISOString(), status: f.status, streamed: f.streamed };
  if (f.responseBody !== undefined && f.responseBody !== null) response.body = f.responseBody;
  const proxy: Record<string, unknown> = {
    method: f.method,
    path: f.url,
    upstream: f.upstream,
    cacheStatus: f.cacheStatus,
    cacheKey: f.cacheKey,
    outcome: f.outcome,
  };
  if (f.upstreamMs !== undefined) proxy.upstreamMs = f.upstreamMs;
  if (f.error) proxy.error = f.error;
  const input: ReportInput = {
    metadata: f.metadata,
    request,
    response,
    properties: f.properties,
    cacheEnabled: f.cacheEnabled,
    cacheHit: hit,
    proxy,
  };
  if (f.originReportId) input.originReportId = f.originReportId;
  if (hit && f.costSavedUsd !== undefined) input.costSavedUsd = f.costSavedUsd;
  return input;
}

/** Facts of a body known as bytes: reports of proxied calls describe the bytes that crossed the wire. */
export function knownBody(raw: Buffer | string): KnownBody {
  const bytes = typeof raw === 'string' ? Buffer.byteLength(raw) : raw.length;
  return { bytes, sha256: hash('sha256', raw, 'hex'), text: () => raw.toString() };
}

export function knownFacts(f: ExchangeFacts): { request?: KnownBody; response?: KnownBody } {
  const known: { request?: KnownBody; response?: KnownBody } = {};
  if (f.requestRaw) known.request = f.requestRaw;
  if (f.responseRaw) known.response = f.responseRaw;
  return known;
}
