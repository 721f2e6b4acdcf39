// The proxy edge hands core a request whose abort signal is made on demand, and keeps per-call objects in
// shapes V8 collects young: an object literal with a getter kept every proxied request alive through the
// young generation's collections (55 MB promoted per 20,000 hits; docs/benchmarks.md). These tests hold
// the shape (the getter on a prototype, none on the object) and what the signal does.
import { type Server, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Exchange, ProxyRequest, ProxyResponse } from '../../../src/core/proxy-types.js';
import { createProxyEdge } from '../../../src/http/proxy-edge.js';

let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** An edge on a real server whose exchange is `handle`; returns the server's URL. */
async function edgeWith(handle: (req: ProxyRequest) => Promise<ProxyResponse>): Promise<string> {
  const edge = createProxyEdge({
    exchange: { handle } as unknown as Exchange,
    log: pino({ level: 'silent' }),
    maxBodyBytes: 1024 * 1024,
    count: () => {},
    closing: () => false,
    nextRequestId: () => 'req-1',
  });
  server = createServer((req, res) => edge.handle(req, res));
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
}

function post(url: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('proxy edge: the request core sees', () => {
  it('carries the call as received, with its signal on the prototype (no getter of its own)', async () => {
    let seen: ProxyRequest | undefined;
    const url = await edgeWith(async (req) => {
      seen = req;
      return { status: 200, headers: { 'content-type': 'application/json' }, body: '{"ok":true}' };
    });
    const answer = await post(url, '{"model":"m"}');
    expect(answer).toEqual({ status: 200, text: '{"ok":true}' });
    expect(seen).toMatchObject({ method: 'POST', url: '/v1/chat/completions' });
    expect(seen!.headers['content-type']).toBe('application/json');
    expect(seen!.body!.toString()).toBe('{"model":"m"}');
    expect(Object.getOwnPropertyDescriptor(seen!, 'signal')).toBeUndefined();
    expect(typeof Object.getOwnPropertyDescriptor(Object.getPrototypeOf(seen!) as object, 'signal')?.get).toBe('function');
    // made on demand, once: the same signal on every read
    expect(seen!.signal).toBe(seen!.signal);
  });

  it('aborts the signal when the client goes away before the answer', async () => {
    let aborted: Promise<void> | undefined;
    const url = await edgeWith((req) => {
      const signal = req.signal;
      aborted = new Promise<void>((resolve) => signal.once('abort', () => resolve()));
      return new Promise<ProxyResponse>(() => {}); // never answers
    });
    const req = request(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    req.on('error', () => {});
    req.end('{}');
    await expect.poll(() => aborted !== undefined).toBe(true);
    req.destroy();
    await aborted;
  });
});
