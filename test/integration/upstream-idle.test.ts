// The idle upstream connections a burst leaves: in a quiet moment (the memory trim's, src/server.ts) the relay
// lets them go when more than IDLE_CONNECTIONS_KEPT wait, and keeps them when fewer do. Calls still running
// finish on the connections they have; the next calls connect again. A real upstream on loopback counts the
// sockets it holds open, and holds a burst's answers until all its calls arrived.
import { type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { IDLE_CONNECTIONS_KEPT } from '../../src/upstream/upstream-client.js';
import { type TestRelay, startRelay } from '../helpers/relay.js';

interface CountingUpstream {
  url: string;
  /** sockets open now */
  open(): number;
  /** connections accepted so far */
  accepted(): number;
  /** JSON answers are held until this many wait, then all go (so a burst's calls overlap, however slow the machine) */
  holdUntil: number;
  /** lets the slow stream go on */
  release(): void;
  close(): Promise<void>;
}

const STREAM_EVENTS = ['one', 'two', 'three'];

async function startCountingUpstream(): Promise<CountingUpstream> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let go: () => void = () => {};
  const gate = new Promise<void>((resolve) => (go = resolve));
  let held: (() => void)[] = [];
  const answer = (res: ServerResponse, body: { stream?: boolean; messages: { content: string }[] }): void => {
    const text = body.messages[0]!.content;
    if (!body.stream) {
      const json = JSON.stringify({ id: 'x', object: 'chat.completion', model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: `echo: ${text}` }, finish_reason: 'stop' }] });
      held.push(() => res.writeHead(200, { 'content-type': 'application/json' }).end(json));
      if (held.length >= upstream.holdUntil) {
        const all = held;
        held = [];
        for (const send of all) send();
      }
      return;
    }
    // a stream that sends its first event, then waits for the test before the rest
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const event = (content: string) => `data: ${JSON.stringify({ id: 's', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta: { content } }] })}\n\n`;
    res.write(event(STREAM_EVENTS[0]!));
    void gate.then(() => {
      for (const e of STREAM_EVENTS.slice(1)) res.write(event(e));
      res.end('data: [DONE]\n\n');
    });
  };
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (raw += c));
    req.on('end', () => answer(res, JSON.parse(raw)));
  });
  server.keepAliveTimeout = 65_000;
  server.on('connection', (socket: Socket) => {
    accepted++;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const upstream: CountingUpstream = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    holdUntil: 1,
    open: () => sockets.size,
    accepted: () => accepted,
    release: () => go(),
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  return upstream;
}

function call(relay: TestRelay, content: string, stream = false): Promise<Response> {
  return fetch(`${relay.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-idle' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }], ...(stream ? { stream: true } : {}) }),
  });
}

/** n calls at once: the upstream answers none before all n reached it, so each has a connection of its own */
async function burst(relay: TestRelay, n: number, tag: string): Promise<void> {
  up!.holdUntil = n;
  const answers = await Promise.all(Array.from({ length: n }, (_, i) => call(relay, `${tag} ${i}`)));
  const bodies = await Promise.all(answers.map((r) => r.json() as Promise<{ choices: { message: { content: string } }[] }>));
  expect(bodies.map((b) => b.choices[0]!.message.content)).toEqual(Array.from({ length: n }, (_, i) => `echo: ${tag} ${i}`));
}

let up: CountingUpstream | undefined;
let relay: TestRelay | undefined;
afterEach(async () => {
  await relay?.close();
  await up?.close();
  relay = up = undefined;
});

describe('idle upstream connections after a burst', () => {
  it('are let go in a quiet moment when more than a few dozen wait; calls still running finish, later ones connect again', async () => {
    up = await startCountingUpstream();
    relay = await startRelay({ upstreamUrl: up.url });
    const n = IDLE_CONNECTIONS_KEPT + 8;
    // one stream stays open across the release
    const streamed = await call(relay, 'long', true);
    const reader = streamed.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain('"one"');
    await burst(relay, n, 'burst');
    // every call of the burst had its own connection (all were open at once), and they wait idle
    expect(up.accepted()).toBe(n + 1);
    expect(up.open()).toBe(n + 1);

    expect(relay.releaseMemory()).toBe(true);
    // the idle ones close; the stream's connection stays until its answer is done
    await expect.poll(() => up!.open(), { timeout: 5_000 }).toBe(1);
    up.release();
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    expect(rest).toContain('"two"');
    expect(rest).toContain('"three"');
    expect(rest.trimEnd().endsWith('data: [DONE]')).toBe(true);
    // with it done, the old pool's last connection goes too
    await expect.poll(() => up!.open(), { timeout: 5_000 }).toBe(0);

    // the next calls connect again and are answered as before
    await burst(relay, 3, 'after');
    expect(up.accepted()).toBe(n + 1 + 3);
    // nothing more to let go now
    expect(relay.releaseMemory()).toBe(false);
    expect(up.open()).toBe(3);
  });

  it('are kept when no more than IDLE_CONNECTIONS_KEPT wait', async () => {
    up = await startCountingUpstream();
    relay = await startRelay({ upstreamUrl: up.url });
    await burst(relay, IDLE_CONNECTIONS_KEPT, 'small');
    expect(up.open()).toBe(IDLE_CONNECTIONS_KEPT);
    expect(relay.releaseMemory()).toBe(false);
    await burst(relay, IDLE_CONNECTIONS_KEPT, 'again');
    // the same connections served the second burst
    expect(up.accepted()).toBe(IDLE_CONNECTIONS_KEPT);
    expect(up.open()).toBe(IDLE_CONNECTIONS_KEPT);
  });

  it('a relay that never called upstream has nothing to let go', async () => {
    relay = await startRelay({ upstreamUrl: 'http://127.0.0.1:9' });
    expect(relay.releaseMemory()).toBe(false);
  });
});
