// Upstream failures map once, by code: refused → 502, slow → 504 after the configured timeout; a client
// that leaves (before the answer starts, or mid-stream) aborts the upstream call and leaves no entry; credentials never land anywhere.
import { readFile, readdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { chat } from '../helpers/proxy-call.js';
import { type TestRelay, get, startRelay } from '../helpers/relay.js';

let up: FakeUpstream;
let relay: TestRelay;

beforeAll(async () => {
  up = await startFakeUpstream();
  relay = await startRelay({ cacheUrl: 'sqlite', upstreamUrl: up.url, upstreamHeadersTimeoutMs: 300, logLevel: 'trace' });
});
afterAll(async () => {
  await relay.close();
  await up.close();
});
beforeEach(() => up.reset());

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

describe('upstream failures', () => {
  it('upstream down → 502 JSON error, reported', async () => {
    const down = await startRelay({ upstreamUrl: `http://127.0.0.1:${await freePort()}` });
    try {
      const r = await chat(down.url, 'anyone there?');
      expect(r.status).toBe(502);
      const body = JSON.parse(r.text);
      const message = expect.stringMatching(/^The upstream http:\/\/127\.0\.0\.1:\d+ could not be reached \(ECONNREFUSED\)$/);
      expect(body).toEqual({
        error: { message, type: 'server_error', code: 'RELAY_ERR_UPSTREAM_UNREACHABLE', param: null },
        statusCode: 502,
        code: 'RELAY_ERR_UPSTREAM_UNREACHABLE',
        message,
      });
      expect(r.cache).toBe('MISS');
      await down.reports.flush();
      const report = await get(`${down.url}/api/reporting/v2/requests/${r.headers.get('x-relay-report-id')}`);
      expect(report.body).toMatchObject({ status: 502, cacheHit: false, proxy: { outcome: 'upstream-error' } });
      // The report keeps the body the client got.
      expect(report.body.response.body).toEqual(body);
      expect((await chat(down.url, 'anyone there?')).status).toBe(502); // the failure was not cached
    } finally {
      await down.close();
    }
  });

  it('an unresolvable upstream host → 503', async () => {
    const dns = await startRelay({ upstreamUrl: 'http://no-such-host.invalid' });
    try {
      const r = await chat(dns.url, 'hello?');
      expect(r.status).toBe(503);
      expect(JSON.parse(r.text).code).toBe('RELAY_ERR_UPSTREAM_DNS');
    } finally {
      await dns.close();
    }
  });

  it('a slow upstream → 504 after the configured headers timeout', async () => {
    up.delayMs = 2000;
    const started = Date.now();
    const r = await chat(relay.url, 'slow please');
    const took = Date.now() - started;
    expect(r.status).toBe(504);
    const message = `The upstream ${up.url} did not answer in time (UND_ERR_HEADERS_TIMEOUT)`;
    expect(JSON.parse(r.text)).toEqual({
      error: { message, type: 'timeout', code: 'RELAY_ERR_UPSTREAM_TIMEOUT', param: null },
      statusCode: 504,
      code: 'RELAY_ERR_UPSTREAM_TIMEOUT',
      message,
    });
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(1500);
  });
});

describe('client abort', () => {
  it('a client that leaves mid-stream aborts the upstream request and leaves no entry', async () => {
    up.eventGapMs = 100;
    const controller = new AbortController();
    const res = await fetch(`${relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-abort' },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'a long answer please' }] }),
      signal: controller.signal,
    });
    expect(res.headers.get('x-relay-cache')).toBe('MISS');
    const reader = res.body!.getReader();
    await reader.read(); // the first event arrived
    controller.abort();
    await new Promise((r) => setTimeout(r, 300));
    expect(up.closedEarly).toBe(1);

    up.eventGapMs = 0;
    const again = await chat(relay.url, 'a long answer please', { stream: true, headers: { authorization: 'Bearer sk-abort' } });
    expect(again.cache).toBe('MISS');
    expect(up.calls).toHaveLength(2);
    await relay.reports.flush();
    const report = await get(`${relay.url}/api/reporting/v2/requests/${res.headers.get('x-relay-report-id')}`);
    expect(report.body).toMatchObject({ proxy: { outcome: 'client-abort', cacheStatus: 'MISS' } });
  });

  it('a client that leaves before the answer starts aborts the upstream request at once, and the call is reported', async () => {
    up.delayMs = 250; // a model still thinking (below this relay's 300 ms headers timeout)
    const controller = new AbortController();
    const pending = fetch(`${relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-abort', 'x-relay-client': 'leaves-early' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'think for a while' }] }),
      signal: controller.signal,
    });
    pending.catch(() => undefined);
    const deadline = Date.now() + 2000;
    while (up.calls.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(up.calls).toHaveLength(1);
    const leftAt = Date.now();
    controller.abort();
    await expect(pending).rejects.toThrow();
    while (up.closedEarly === 0 && Date.now() - leftAt < 1000) await new Promise((r) => setTimeout(r, 5));
    expect(up.closedEarly).toBe(1);
    // the upstream saw the call go before its answer was due, not when it tried to answer
    expect(Date.now() - leftAt).toBeLessThan(200);

    up.delayMs = 0;
    await relay.reports.flush();
    const reports = await get(`${relay.url}/api/reporting/v2/requests?client=leaves-early&limit=10`);
    expect(reports.body.items).toHaveLength(1);
    const report = await get(`${relay.url}/api/reporting/v2/requests/${reports.body.items[0].id}`);
    expect(report.body).toMatchObject({ response: { status: 499 }, proxy: { outcome: 'client-abort', cacheStatus: 'MISS' } });
    // nothing was stored: the same call goes upstream again
    const again = await chat(relay.url, 'think for a while', { headers: { authorization: 'Bearer sk-abort' } });
    expect(again.cache).toBe('MISS');
    expect(up.calls).toHaveLength(2);
  });
});

describe('credentials', () => {
  it('are never in a report, a file in the data dir, or the log', async () => {
    const secret = 'sk-live-SECRET-4f1c9a7e2b';
    await chat(relay.url, 'secret test', { headers: { authorization: `Bearer ${secret}`, 'x-api-key': secret, cookie: `session=${secret}` } });
    await chat(relay.url, 'secret test', { headers: { authorization: `Bearer ${secret}` } }); // a hit
    await chat(relay.url, 'secret stream', { stream: true, headers: { authorization: `Bearer ${secret}` } });
    up.delayMs = 2000;
    await chat(relay.url, 'secret timeout', { headers: { authorization: `Bearer ${secret}` } }); // an error
    up.delayMs = 0;
    expect(up.calls.some((c) => c.headers.authorization === `Bearer ${secret}`)).toBe(true); // forwarded

    await relay.reports.flush();
    const reports = await get(`${relay.url}/api/reporting/v2/requests?limit=1000`);
    expect(reports.body.items.length).toBeGreaterThanOrEqual(4);
    expect(JSON.stringify(reports.body)).not.toContain(secret);
    for (const name of await readdir(relay.dataDir)) {
      const bytes = await readFile(join(relay.dataDir, name));
      expect(bytes.includes(secret), name).toBe(false);
    }
    expect(relay.logs.length).toBeGreaterThan(0);
    expect(relay.logs.join('')).not.toContain(secret);
  });
});
