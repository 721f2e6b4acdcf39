// The baseline the relay is compared with: the smallest fastify app that proxies everything to the
// upstream with @fastify/http-proxy (undici underneath, like the relay), logger off. No cache, no reports.
//
// Use it as a module (`startBareProxy({upstream, port, host})` → {url, port, close()}) or as a process:
//   node bench/bare-proxy.mjs --upstream http://127.0.0.1:PORT [--port N] [--host H]
// (or UPSTREAM_URL=…), which prints one JSON line {"port":N,"url":"http://H:N"} on stdout once it listens.
// When started with an IPC channel (as bench/run.mjs does), it exits as soon as its parent goes away.
import Fastify from 'fastify';
import httpProxy from '@fastify/http-proxy';
import { pathToFileURL } from 'node:url';

/**
 * @param {{upstream: string, port?: number, host?: string}} opts
 * @returns {Promise<{url: string, port: number, close: () => Promise<void>}>}
 */
export async function startBareProxy({ upstream, port = 0, host = '127.0.0.1' }) {
  if (!upstream) throw new Error('bare-proxy: an upstream URL is required (--upstream or UPSTREAM_URL)');
  const app = Fastify({ logger: false });
  await app.register(httpProxy, { upstream });
  await app.listen({ port, host });
  const actual = app.server.address().port;
  return { url: `http://${host}:${actual}`, port: actual, close: () => app.close() };
}

function flag(argv, name, fallback) {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const argv = process.argv.slice(2);
  try {
    const proxy = await startBareProxy({
      upstream: flag(argv, '--upstream', process.env.UPSTREAM_URL),
      port: Number(flag(argv, '--port', process.env.PORT ?? '0')),
      host: flag(argv, '--host', process.env.HOST ?? '127.0.0.1'),
    });
    process.stdout.write(`${JSON.stringify({ port: proxy.port, url: proxy.url })}\n`);
    const stop = () => proxy.close().then(() => process.exit(0));
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    if (process.send) process.once('disconnect', () => process.exit(0));
  } catch (err) {
    process.stderr.write(`bare-proxy: ${err.message}\n`);
    process.exit(1);
  }
}
