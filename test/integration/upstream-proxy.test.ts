// A relay behind a company's proxy: with HTTPS_PROXY / HTTP_PROXY set, calls upstream go through it in a
// CONNECT tunnel (so it sees the upstream's host and port, never a request or its key), NO_PROXY's hosts
// straight out, and its password is never shown. The OTLP span exporter reaches its endpoint the same way. Driven by the real openai SDK through the real app, with a
// CONNECT proxy and a fake upstream on loopback.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AddressInfo, type Socket, connect } from 'node:net';
import OpenAI from 'openai-current';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeUpstream, chatCompletion, startFakeUpstream } from '../helpers/fake-upstream.js';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { startRelay } from '../helpers/relay.js';

interface Tunnel {
  target: string;
  proxyAuthorization: string | undefined;
}

/** A forward proxy that only tunnels (CONNECT), recording what it was asked. */
async function startConnectProxy() {
  const tunnels: Tunnel[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((_req, res) => res.writeHead(405).end());
  server.on('connect', (req, client: Socket, head: Buffer) => {
    tunnels.push({ target: req.url!, proxyAuthorization: req.headers['proxy-authorization'] });
    const [host, port] = req.url!.split(':');
    const upstream = connect(Number(port), host!, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client).pipe(upstream);
    });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    tunnels,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

let up: FakeUpstream;
let proxy: Awaited<ReturnType<typeof startConnectProxy>>;
beforeAll(async () => {
  up = await startFakeUpstream();
  proxy = await startConnectProxy();
});
afterAll(async () => {
  await proxy.close();
  await up.close();
});

const ask = (baseURL: string, content: string) =>
  new OpenAI({ apiKey: 'sk-behind-proxy', baseURL: `${baseURL}/v1`, maxRetries: 0 }).chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content }],
  });

describe('calls upstream through the environment’s proxy', () => {
  it('go through HTTP_PROXY in a tunnel, with its credentials, shown without its password', async () => {
    const withAuth = proxy.url.replace('http://', 'http://team:s3cret-pw@');
    const relay = await startRelay({ cacheUrl: 'memory', upstreamUrl: up.url }, {}, { HTTP_PROXY: withAuth });
    try {
      expect(await ask(relay.url, 'via proxy')).toEqual(chatCompletion('echo: via proxy'));
      expect(await ask(relay.url, 'via proxy, again')).toEqual(chatCompletion('echo: via proxy, again'));
      const upstreamHost = new URL(up.url).host;
      // one tunnel, kept alive for both calls; the proxy saw only where to, and its own credentials
      expect(proxy.tunnels).toEqual([{ target: upstreamHost, proxyAuthorization: `Basic ${Buffer.from('team:s3cret-pw').toString('base64')}` }]);
      expect(up.calls.map((c) => [c.path, c.headers.authorization])).toEqual([
        ['/v1/chat/completions', 'Bearer sk-behind-proxy'],
        ['/v1/chat/completions', 'Bearer sk-behind-proxy'],
      ]);
      const banner = relay.logs.find((l) => l.includes('"startup"'))!;
      expect(JSON.parse(banner).startup.proxy).toBe(`via ${withAuth.replace('s3cret-pw', '***')}/`);
      expect(relay.logs.join('')).not.toContain('s3cret-pw');
    } finally {
      await relay.close();
      proxy.tunnels.length = 0;
      up.reset();
    }
  });

  it('go straight out to NO_PROXY’s hosts', async () => {
    const relay = await startRelay({ cacheUrl: 'memory', upstreamUrl: up.url }, {}, { HTTPS_PROXY: proxy.url, HTTP_PROXY: proxy.url, NO_PROXY: 'example.com, 127.0.0.1' });
    try {
      expect(await ask(relay.url, 'direct')).toEqual(chatCompletion('echo: direct'));
      expect(proxy.tunnels).toEqual([]);
      expect(up.calls).toHaveLength(1);
      expect(JSON.parse(relay.logs.find((l) => l.includes('"startup"'))!).startup.proxy).toBe(`via ${proxy.url}; not for example.com, 127.0.0.1 (NO_PROXY)`);
    } finally {
      await relay.close();
      up.reset();
    }
  });

  it('a proxy that is down is an upstream the relay cannot reach: 502, in the provider’s shape', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const relay = await startRelay({ cacheUrl: 'memory', upstreamUrl: up.url }, {}, { HTTP_PROXY: `http://127.0.0.1:${port}` });
    try {
      const err = (await ask(relay.url, 'no proxy').catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect(err.status).toBe(502);
      expect(err.error).toMatchObject({ code: 'RELAY_ERR_UPSTREAM_UNREACHABLE' });
      expect(up.calls).toHaveLength(0);
    } finally {
      await relay.close();
    }
  });

  it('the span exporter reaches its OTLP endpoint through the proxy too, and straight out for NO_PROXY', async () => {
    const otlp = await startOtlpReceiver();
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_HEADERS: 'x-otlp-token=s3cret-otlp', OTEL_BSP_SCHEDULE_DELAY: '50' };
    const withAuth = proxy.url.replace('http://', 'http://team:s3cret-pw@');
    try {
      const relay = await startRelay({ cacheUrl: 'memory', upstreamUrl: up.url }, {}, { ...otel, HTTP_PROXY: withAuth });
      try {
        expect(await ask(relay.url, 'traced via proxy')).toEqual(chatCompletion('echo: traced via proxy'));
        expect((await otlp.waitForSpans(2)).map((s) => s.kind).sort()).toEqual([2, 3]);
        // the endpoint got the spans with OTLP's own header, through a tunnel the proxy authorized
        expect(otlp.requests.at(-1)!.headers['x-otlp-token']).toBe('s3cret-otlp');
        const auth = `Basic ${Buffer.from('team:s3cret-pw').toString('base64')}`;
        expect(proxy.tunnels).toContainEqual({ target: new URL(otlp.url).host, proxyAuthorization: auth });
        expect(proxy.tunnels).toContainEqual({ target: new URL(up.url).host, proxyAuthorization: auth });
      } finally {
        await relay.close();
        proxy.tunnels.length = 0;
        up.reset();
      }
      otlp.spans.length = 0;
      const direct = await startRelay({ cacheUrl: 'memory', upstreamUrl: up.url }, {}, { ...otel, HTTP_PROXY: proxy.url, NO_PROXY: '127.0.0.1' });
      try {
        expect(await ask(direct.url, 'traced direct')).toEqual(chatCompletion('echo: traced direct'));
        expect(await otlp.waitForSpans(2)).toHaveLength(2);
        expect(proxy.tunnels).toEqual([]);
      } finally {
        await direct.close();
        up.reset();
      }
    } finally {
      await otlp.close();
    }
  });

  it('an https endpoint with its own CA (OTEL_EXPORTER_OTLP_CERTIFICATE) is reached through the tunnel, TLS inside it', async () => {
    // a certificate for 127.0.0.1 that only the CA file vouches for (openssl, as on every machine of this kind)
    const dir = mkdtempSync(join(tmpdir(), 'relay-otlp-tls-'));
    const [key, cert] = [join(dir, 'key.pem'), join(dir, 'cert.pem')];
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    const otlp = await startOtlpReceiver({ key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') });
    // The official exporter reads its certificate settings from the process's environment (the worker's copy).
    process.env.OTEL_EXPORTER_OTLP_CERTIFICATE = cert;
    try {
      const relay = await startRelay({ cacheUrl: 'memory', upstreamUrl: up.url }, {}, { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '50', HTTPS_PROXY: proxy.url, NO_PROXY: new URL(up.url).host });
      try {
        expect(await ask(relay.url, 'traced over tls')).toEqual(chatCompletion('echo: traced over tls'));
        expect(await otlp.waitForSpans(2)).toHaveLength(2);
        expect(proxy.tunnels).toEqual([{ target: new URL(otlp.url).host, proxyAuthorization: undefined }]);
      } finally {
        await relay.close();
        proxy.tunnels.length = 0;
        up.reset();
      }
    } finally {
      delete process.env.OTEL_EXPORTER_OTLP_CERTIFICATE;
      await otlp.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
