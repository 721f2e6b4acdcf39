// The harness of the hostile-input suite (test/integration/hostile-*.test.ts). Property-based (fast-check): every
// endpoint of the relay gets malformed, mistyped, oversized, deeply nested, prototype-poisoning, badly encoded and
// otherwise hostile bodies, headers, query strings, ids and raw HTTP bytes. Each generator knows the class of
// answer its input must get:
//
//   - /api: a documented success (201 / 200 / 404 miss) for inputs that are valid, else a 4xx whose JSON body is
//     {statusCode, code, error, message} with statusCode = the HTTP status and code = the documented RELAY_ERR_*;
//   - the proxy forwards the body unchanged, so its answer is the fake upstream's (computed from the bytes sent,
//     exactly as test/helpers/fake-upstream.ts decides) or a cache hit, or a documented relay 4xx;
//   - raw sockets (requests undici refuses to send) must get a complete HTTP answer, never a dropped connection.
//
// Never a 5xx the upstream did not send, never a dropped connection. Each file runs its own relay; afterwards that
// relay answers /healthz 200 and logged nothing at level error. Every request actually sent is counted; each file
// must send at least its floor in MIN_HOSTILE_REQUESTS, and the floors add up to ≥ 1,000.
import { createHash } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { afterAll, beforeAll, expect } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from './fake-upstream.js';
import { type TestRelay, startRelay } from './relay.js';

export const MAX_BODY = 64 * 1024;
export const MAX_DEPTH = 64;
export const T_REQ = '2024-05-01T12:00:00.000Z';
export const T_RES = '2024-05-01T12:00:01.250Z';
export const NOW = Date.now();
export const JSON_CT = 'application/json';
export const NDJSON_CT = 'application/x-ndjson';
export const NAMESPACE = /^[A-Za-z0-9._-]{1,128}$/;
/** field name used to inject hostile values into an otherwise valid body (removed from generated bases) */
export const HK = '~hostile';
/** "send no content-type header" */
export const NONE = '(none)';
export const PROP_TIMEOUT = 60_000;
export const VALID_REPORT = JSON.stringify({ request: { timestamp: T_REQ }, response: { timestamp: T_RES } });

/**
 * Hostile requests each file must have sent by its last test: a little below what a run sends today, so that
 * together they keep the suite's guarantee of ≥ 1,000 hostile requests (checked in expectHealthyAfterHostileRun).
 * Measured in three runs (numRuns fixes most of each count; the floors stay under that fixed part):
 *   api-bodies 547–554 (495 fixed + GET read-backs of valid reports), api-report 190, api-cache 285,
 *   api-read 350, import 230 (+ one proxied replay per imported entry it accepts),
 *   proxy 292, http 123: about 2,020 in all (the single file before the split sent 2,031).
 * Floors: 480 + 180 + 270 + 330 + 220 + 280 + 115 = 1,875.
 */
export const MIN_HOSTILE_REQUESTS = {
  'api-bodies': 480,
  'api-report': 180,
  'api-cache': 270,
  'api-read': 330,
  import: 220,
  proxy: 280,
  http: 115,
} as const;
export type HostileFile = keyof typeof MIN_HOSTILE_REQUESTS;

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

export interface CallOptions {
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** another relay's URL (default: this file's relay) */
  base?: string;
}

export interface HostileRun {
  /** the fake upstream and the relay under test (started in beforeAll) */
  readonly up: FakeUpstream;
  readonly relay: TestRelay;
  /** requests actually sent, per endpoint ('setup' requests are not hostile and not counted in total()) */
  readonly sent: Record<string, number>;
  /** ids of stored reports (3 stored in beforeAll, grown by the report properties) */
  readonly reportIds: string[];
  /** a cursor the list endpoint really returned (set in beforeAll) */
  readonly realCursor: string;
  count(endpoint: string): void;
  call(endpoint: string, method: string, path: string, opts?: CallOptions): Promise<Answer>;
  total(): number;
}

/** Starts a fake upstream and a relay for this file (beforeAll), stores 3 reports, prints the counts and closes both (afterAll). */
export function useHostileRelay(file: HostileFile): HostileRun {
  let up: FakeUpstream | undefined;
  let relay: TestRelay | undefined;
  let realCursor = '';
  const sent: Record<string, number> = {};
  const reportIds: string[] = [];
  const started = <T>(x: T | undefined): T => {
    if (x === undefined) throw new Error('the hostile relay is not started yet (beforeAll)');
    return x;
  };

  const run: HostileRun = {
    get up() {
      return started(up);
    },
    get relay() {
      return started(relay);
    },
    get realCursor() {
      return realCursor;
    },
    sent,
    reportIds,
    count(endpoint) {
      sent[endpoint] = (sent[endpoint] ?? 0) + 1;
    },
    async call(endpoint, method, path, opts = {}) {
      run.count(endpoint);
      // A Buffer body: fetch adds no content-type of its own (a string body would get text/plain).
      const body = typeof opts.body === 'string' ? Buffer.from(opts.body, 'utf8') : opts.body;
      const res = await fetch(`${opts.base ?? run.relay.url}${path}`, {
        method,
        headers: opts.body !== undefined && typeof opts.body === 'string' && !opts.headers ? { 'content-type': JSON_CT } : (opts.headers ?? {}),
        ...(body !== undefined ? { body } : {}),
      });
      const text = await res.text();
      let json: any;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      return { status: res.status, headers: res.headers, text, json };
    },
    total() {
      return Object.entries(sent).reduce((s, [k, n]) => (k === 'setup' ? s : s + n), 0);
    },
  };

  beforeAll(async () => {
    up = await startFakeUpstream();
    relay = await startRelay({ cacheUrl: 'memory', maxBodyBytes: MAX_BODY, upstreamUrl: up.url, logLevel: 'info' });
    for (let i = 0; i < 3; i++) {
      const a = await run.call('setup', 'POST', '/api/reporting/v2/request', {
        body: JSON.stringify({ request: { timestamp: T_REQ, body: { i } }, response: { timestamp: T_RES } }),
      });
      expect(a.status).toBe(201);
      reportIds.push(a.json.id);
    }
    const page = await run.call('setup', 'GET', '/api/reporting/v2/requests?limit=1');
    expect(page.json.nextCursor).toEqual(expect.any(String));
    realCursor = page.json.nextCursor;
  });

  afterAll(async () => {
    const lines = Object.entries(sent)
      .filter(([k]) => k !== 'setup')
      .map(([k, n]) => `  ${k.padEnd(40)} ${n}`);
    console.log(`hostile requests sent per endpoint (${file}):\n${lines.join('\n')}\n  ${'total'.padEnd(40)} ${run.total()}`);
    await relay?.close();
    await up?.close();
  });

  return run;
}

export function show(a: Answer): string {
  return `HTTP ${a.status} ${a.text.slice(0, 300)}`;
}

/** A relay error: the documented shape, statusCode = HTTP status, code = one of `codes`. */
export function expectRelayError(a: Answer, status: number | number[], codes: string | string[], what = ''): void {
  const ctx = `${what} → ${show(a)}`;
  expect([status].flat(), ctx).toContain(a.status);
  expect(a.headers.get('content-type') ?? '', ctx).toMatch(/^application\/json/);
  expect(a.json, ctx).toMatchObject({
    statusCode: a.status,
    code: expect.stringMatching(/^RELAY_ERR_[A-Z_]+$/),
    error: STATUS_CODES[a.status],
    message: expect.any(String),
  });
  expect([codes].flat(), ctx).toContain(a.json.code);
  expect(a.json.message.length, ctx).toBeGreaterThan(0);
}

/**
 * A relay-made error on a proxied route: the provider's shape (OpenAI's, or Anthropic's for a call that
 * carries anthropic-version), so the SDKs show the message, with the relay's fields beside it.
 */
export function expectProxyError(a: Answer, status: number, code: string, what = ''): void {
  const ctx = `${what} → ${show(a)}`;
  expect(a.status, ctx).toBe(status);
  expect(a.headers.get('content-type') ?? '', ctx).toMatch(/^application\/json/);
  const relay = { statusCode: status, code, message: expect.any(String) };
  if (a.json?.type === 'error') expect(a.json, ctx).toEqual({ type: 'error', error: { type: expect.any(String), message: a.json.message }, ...relay });
  else expect(a.json, ctx).toEqual({ error: { message: a.json.message, type: expect.any(String), code, param: null }, ...relay });
  expect(a.json.message.length, ctx).toBeGreaterThan(0);
}

/**
 * The last test of every hostile file: this file sent at least its floor, the floors of all files add up to
 * ≥ 1,000, and this file's relay is healthy, still works, and logged no error.
 */
export async function expectHealthyAfterHostileRun(run: HostileRun, file: HostileFile): Promise<void> {
  const floors = Object.values(MIN_HOSTILE_REQUESTS).reduce((s, n) => s + n, 0);
  expect(floors, `the floors of all hostile files: ${JSON.stringify(MIN_HOSTILE_REQUESTS)}`).toBeGreaterThanOrEqual(1_000);
  expect(run.total(), JSON.stringify(run.sent)).toBeGreaterThanOrEqual(MIN_HOSTILE_REQUESTS[file]);

  const { call } = run;
  const health = await call('setup', 'GET', '/healthz');
  expect(health.status).toBe(200);
  expect(health.json).toEqual({ status: 'ok' });
  const ready = await call('setup', 'GET', '/readyz');
  expect(ready.status, show(ready)).toBe(200);
  const ok = await call('setup', 'POST', '/api/reporting/v2/request', { body: VALID_REPORT });
  expect(ok.status, show(ok)).toBe(201);
  run.up.reset();
  const proxied = await call('setup', 'POST', '/v1/chat/completions', { body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `after ${createHash('sha1').update(String(Date.now())).digest('hex')}` }] }) });
  expect(proxied.status, show(proxied)).toBe(200);

  const errors = run.relay.logs.filter((l) => l.includes('"level":50') || l.includes('"level":60'));
  const summary = [
    ...new Set(
      errors.map((l) => {
        const j = JSON.parse(l);
        return `${j.msg}: ${j.err?.type ?? ''} ${String(j.err?.message ?? '').slice(0, 120)}`;
      }),
    ),
  ];
  expect(summary, `${errors.length} error lines in the relay log`).toEqual([]);
}
