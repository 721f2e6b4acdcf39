// What crosses from the event loop to the report worker: a batch of records, and within it a cache hit of
// the same kind as an earlier record of the batch (repeatOf) as its id and times only. Decoded, every record
// is what was sent, and the worker makes the same report of a repeat as of the whole record.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type DeferredBytes, type OutgoingProxyRecord, type ProxyFacts, type ProxyRecord, decodeBatch, encodeBatch, repeatOf } from '../../../src/core/exchange-record.js';
import { captureBody } from '../../../src/core/captured-body.js';
import { createPriceTable } from '../../../src/core/pricing.js';
import { createReportPipeline } from '../../../src/core/report-pipeline.js';
import { ANSWER, REQUEST, missFacts } from '../../helpers/proxy-facts.js';

/** A hit's answer is its cache entry's bytes: one buffer for every hit of that entry. */
const ANSWER_BYTES = Buffer.from(ANSWER);

function hit(n: number, over: Partial<ProxyFacts> = {}, request = REQUEST, response: OutgoingProxyRecord['response'] = ANSWER_BYTES): OutgoingProxyRecord {
  return {
    facts: missFacts({
      id: `h-${n}`,
      startedAt: 1_800_000_000_000 + n * 1000,
      endedAt: 1_800_000_000_000 + n * 1000 + n,
      cacheStatus: 'HIT',
      originReportId: 'origin-1',
      cacheKey: 'k'.repeat(64),
      relayHeaders: [['x-relay-environment', 'ci']],
      requestSha256: 'a'.repeat(64),
      ...over,
    }),
    request: Buffer.from(request),
    response,
  };
}

function bytesOf(b: OutgoingProxyRecord['response']): Buffer | undefined {
  if (b === undefined) return undefined;
  if (b instanceof Uint8Array) return Buffer.from(b);
  if (Array.isArray(b)) return Buffer.concat(b as readonly Uint8Array[]);
  const out = Buffer.alloc((b as DeferredBytes).size);
  (b as DeferredBytes).writeInto(out);
  return out;
}

describe('a batch', () => {
  it('rebuilds a stream copied as its events\' differences in its own buffer, between the other bodies', () => {
    const events = Array.from({ length: 80 }, (_, i) => `data: {"id":"c-1","choices":[{"delta":{"content":"w${i}"}}]}\n\n`).join('');
    const stream = captureBody(1 << 20, { events: true });
    for (let at = 0; at < events.length; at += 97) stream.add(Buffer.from(events.slice(at, at + 97)));
    const wire = stream.wire()!;
    // past its first 4 KB the copy is not a buffer or blocks: it writes itself into the batch
    expect(wire instanceof Uint8Array || Array.isArray(wire)).toBe(false);
    const miss = (n: number, response: OutgoingProxyRecord['response']) => hit(n, { cacheStatus: 'MISS', originReportId: undefined }, REQUEST, response);
    const blocks = [Buffer.from('{"a":'), Buffer.from('1}')];
    const records = [hit(0), miss(1, wire), miss(2, blocks), miss(3, wire)];
    const batch = encodeBatch(records, [{ id: 'api-1', receivedAt: 1, body: Buffer.from('{"x":2}') }]);
    expect(batch.bytes.byteLength).toBe(4 * Buffer.byteLength(REQUEST) + ANSWER_BYTES.length + 2 * events.length + 7 + 7);
    const { proxy, api } = decodeBatch(batch);
    expect(proxy.map((r) => bytesOf(r.response)!.toString())).toEqual([ANSWER, events, '{"a":1}', events]);
    expect(proxy.map((r) => bytesOf(r.request)!.toString())).toEqual([REQUEST, REQUEST, REQUEST, REQUEST]);
    expect(Buffer.from(api[0]!.body).toString()).toBe('{"x":2}');
  });
});

describe('repeats of a hit in a batch', () => {
  it('cross as an id and two times, and decode to the very records sent', () => {
    const records = Array.from({ length: 100 }, (_, n) => hit(n));
    const batch = encodeBatch(records, []);
    // one copy of the bodies, one record's facts
    expect(batch.bytes.byteLength).toBe(Buffer.byteLength(REQUEST) + ANSWER_BYTES.length);
    expect(batch.meta.length).toBeLessThan(JSON.stringify(records[0]!.facts).length + 100 * 60);
    const { proxy } = decodeBatch(batch);
    expect(proxy.map((r) => r.facts)).toEqual(records.map((r) => r.facts));
    for (const r of proxy) {
      expect(Buffer.from(r.request!).toString()).toBe(REQUEST);
      expect(Buffer.from(r.response!).toString()).toBe(ANSWER);
    }
    expect(proxy[0]!.sameAs).toBeUndefined();
    expect(proxy.slice(1).every((r) => r.sameAs === proxy[0])).toBe(true);
  });

  it('are only hits of the same origin, untraced, the same in every fact but id and times, with the same bytes', () => {
    const first = hit(1);
    expect(repeatOf(first, hit(2))).toBe(true);
    // the same request in another buffer is the same request
    expect(repeatOf(first, hit(3, {}, REQUEST))).toBe(true);
    const differing: Array<Partial<ProxyFacts>> = [
      { status: 203 },
      { cacheStatus: 'COALESCED' },
      { outcome: 'client-abort' },
      { method: 'PUT' },
      { url: '/v1/other' },
      { upstream: 'http://elsewhere' },
      { relayHeaders: [['x-relay-environment', 'prod']] },
      { relayHeaders: [['x-relay-environment', 'ci'], ['x-relay-property-team', 'a']] },
      { relayHeaders: [['x-relay-environment', 'ci', 'extra']] },
      { cacheEnabled: false },
      { cacheKey: 'j'.repeat(64) },
      { originReportId: 'origin-2' },
      { costSavedUsd: 0.5 },
      { upstreamMs: 3 },
      { error: 'boom' },
      { streamed: true },
      { encoding: 'gzip' },
      { requestJson: 'unchecked' },
      { requestSha256: 'b'.repeat(64) },
      { trace: { traceId: 't', spanId: 's' } as unknown as ProxyFacts['trace'] },
    ];
    for (const over of differing) expect(repeatOf(first, hit(4, over)), JSON.stringify(over)).toBe(false);
    expect(repeatOf(hit(5, { trace: { traceId: 't', spanId: 's' } as unknown as ProxyFacts['trace'] }), hit(6))).toBe(false);
    expect(repeatOf(first, hit(7, {}, `${REQUEST} `))).toBe(false);
    expect(repeatOf(first, hit(8, {}, REQUEST, Buffer.from(ANSWER.replace('hello', 'HELLO'))))).toBe(false);
    expect(repeatOf(first, hit(9, {}, REQUEST, [ANSWER_BYTES]))).toBe(false);
    // a miss is never a repeat, even of a miss like it
    const miss = hit(10, { cacheStatus: 'MISS', originReportId: undefined });
    expect(repeatOf(miss, hit(11, { cacheStatus: 'MISS', originReportId: undefined }))).toBe(false);
  });

  it('decode to what was sent, and the worker makes the same reports of them, for any mix of records (property)', () => {
    const prices = createPriceTable({ 'gpt-4o-mini': { input: 0.15, output: 0.6 } });
    const pipeline = () => createReportPipeline({ prices, maxBodyBytes: 1 << 20, maxJsonDepth: 64, defaults: { client: 'llm-relay', clientVersion: '9.9.9', environment: 'test' } });
    const answers = [ANSWER_BYTES, Buffer.from(ANSWER.replace('hello', 'hi there'))];
    const kind = fc.record({
      origin: fc.constantFrom('origin-1', 'origin-2'),
      cacheStatus: fc.constantFrom('HIT', 'HIT', 'HIT', 'MISS', 'COALESCED') as fc.Arbitrary<ProxyFacts['cacheStatus']>,
      env: fc.constantFrom('ci', 'prod'),
      status: fc.constantFrom(200, 200, 203),
      answer: fc.constantFrom(0, 0, 1, 2),
      request: fc.constantFrom(REQUEST, REQUEST, '{"model":"gpt-4o-mini","messages":[]}'),
      times: fc.tuple(fc.integer({ min: 1_700_000_000_000, max: 1_800_000_000_000 }), fc.integer({ min: 0, max: 60_000 })),
    });
    fc.assert(
      fc.property(fc.array(kind, { minLength: 1, maxLength: 40 }), (kinds) => {
        const records: OutgoingProxyRecord[] = kinds.map((k, n) =>
          hit(
            n,
            {
              originReportId: k.cacheStatus === 'MISS' ? undefined : k.origin,
              cacheStatus: k.cacheStatus,
              relayHeaders: [['x-relay-environment', k.env]],
              status: k.status,
              startedAt: k.times[0],
              endedAt: k.times[0] + k.times[1],
              requestSha256: k.request === REQUEST ? 'a'.repeat(64) : 'c'.repeat(64),
            },
            k.request,
            // a fresh buffer of the same bytes (2) is the same answer too
            k.answer === 2 ? Buffer.from(ANSWER) : answers[k.answer],
          ),
        );
        const { proxy } = decodeBatch(encodeBatch(records, []));
        expect(proxy.map((r) => r.facts)).toEqual(records.map((r) => r.facts));
        proxy.forEach((r, i) => {
          expect(bytesOf(r.request)).toEqual(bytesOf(records[i]!.request));
          expect(bytesOf(r.response)).toEqual(bytesOf(records[i]!.response));
          if (r.sameAs) expect(proxy.indexOf(r.sameAs)).toBeLessThan(i);
        });
        // the reports: as from the records one by one (a batch of one never has a repeat)
        const compact = pipeline();
        const whole = pipeline();
        const one = (r: OutgoingProxyRecord): ProxyRecord => decodeBatch(encodeBatch([r], [])).proxy[0]!;
        proxy.forEach((r, i) => expect(JSON.stringify(compact.proxy(r))).toBe(JSON.stringify(whole.proxy(one(records[i]!)))));
      }),
      { numRuns: 200 },
    );
  });
});
