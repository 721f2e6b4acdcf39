// GET /api/reporting/v2/stats and GET /api/reporting/v2/requests/export end to end: reports with known
// numbers go in through POST /api/reporting/v2/request, whole bodies come out. Stats run on SQLite and on
// the real PostgreSQL; there the table is shared with other tests, so every query is scoped to this run's
// client.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestRelay, get, post, startRelay } from '../helpers/relay.js';
import { DATABASE_URL, requirePostgres } from '../helpers/servers.js';

const at = (iso: string, plusMs = 0): string => new Date(Date.parse(iso) + plusMs).toISOString();
const DAY1 = '2024-05-01T12:00:00.000Z';
const DAY2 = '2024-05-02T00:00:00.000Z';

interface Spec {
  model?: string;
  tokens?: [number, number];
  durationMs: number;
  start?: string;
  status?: number;
  environment: string;
  cacheHit?: boolean;
  extra?: Record<string, unknown>;
}

function report(client: string, s: Spec): Record<string, unknown> {
  const start = s.start ?? DAY1;
  const [input, output] = s.tokens ?? [0, 0];
  const usage = s.tokens && { prompt_tokens: input, completion_tokens: output, total_tokens: input + output };
  return {
    metadata: { client, environment: s.environment },
    request: { timestamp: start, body: s.model ? { model: s.model, messages: [] } : { messages: [] } },
    response: { timestamp: at(start, s.durationMs), status: s.status ?? 200, ...(usage ? { body: { usage } } : {}) },
    cacheEnabled: true,
    cacheHit: s.cacheHit ?? false,
    ...s.extra,
  };
}

// Prices (config/prices.json, USD per million tokens): gpt-4o-mini 0.15 in / 0.6 out, gpt-4o 2.5 / 10.
// r1 costs 0.00045, r3 0.00035; the hits r2 and r4 cost 0 and saved 0.00045 (r2's own price) and 0.01
// (r4 says so); r5 has no model, usage or cost and is the only report of the next UTC day.
const gold = { tier: 'gold' };
const SPECS: Spec[] = [
  { model: 'gpt-4o-mini', tokens: [1000, 500], durationMs: 100, environment: 'prod', extra: { properties: gold } },
  { model: 'gpt-4o-mini', tokens: [1000, 500], durationMs: 200, environment: 'prod', cacheHit: true },
  { model: 'gpt-4o', tokens: [100, 10], durationMs: 300, environment: 'dev', status: 500, extra: { properties: gold } },
  {
    model: 'gpt-4o', tokens: [100, 10], durationMs: 400, environment: 'prod', status: 429,
    cacheHit: true, extra: { costSavedUsd: 0.01 },
  },
  { durationMs: 1000, start: DAY2, environment: 'dev' },
];

const stats = (over: Record<string, unknown>) => ({
  requests: 0,
  cacheHits: 0,
  hitRatio: 0,
  inputTokens: 0,
  outputTokens: 0,
  costUsd: 0,
  costSavedUsd: 0,
  errors: 0,
  latencyMs: { p50: null, p95: null, p99: null },
  ...over,
});
const latency = (p50: number, p95: number, p99: number) => ({ p50, p95, p99 });

const TOTALS = stats({
  requests: 5,
  cacheHits: 2,
  hitRatio: 0.4,
  inputTokens: 2200,
  outputTokens: 1020,
  costUsd: 0.0008,
  costSavedUsd: 0.01045,
  errors: 2,
  latencyMs: latency(300, 880, 976),
});
const PROD = stats({
  requests: 3,
  cacheHits: 2,
  hitRatio: 2 / 3,
  inputTokens: 2100,
  outputTokens: 1010,
  costUsd: 0.00045,
  costSavedUsd: 0.01045,
  errors: 1,
  latencyMs: latency(200, 380, 396),
});
const DEV = stats({
  requests: 2, inputTokens: 100, outputTokens: 10, costUsd: 0.00035,
  errors: 1, latencyMs: latency(650, 965, 993),
});
const R5 = stats({ requests: 1, latencyMs: latency(1000, 1000, 1000) });

async function postAll(relay: TestRelay, bodies: Record<string, unknown>[]): Promise<any[]> {
  const stored = await Promise.all(bodies.map((b) => post(`${relay.url}/api/reporting/v2/request`, b)));
  for (const res of stored) expect(res.status).toBe(201);
  return stored.map((res) => res.body);
}

/** The stats checks, against whichever relay `ctx` holds; `scope` is added to every query. */
function statsChecks(ctx: { relay?: TestRelay; scope: string; setupError?: unknown }): void {
  const statsOf = async (query = '') => {
    if (ctx.setupError) throw ctx.setupError;
    return get(`${ctx.relay!.url}/api/reporting/v2/stats?${ctx.scope}${query}`);
  };

  it('answers the totals of every report', async () => {
    expect(await statsOf()).toEqual({ status: 200, body: { totals: TOTALS } });
  });

  it('takes the list filters, property filters included', async () => {
    expect((await statsOf('&environment=prod')).body).toEqual({ totals: PROD });
    expect((await statsOf('&cacheHit=true&status=429')).body).toEqual({
      totals: stats({
        requests: 1, cacheHits: 1, hitRatio: 1, inputTokens: 100, outputTokens: 10,
        costSavedUsd: 0.01, errors: 1, latencyMs: latency(400, 400, 400),
      }),
    });
    expect((await statsOf('&property.tier=gold')).body).toEqual({
      totals: stats({
        requests: 2, inputTokens: 1100, outputTokens: 510, costUsd: 0.0008,
        errors: 1, latencyMs: latency(200, 290, 298),
      }),
    });
    expect((await statsOf(`&from=${DAY2}`)).body).toEqual({ totals: R5 });
    expect((await statsOf('&model=none')).body).toEqual({ totals: stats({ hitRatio: null }) });
  });

  it('groups by model, environment and day, keys ascending and null last', async () => {
    expect((await statsOf('&groupBy=model')).body).toEqual({
      totals: TOTALS,
      groups: [
        {
          key: 'gpt-4o',
          ...stats({ requests: 2, cacheHits: 1, hitRatio: 0.5, inputTokens: 200, outputTokens: 20 }),
          costUsd: 0.00035, costSavedUsd: 0.01, errors: 2, latencyMs: latency(350, 395, 399),
        },
        {
          key: 'gpt-4o-mini',
          ...stats({ requests: 2, cacheHits: 1, hitRatio: 0.5, inputTokens: 2000, outputTokens: 1000 }),
          costUsd: 0.00045, costSavedUsd: 0.00045, latencyMs: latency(150, 195, 199),
        },
        { key: null, ...R5 },
      ],
    });
    expect((await statsOf('&groupBy=environment')).body).toEqual({
      totals: TOTALS,
      groups: [
        { key: 'dev', ...DEV },
        { key: 'prod', ...PROD },
      ],
    });
    expect((await statsOf('&groupBy=day')).body).toEqual({
      totals: TOTALS,
      groups: [
        { key: '2024-05-01', ...TOTALS, requests: 4, hitRatio: 0.5, latencyMs: latency(250, 385, 397) },
        { key: '2024-05-02', ...R5 },
      ],
    });
    expect((await statsOf('&groupBy=client&environment=dev')).body).toEqual({
      totals: DEV,
      groups: [{ key: new URLSearchParams(ctx.scope).get('client') ?? 'stats', ...DEV }],
    });
  });

  it('rejects an unknown groupBy with RELAY_ERR_VALIDATION', async () => {
    expect(await statsOf('&groupBy=week')).toEqual({
      status: 400,
      body: {
        statusCode: 400,
        code: 'RELAY_ERR_VALIDATION',
        error: 'Bad Request',
        message: 'querystring/groupBy must be equal to one of the allowed values',
      },
    });
  });
}

describe('on SQLite', () => {
  const ctx: { relay?: TestRelay; scope: string } = { scope: '' };
  let stored: any[];
  beforeAll(async () => {
    ctx.relay = await startRelay();
    stored = await postAll(ctx.relay, SPECS.map((s) => report('stats', s)));
  });
  afterAll(async () => ctx.relay?.close());

  describe('GET /api/reporting/v2/stats', () => statsChecks(ctx));

  describe('GET /api/reporting/v2/requests/export', () => {
    const exported = async (query = '') => {
      const res = await fetch(`${ctx.relay!.url}/api/reporting/v2/requests/export${query}`);
      const text = await res.text();
      expect(text === '' || text.endsWith('\n')).toBe(true);
      const lines = text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
      return { status: res.status, type: res.headers.get('content-type'), lines };
    };
    /** newest request first, then id descending, as the list orders */
    const newestFirst = (reports: any[]) =>
      [...reports].sort(
        (a, b) => Date.parse(b.request.timestamp) - Date.parse(a.request.timestamp) || (a.id < b.id ? 1 : -1),
      );

    it('streams every report as NDJSON, newest first, exactly as stored', async () => {
      const res = await exported();
      expect(res.status).toBe(200);
      expect(res.type).toBe('application/x-ndjson');
      expect(res.lines).toEqual(newestFirst(stored));
      // the static segment did not take the place of /requests/:id
      const one = await get(`${ctx.relay!.url}/api/reporting/v2/requests/${stored[0].id}`);
      expect(one).toEqual({ status: 200, body: stored[0] });
    });

    it('takes the list filters', async () => {
      expect((await exported('?environment=dev')).lines).toEqual(newestFirst([stored[2], stored[4]]));
      expect((await exported('?property.tier=gold&cacheHit=false')).lines).toEqual(newestFirst([stored[0], stored[2]]));
      expect(await exported('?model=none')).toEqual({ status: 200, type: 'application/x-ndjson', lines: [] });
    });

    it('pages through the store: more reports than one page, each once, in order', async () => {
      // its own relay, so the other tests' numbers stay as they are
      const relay = await startRelay();
      try {
        const bulk: any[] = [];
        // equal timestamps in threes: pages also split between reports ordered by id alone
        const bodies = Array.from({ length: 1001 }, (_, i) =>
          report('bulk', { model: 'gpt-4o', durationMs: 5, environment: 'bulk', start: at(DAY1, (i % 334) * 1000) }),
        );
        for (let i = 0; i < bodies.length; i += 100) bulk.push(...(await postAll(relay, bodies.slice(i, i + 100))));
        const res = await fetch(`${relay.url}/api/reporting/v2/requests/export?client=bulk`);
        const lines = (await res.text()).split('\n');
        expect(lines.pop()).toBe('');
        expect(lines.map((l) => JSON.parse(l))).toEqual(newestFirst(bulk));
      } finally {
        await relay.close();
      }
    });

    it('answers a bad filter with a 400 before streaming', async () => {
      const res = await get(`${ctx.relay!.url}/api/reporting/v2/requests/export?property.a%22b=x`);
      expect(res).toEqual({
        status: 400,
        body: {
          statusCode: 400,
          code: 'RELAY_ERR_VALIDATION',
          error: 'Bad Request',
          message: 'querystring/property.a"b is not a valid property name',
        },
      });
    });
  });

  it('documents both routes in the OpenAPI document', async () => {
    const doc = (await get(`${ctx.relay!.url}/docs/json`)).body;
    expect(doc.paths['/api/reporting/v2/stats'].get.parameters).toContainEqual(
      expect.objectContaining({
        name: 'groupBy',
        in: 'query',
        schema: expect.objectContaining({ enum: ['model', 'environment', 'client', 'day'] }),
      }),
    );
    const exportOk = doc.paths['/api/reporting/v2/requests/export'].get.responses['200'];
    expect(Object.keys(exportOk.content)).toEqual(['application/x-ndjson']);
  });
});

describe('on PostgreSQL', () => {
  const client = `stats-${randomUUID()}`;
  const ctx: { relay?: TestRelay; scope: string; setupError?: unknown } = { scope: `client=${client}` };
  // A failing beforeAll would mark the tests skipped; each test fails with the reason instead.
  beforeAll(async () => {
    try {
      await requirePostgres();
      ctx.relay = await startRelay({ reportsUrl: DATABASE_URL });
      await postAll(ctx.relay, SPECS.map((s) => report(client, s)));
    } catch (err) {
      ctx.setupError = err;
    }
  });
  afterAll(async () => ctx.relay?.close());

  describe('GET /api/reporting/v2/stats', () => statsChecks(ctx));
});
