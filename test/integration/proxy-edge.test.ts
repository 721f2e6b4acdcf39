// The proxy edge (src/http/proxy-edge.ts) answers proxied calls beside fastify: what fastify did for the
// proxy route, it now does itself — the access log line, a malformed URL, the drain at shutdown — and the
// relay's own routes stay with fastify.
import { createServer, request as httpRequest } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { rm } from 'node:fs/promises';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type RawResponse, parseResponses } from '../helpers/raw-http.js';
import { type TestRelay, startRelay, tempDir } from '../helpers/relay.js';

let up: FakeUpstream;
const relays: TestRelay[] = [];
beforeAll(async () => {
  up = await startFakeUpstream();
});
afterEach(async () => {
  for (const r of relays.splice(0)) await r.close();
  up.reset();
});
afterAll(async () => {
  await up.close();
});

function chat(content: string, stream = false): string {
  return JSON.stringify({ model: 'gpt-4o-mini', stream, messages: [{ role: 'user', content }] });
}

function post(path: string, body: string, extra = ''): string {
  return `POST ${path} HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-edge\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** One keep-alive connection: write a request, wait until `until` shows in what came back, and so on. */
function rawConnection(url: string) {
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
  const chunks: Buffer[] = [];
  let wake: (() => void) | undefined;
  socket.on('data', (c: Buffer) => {
    chunks.push(c);
    wake?.();
  });
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  return {
    write: (text: string) => socket.write(text),
    async waitFor(text: string): Promise<void> {
      while (!Buffer.concat(chunks).toString('latin1').includes(text)) await new Promise<void>((r) => (wake = r));
    },
    async responses(): Promise<RawResponse[]> {
      await closed;
      return parseResponses(Buffer.concat(chunks)).responses;
    },
  };
}

function logLines(relay: TestRelay): Array<Record<string, any>> {
  return relay.logs.flatMap((chunk) => chunk.split('\n').filter(Boolean)).map((l) => JSON.parse(l) as Record<string, any>);
}

describe('the proxy edge', () => {
  it('writes the access line of a proxied call like fastify writes its own, with request ids shared by both', async () => {
    const relay = await startRelay({ upstreamUrl: up.url });
    relays.push(relay);
    const res = await fetch(`${relay.url}/v1/chat/completions?x=1&token=not-logged`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-edge-secret' },
      body: chat('log me'),
    });
    expect(res.status).toBe(200);
    await res.text();
    await fetch(`${relay.url}/healthz`);
    const access = logLines(relay).filter((l) => l.msg === 'request completed');
    expect(access).toHaveLength(2);
    expect(access[0]).toMatchObject({
      level: 30,
      req: { method: 'POST', url: '/v1/chat/completions?x=1&token=[redacted]', hostname: '127.0.0.1', remoteAddress: '127.0.0.1' },
      res: { statusCode: 200 },
      responseTime: expect.any(Number),
      reqId: expect.stringMatching(/^req-[0-9a-z]+$/),
    });
    expect(access[1]).toMatchObject({ req: { method: 'GET', url: '/healthz' }, res: { statusCode: 200 } });
    expect(access[1]!.reqId).not.toBe(access[0]!.reqId);
    expect(relay.logs.join('')).not.toContain('sk-edge-secret');
  });

  it('answers a path with a malformed percent-encoding 400 without calling the upstream', async () => {
    const relay = await startRelay({ upstreamUrl: up.url });
    relays.push(relay);
    for (const path of ['/v1/%zz/chat', '/v1/chat%E2%82', '/v1/%']) {
      const res = await fetch(`${relay.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat('x') });
      expect(res.status, path).toBe(400);
      const message = 'Malformed URL: the path has an invalid percent-encoding';
      expect(await res.json()).toEqual({
        error: { message, type: 'invalid_request_error', code: 'RELAY_ERR_BAD_REQUEST', param: null },
        statusCode: 400,
        code: 'RELAY_ERR_BAD_REQUEST',
        message,
      });
    }
    expect(up.calls).toHaveLength(0);
  });

  it('leaves other methods and the relay\'s own paths to fastify: 404, never forwarded', async () => {
    const relay = await startRelay({ upstreamUrl: up.url });
    relays.push(relay);
    for (const [method, path] of [['PROPFIND', '/v1/models'], ['TRACE', '/v1/models'], ['POST', '/api/nothing'], ['POST', '/healthzz'], ['GET', '/docsx']]) {
      const res = await request(`${relay.url}${path}`, { method: method! });
      expect(res.statusCode, `${method} ${path}`).toBe(404);
      expect(await res.body.json()).toMatchObject({ statusCode: 404, code: 'RELAY_ERR_NOT_FOUND' });
    }
    expect(up.calls).toHaveLength(0);
  });

  it('during the drain a call in flight finishes, and a request that still arrives gets 503 RELAY_ERR_SHUTTING_DOWN and a closed connection', async () => {
    up.eventGapMs = 60; // the stream lasts about half a second
    const dataDir = await tempDir();
    const relay = await startRelay({ upstreamUrl: up.url, dataDir });
    try {
      // Two keep-alive connections, each busy with a stream when the drain starts; then one more request
      // on each: one for the proxy, one for the relay's API.
      const a = rawConnection(relay.url);
      const b = rawConnection(relay.url);
      a.write(post('/v1/chat/completions', chat('one two three four five six seven', true)));
      b.write(post('/v1/chat/completions', chat('eight nine ten eleven twelve thirteen', true)));
      await Promise.all([a.waitFor('data: '), b.waitFor('data: ')]);
      const closed = relay.close();
      await new Promise((r) => setTimeout(r, 50));
      a.write(post('/v1/chat/completions', chat('too late')));
      b.write('GET /api/reporting/v2/requests HTTP/1.1\r\nHost: relay\r\n\r\n');
      const [ra, rb] = await Promise.all([a.responses(), b.responses()]);
      await closed;

      for (const [responses, late] of [[ra, 'POST /v1/chat/completions'], [rb, 'GET /api/reporting/v2/requests']] as const) {
        expect(responses, late).toHaveLength(2);
        expect(responses[0]!.status).toBe(200);
        expect(responses[0]!.body.trimEnd().endsWith('data: [DONE]')).toBe(true);
        expect(responses[1]!.status, late).toBe(503);
        expect(responses[1]!.headers.connection, late).toBe('close');
        const message = 'The relay is shutting down: send the request again (to another instance)';
        const fields = { statusCode: 503, code: 'RELAY_ERR_SHUTTING_DOWN', message };
        // The relay's own route answers in its own shape; the proxied one in the provider's (SDKs show it).
        expect(JSON.parse(responses[1]!.body), late).toEqual(
          late.startsWith('GET /api')
            ? { ...fields, error: 'Service Unavailable' }
            : { error: { message, type: 'server_error', code: 'RELAY_ERR_SHUTTING_DOWN', param: null }, ...fields },
        );
      }
      // The late proxied call never went upstream; the two streams did.
      expect(up.calls).toHaveLength(2);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('streaming through the edge', () => {
  it('keeps back-pressure end to end: a client that stops reading stops the upstream, and leaving aborts it', async () => {
    // An upstream that streams SSE as fast as the connection takes it (waiting for 'drain' like any
    // well-behaved server), up to far more than any buffer on the way holds.
    const LIMIT = 128 * 1024 * 1024;
    const event = `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'x'.repeat(4000) } }] })}\n\n`;
    let written = 0;
    let closedEarly = false;
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.once('close', () => (closedEarly = !res.writableFinished));
      const pump = (): void => {
        while (written < LIMIT && !res.destroyed) {
          written += event.length;
          if (!res.write(event)) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end('data: [DONE]\n\n');
      };
      pump();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const relay = await startRelay({ upstreamUrl: origin });
    relays.push(relay);
    try {
      const res = await request(`${relay.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: chat('a long answer', true),
      });
      expect(res.statusCode).toBe(200);
      // Read the first chunk, then nothing more.
      await new Promise<void>((resolve) => res.body.once('data', () => (res.body.pause(), resolve())));
      await new Promise((r) => setTimeout(r, 1_000));
      const at1s = written;
      await new Promise((r) => setTimeout(r, 500));
      // The upstream is stuck on a full connection: what it wrote is what the socket buffers and the
      // relay's bounded copy hold, a small part of the whole, and it does not move.
      expect(written).toBe(at1s);
      expect(written).toBeLessThan(64 * 1024 * 1024);
      // The client leaves: the relay aborts the upstream call.
      res.body.destroy();
      for (let i = 0; i < 50 && !closedEarly; i++) await new Promise((r) => setTimeout(r, 20));
      expect(closedEarly).toBe(true);
      expect(written).toBeLessThan(LIMIT);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe('Expect: 100-continue (curl sends it by itself for bodies over 1 MiB)', () => {
  /** What curl does: headers with Expect: 100-continue, the body only after "100 Continue". */
  function curlLikePost(url: string, body: string): Promise<{ status: number; continued: boolean; headers: Record<string, unknown>; text: string }> {
    return new Promise((resolve, reject) => {
      let continued = false;
      const req = httpRequest(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-curl', expect: '100-continue', 'content-length': Buffer.byteLength(body) },
      });
      req.on('continue', () => {
        continued = true;
        req.end(body);
      });
      req.on('response', (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, continued, headers: res.headers, text: Buffer.concat(parts).toString() }));
      });
      req.on('error', reject);
    });
  }

  it('a 2 MiB chat history is proxied (the header is not forwarded) and cached', async () => {
    const relay = await startRelay({ upstreamUrl: up.url, cacheUrl: 'sqlite' });
    relays.push(relay);
    const history = Array.from({ length: 64 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `${i} ${'x'.repeat(32 * 1024)}` }));
    history.push({ role: 'user', content: 'and now?' });
    const body = JSON.stringify({ model: 'gpt-4o-mini', messages: history });
    expect(Buffer.byteLength(body)).toBeGreaterThan(2 * 1024 * 1024);

    const first = await curlLikePost(relay.url, body);
    expect(first.status, first.text).toBe(200);
    expect(first.continued).toBe(true);
    expect(first.headers['x-relay-cache']).toBe('MISS');
    expect(JSON.parse(first.text).choices[0].message.content).toBe('echo: and now?');
    expect(up.calls).toHaveLength(1);
    expect(up.calls[0]!.headers.expect).toBeUndefined();
    expect(up.calls[0]!.body).toBe(body);

    const second = await curlLikePost(relay.url, body);
    expect(second.status).toBe(200);
    expect(second.headers['x-relay-cache']).toBe('HIT');
    expect(second.text).toBe(first.text);
    expect(up.calls).toHaveLength(1);
  });
});
