// A relay that closes does not wait on connections that hold no request: a browser's preconnected socket
// (Chromium opens them on its own) or one that sent half its headers. Node's closeIdleConnections leaves
// those, and they would hold the drain open for a minute or more. A call in flight still finishes.
import { connect, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { startRelay } from '../helpers/relay.js';

let up: FakeUpstream;
afterAll(async () => up?.close());

function open(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => resolve(socket));
    socket.once('error', reject);
  });
}

const ended = (socket: Socket) => new Promise<void>((resolve) => socket.once('close', () => resolve()));

describe('closing the relay', () => {
  it('closes connections without a whole request at once, and lets a call in flight finish', async () => {
    up = await startFakeUpstream();
    up.delayMs = 300;
    const relay = await startRelay({ upstreamUrl: up.url });
    const silent = await open(relay.url);
    const halfHeaders = await open(relay.url);
    halfHeaders.write('POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\n');
    const inFlight = fetch(`${relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-drain' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'still answered' }] }),
    });
    await expect.poll(() => up.calls.length).toBe(1);

    const started = Date.now();
    const closed = relay.close();
    await Promise.all([ended(silent), ended(halfHeaders)]);
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).choices[0].message.content).toBe('echo: still answered');
    await closed;
    // the upstream's 300 ms, not a keep-alive or header timeout (a minute and more)
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
