// Reports for the report store contract: complete, with known numbers, easy to vary one field at a time.
import type { StoredReport } from '../../src/storage/report-store.js';

export const T0 = Date.parse('2025-03-01T12:00:00.000Z');

/** A complete report requested `minute` minutes after T0; `over` replaces whole fields. */
export function makeReport(id: string, minute: number, over: Partial<StoredReport> = {}): StoredReport {
  const at = new Date(T0 + minute * 60_000).toISOString();
  return {
    id,
    receivedAt: new Date(T0 + minute * 60_000 + 900).toISOString(),
    metadata: { environment: 'production', promptId: 'summarize', client: 'web' },
    request: { timestamp: at, body: { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] } },
    response: { timestamp: new Date(T0 + minute * 60_000 + 800).toISOString(), body: { id: 'chatcmpl-1' } },
    properties: { team: 'search' },
    cacheEnabled: true,
    cacheHit: false,
    durationMs: 800,
    status: 200,
    model: 'gpt-4o',
    provider: 'openai',
    usage: { inputTokens: 12, outputTokens: 30, totalTokens: 42 },
    costUsd: 0.00033,
    requestBytes: 120,
    responseBytes: 480,
    ...over,
  };
}
