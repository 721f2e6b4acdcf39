// The stats part of the report store contract: hand-computed totals, percentiles and groups over a small set
// of reports, so SQLite and PostgreSQL must agree to the last digit. Registered by reportStoreSuite.
import { beforeEach, describe, expect, it } from 'vitest';
import type { ReportStats, ReportStore, StatsGroupBy } from '../../src/storage/report-store.js';
import { makeReport } from './report-fixtures.js';

const EMPTY: ReportStats = {
  requests: 0,
  cacheHits: 0,
  hitRatio: null,
  inputTokens: 0,
  outputTokens: 0,
  costUsd: 0,
  costSavedUsd: 0,
  errors: 0,
  latencyMs: { p50: null, p95: null, p99: null },
};

const claude = {
  model: 'claude-sonnet-4',
  provider: 'anthropic',
  usage: { inputTokens: 100, outputTokens: 20, totalTokens: 120 },
};
const staging = { metadata: { environment: 'staging', promptId: 'summarize', client: 'cli' } };

// Durations 100, 200, 300, 400, 1000 and one without; two cache hits carrying what they saved; statuses 500
// and 429 as errors; one report without usage or cost; the last two on both sides of a UTC midnight.
const data = [
  makeReport('s1', 0, { durationMs: 100 }),
  makeReport('s2', 1, { durationMs: 200, cacheHit: true, costUsd: 0, costSavedUsd: 0.00033 }),
  makeReport('s3', 2, { ...claude, ...staging, durationMs: 300, status: 500, costUsd: 0.0015 }),
  makeReport('s4', 3, { ...claude, durationMs: 400, status: 429, cacheHit: true, costUsd: 0, costSavedUsd: 0.0015 }),
  makeReport('s5', 0, {
    ...staging,
    request: { timestamp: '2025-03-01T23:59:59.999Z' },
    durationMs: 1000,
    model: null,
    usage: null,
    costUsd: null,
  }),
  makeReport('s6', 0, {
    metadata: { client: 'web' },
    request: { timestamp: '2025-03-02T00:00:00.000Z' },
    properties: { team: 'ads' },
    durationMs: null,
    status: null,
    // upper case sorts before lower case bytewise, whatever the database's locale
    model: 'GPT-4o-mini',
    usage: { inputTokens: 1, outputTokens: 2, totalTokens: 3 },
    costUsd: 0.000001,
  }),
];

const latency = (p50: number | null, p95: number | null, p99: number | null) => ({ p50, p95, p99 });

const TOTALS: ReportStats = {
  requests: 6,
  cacheHits: 2,
  hitRatio: 2 / 6,
  inputTokens: 12 + 12 + 100 + 100 + 0 + 1,
  outputTokens: 30 + 30 + 20 + 20 + 0 + 2,
  costUsd: 0.001831,
  costSavedUsd: 0.00183,
  errors: 2,
  latencyMs: latency(300, 880, 976),
};
/** s6 alone: no duration, no cache hit */
const S6: ReportStats = { ...EMPTY, requests: 1, hitRatio: 0, inputTokens: 1, outputTokens: 2, costUsd: 0.000001 };
/** s3 and s5 (staging, client cli): durations 300 and 1000 */
const STAGING: ReportStats = {
  ...EMPTY,
  requests: 2,
  hitRatio: 0,
  inputTokens: 100,
  outputTokens: 20,
  costUsd: 0.0015,
  errors: 1,
  latencyMs: latency(650, 965, 993),
};
/** s2 and s4: the cache hits, durations 200 and 400 */
const HITS: ReportStats = {
  requests: 2,
  cacheHits: 2,
  hitRatio: 1,
  inputTokens: 112,
  outputTokens: 50,
  costUsd: 0,
  costSavedUsd: 0.00183,
  errors: 1,
  latencyMs: latency(300, 390, 398),
};

export function reportStatsCases(getStore: () => ReportStore): void {
  describe('stats', () => {
    const stats = (filter: Parameters<ReportStore['stats']>[0] = {}, groupBy?: StatsGroupBy) =>
      getStore().stats(filter, groupBy);

    it('answers zeros, a null hit ratio and null percentiles for no reports', async () => {
      expect(await stats()).toEqual({ totals: EMPTY });
      expect(await stats({}, 'model')).toEqual({ totals: EMPTY, groups: [] });
      await getStore().insertMany(data);
      expect(await stats({ model: 'nothing-like-this' }, 'day')).toEqual({ totals: EMPTY, groups: [] });
    });

    it('counts as errors a status of 400 or more and a proxied stream that broke, not a client that left', async () => {
      const proxied = (outcome: unknown) => ({ proxy: { method: 'POST', path: '/v1/chat/completions', outcome } });
      await getStore().insertMany([
        makeReport('e1', 0, proxied('complete')),
        // the answer started with 200, then the upstream cut the stream
        makeReport('e2', 1, proxied('stream-error')),
        // the client left mid-stream (the upstream's 200 stands), and one left before any answer (499)
        makeReport('e3', 2, proxied('client-abort')),
        makeReport('e4', 3, { ...proxied('client-abort'), status: 499 }),
        makeReport('e5', 4, { ...proxied('upstream-error'), status: 502 }),
        // a direct report may carry the same field (unknown fields are kept); one that is not text is ignored
        makeReport('e6', 5, { ...proxied('stream-error'), metadata: { environment: 'direct' } }),
        makeReport('e7', 6, proxied(['stream-error'])),
        makeReport('e8', 7, { proxy: 'stream-error' }),
      ]);
      expect((await stats()).totals.errors).toBe(4);
      expect((await stats({ environment: 'direct' }, 'day')).groups?.map((g) => [g.key, g.errors])).toEqual([
        ['2025-03-01', 1],
      ]);
    });

    describe('over known reports', () => {
      beforeEach(async () => {
        await getStore().insertMany(data);
      });

      it('totals requests, hits, tokens, costs, errors and percentile_cont latencies', async () => {
        expect(await stats()).toEqual({ totals: TOTALS });
      });

      it('takes the list filters', async () => {
        expect(await stats({ cacheHit: true })).toEqual({ totals: HITS });
        expect(await stats({ environment: 'staging' })).toEqual({ totals: STAGING });
        expect(await stats({ properties: { team: 'ads' } })).toEqual({ totals: S6 });
        // from inclusive, to exclusive: s2, s3, s4
        expect(await stats({ from: '2025-03-01T12:01:00.000Z', to: '2025-03-01T12:04:00.000Z' })).toEqual({
          totals: {
            requests: 3,
            cacheHits: 2,
            hitRatio: 2 / 3,
            inputTokens: 212,
            outputTokens: 70,
            costUsd: 0.0015,
            costSavedUsd: 0.00183,
            errors: 2,
            latencyMs: latency(300, 390, 398),
          },
        });
      });

      it('groups by model, key ascending bytewise, the null key last', async () => {
        expect(await stats({}, 'model')).toEqual({
          totals: TOTALS,
          groups: [
            { key: 'GPT-4o-mini', ...S6 },
            {
              key: 'claude-sonnet-4',
              requests: 2,
              cacheHits: 1,
              hitRatio: 0.5,
              inputTokens: 200,
              outputTokens: 40,
              costUsd: 0.0015,
              costSavedUsd: 0.0015,
              errors: 2,
              latencyMs: latency(350, 395, 399),
            },
            {
              key: 'gpt-4o',
              requests: 2,
              cacheHits: 1,
              hitRatio: 0.5,
              inputTokens: 24,
              outputTokens: 60,
              costUsd: 0.00033,
              costSavedUsd: 0.00033,
              errors: 0,
              latencyMs: latency(150, 195, 199),
            },
            { key: null, ...EMPTY, requests: 1, hitRatio: 0, latencyMs: latency(1000, 1000, 1000) },
          ],
        });
      });

      it('groups by environment and by client', async () => {
        const production: ReportStats = {
          requests: 3,
          cacheHits: 2,
          hitRatio: 2 / 3,
          inputTokens: 124,
          outputTokens: 80,
          costUsd: 0.00033,
          costSavedUsd: 0.00183,
          errors: 1,
          latencyMs: latency(200, 380, 396),
        };
        expect(await stats({}, 'environment')).toEqual({
          totals: TOTALS,
          groups: [
            { key: 'production', ...production },
            { key: 'staging', ...STAGING },
            { key: null, ...S6 },
          ],
        });
        expect(await stats({}, 'client')).toEqual({
          totals: TOTALS,
          groups: [
            { key: 'cli', ...STAGING },
            {
              key: 'web',
              ...production,
              requests: 4,
              hitRatio: 0.5,
              inputTokens: 125,
              outputTokens: 82,
              costUsd: 0.000331,
            },
          ],
        });
      });

      it('groups by UTC day of the request, split exactly at midnight', async () => {
        expect(await stats({}, 'day')).toEqual({
          totals: TOTALS,
          groups: [
            {
              key: '2025-03-01',
              ...TOTALS,
              requests: 5,
              hitRatio: 2 / 5,
              inputTokens: 224,
              outputTokens: 100,
              costUsd: 0.00183,
            },
            { key: '2025-03-02', ...S6 },
          ],
        });
      });

      it('groups a filtered selection', async () => {
        expect(await stats({ cacheHit: true }, 'model')).toEqual({
          totals: HITS,
          groups: [
            {
              key: 'claude-sonnet-4',
              ...HITS,
              requests: 1,
              cacheHits: 1,
              inputTokens: 100,
              outputTokens: 20,
              costSavedUsd: 0.0015,
              latencyMs: latency(400, 400, 400),
            },
            {
              key: 'gpt-4o',
              ...HITS,
              requests: 1,
              cacheHits: 1,
              inputTokens: 12,
              outputTokens: 30,
              costSavedUsd: 0.00033,
              errors: 0,
              latencyMs: latency(200, 200, 200),
            },
          ],
        });
      });

      it('rejects a bad groupBy or property name with RELAY_ERR_VALIDATION', async () => {
        await expect(stats({}, 'week' as StatsGroupBy)).rejects.toMatchObject({ code: 'RELAY_ERR_VALIDATION' });
        await expect(stats({ properties: { 'a"b': 'x' } })).rejects.toMatchObject({ code: 'RELAY_ERR_VALIDATION' });
      });
    });
  });
}
