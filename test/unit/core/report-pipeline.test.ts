// The report worker's derivation: a record (facts and raw bytes) becomes the report the relay always wrote
// for that exchange; what repeats (a hit's answer, an identical request) is reused, not parsed again.
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { ProxyFacts, ProxyRecord } from '../../../src/core/exchange-record.js';
import { createPriceTable } from '../../../src/core/pricing.js';
import { createReportPipeline } from '../../../src/core/report-pipeline.js';
import type { StoredReport } from '../../../src/storage/report-store.js';
import { variantOf } from '../../../src/storage/report-variant.js';
import { ANSWER, REQUEST, missFacts } from '../../helpers/proxy-facts.js';

const prices = createPriceTable({ 'gpt-4o-mini': { input: 0.15, output: 0.6 } });
const defaults = { client: 'llm-relay', clientVersion: '9.9.9', environment: 'test' };
const pipeline = () => createReportPipeline({ prices, maxBodyBytes: 1 << 20, maxJsonDepth: 64, defaults });
const sha = (s: string | Buffer) => createHash('sha256').update(s).digest('hex');
/** the report a hit's report was made a variant of, if it was */
const baseOf = (report: StoredReport) => variantOf(report)?.base;


function record(facts: Partial<ProxyFacts>, request?: string, response?: Buffer | string): ProxyRecord {
  const r: ProxyRecord = {
    facts: missFacts({
      startedAt: Date.parse('2026-01-01T00:00:00.000Z'),
      endedAt: Date.parse('2026-01-01T00:00:01.500Z'),
      relayHeaders: [['x-relay-environment', 'ci'], ['x-relay-property-team', 'search']],
      cacheKey: 'k'.repeat(64),
      ...facts,
    }),
  };
  if (request !== undefined) r.request = Buffer.from(request);
  if (response !== undefined) r.response = Buffer.from(response);
  return r;
}

describe('report pipeline', () => {
  it('derives a JSON miss as the relay always reported it', () => {
    const report = pipeline().proxy(record({ upstreamMs: 12.5 }, REQUEST, ANSWER));
    expect(report).toEqual({
      id: 'r-1',
      receivedAt: '2026-01-01T00:00:01.500Z',
      metadata: { client: 'llm-relay', clientVersion: '9.9.9', environment: 'ci' },
      properties: { team: 'search' },
      request: { timestamp: '2026-01-01T00:00:00.000Z', body: JSON.parse(REQUEST) },
      response: { timestamp: '2026-01-01T00:00:01.500Z', status: 200, streamed: false, body: JSON.parse(ANSWER) },
      cacheEnabled: true,
      cacheHit: false,
      proxy: { method: 'POST', path: '/v1/chat/completions', upstream: 'http://up', cacheStatus: 'MISS', cacheKey: 'k'.repeat(64), outcome: 'complete', upstreamMs: 12.5 },
      durationMs: 1500,
      status: 200,
      model: 'gpt-4o-mini',
      provider: 'openai',
      usage: { inputTokens: 10, outputTokens: 2, totalTokens: 12 },
      costUsd: (10 * 0.15 + 2 * 0.6) / 1e6,
      requestBytes: Buffer.byteLength(REQUEST),
      responseBytes: Buffer.byteLength(ANSWER),
      requestSha256: sha(REQUEST),
      responseSha256: sha(ANSWER),
    });
  });

  it("derives a hit from the bytes it carries, and the next hit like it from the very objects of the first", () => {
    const p = pipeline();
    const miss = p.proxy(record({}, REQUEST, ANSWER));
    const hit = p.proxy(record({ id: 'r-2', cacheStatus: 'HIT', originReportId: 'r-1', requestSha256: sha(REQUEST) }, REQUEST, ANSWER));
    expect(hit.response.body).toEqual(miss.response.body);
    expect(hit.request.body).toEqual(miss.request.body);
    expect(hit).toMatchObject({ cacheHit: true, costUsd: 0, costSavedUsd: miss.costUsd, originReportId: 'r-1', responseSha256: miss.responseSha256 });
    const next = p.proxy(record({ id: 'r-3', cacheStatus: 'HIT', originReportId: 'r-1', requestSha256: sha(REQUEST) }, REQUEST, ANSWER));
    expect(next.response.body).toBe(hit.response.body);
    expect(next.request.body).toBe(hit.request.body);
  });

  it("makes a hit's report after the first of its kind as a variant of it, exactly the report derived in full", () => {
    const p = pipeline();
    p.proxy(record({}, REQUEST, ANSWER));
    const hit = (n: number, over: Partial<ProxyFacts> = {}) =>
      record(
        { id: `r-h${n}`, cacheStatus: 'HIT', originReportId: 'r-1', requestSha256: sha(REQUEST), startedAt: 1_800_000_000_000 + n * 1000, endedAt: 1_800_000_000_000 + n * 1000 + n, ...over },
        REQUEST,
        ANSWER,
      );
    const first = p.proxy(hit(1));
    expect(baseOf(first)).toBeUndefined();
    for (const n of [2, 3, 250]) {
      const made = p.proxy(hit(n));
      expect(baseOf(made)).toBe(first);
      // a pipeline that never saw a hit of this kind derives it in full: the same report, key order included
      const full = pipeline().proxy(hit(n));
      expect(baseOf(full)).toBeUndefined();
      expect(JSON.stringify(made)).toBe(JSON.stringify(full));
      expect(made).toMatchObject({ id: `r-h${n}`, durationMs: n, receivedAt: new Date(1_800_000_000_000 + n * 1001).toISOString() });
    }
    // another fact (a header, the status, the outcome) is another kind of hit: derived in full again
    for (const over of [{ relayHeaders: [['x-relay-environment', 'prod']] }, { status: 203 }, { cacheStatus: 'COALESCED' as const }]) {
      const other = p.proxy(hit(9, over));
      expect(baseOf(other)).toBeUndefined();
      expect(JSON.stringify(other)).toBe(JSON.stringify(pipeline().proxy(hit(9, over))));
    }
    // a hit whose request the event loop did not hash is never a variant
    expect(baseOf(p.proxy(hit(10, { requestSha256: undefined, requestJson: 'unchecked' })))).toBeUndefined();
  });

  it('assembles a stream, and a stream that carries an error event did not complete', () => {
    const chunk = (content: string) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [{ index: 0, delta: { content } }] })}\n\n`;
    const sse = `${chunk('hel')}${chunk('lo')}data: [DONE]\n\n`;
    const report = pipeline().proxy(record({ streamed: true }, REQUEST, sse));
    expect(report.response.body).toMatchObject({ object: 'chat.completion', choices: [{ message: { role: 'assistant', content: 'hello' } }] });
    expect(report.usage).toMatchObject({ estimated: true });
    const failed = pipeline().proxy(record({ streamed: true }, REQUEST, `${chunk('hel')}data: {"error":{"message":"overloaded"}}\n\n`));
    expect(failed.proxy).toMatchObject({ outcome: 'stream-error' });
  });

  it("decodes an answer by its content-encoding (the wire facts are the decoded text's)", () => {
    const report = pipeline().proxy(record({ encoding: 'gzip' }, REQUEST, gzipSync(ANSWER)));
    expect(report.response.body).toEqual(JSON.parse(ANSWER));
    expect(report.responseSha256).toBe(sha(ANSWER));
  });

  it('keeps a request body only when the strict JSON rules take it', () => {
    const p = pipeline();
    expect(p.proxy(record({ requestJson: 'refused' }, '{"__proto__":{"x":1}}', ANSWER)).request.body).toBeUndefined();
    expect(p.proxy(record({ id: 'u1', requestJson: 'unchecked' }, '{"__proto__":{"x":1}}', ANSWER)).request.body).toBeUndefined();
    expect(p.proxy(record({ id: 'u2', requestJson: 'unchecked' }, REQUEST, ANSWER)).request.body).toEqual(JSON.parse(REQUEST));
    expect(p.proxy(record({ id: 'u3', requestJson: 'no' }, 'plain text', ANSWER)).request).toEqual({ timestamp: '2026-01-01T00:00:00.000Z' });
  });

  it('derives a direct-API report from its JSON text', () => {
    const body = { request: { timestamp: '2026-01-01T00:00:00.000Z', body: { model: 'gpt-4o-mini' } }, response: { timestamp: '2026-01-01T00:00:02.000Z', body: JSON.parse(ANSWER) } };
    const report = pipeline().api({ id: 'a-1', receivedAt: Date.parse('2026-01-01T00:00:03.000Z'), body: Buffer.from(JSON.stringify(body)) });
    expect(report).toMatchObject({ id: 'a-1', receivedAt: '2026-01-01T00:00:03.000Z', durationMs: 2000, model: 'gpt-4o-mini', usage: { inputTokens: 10, outputTokens: 2, totalTokens: 12 } });
  });
});
