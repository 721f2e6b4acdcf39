// Two reference proxies for bench/hop.mjs, thinner than the bare @fastify/http-proxy baseline, to show what
// one hop costs on this machine before any framework runs:
//
//   --kind tcp    bytes piped between sockets (node:net): no HTTP parsing at all, the loopback floor
//   --kind http   node:http server + an undici Agent, headers copied minus hop-by-hop ones, body piped back:
//                 the least an HTTP-aware proxy written in Node does
//   --kind replay the http kind with a Map in front: a request body seen before is answered with the status,
//                 headers and bytes its first answer had, nothing else done (no key, no store, no report):
//                 the least a caching proxy written in Node does for a hit (bench/cost.mjs's hit floor)
//
//   node bench/reference-proxy.mjs --kind tcp|http|replay --upstream http://127.0.0.1:PORT [--port N]
//
// Prints one JSON line {"port":N,"url":"http://127.0.0.1:N"} once it listens; exits when its parent (with an
// IPC channel, as bench/hop.mjs starts it) goes away. Measuring aids only: no limits, no error mapping.
import http from 'node:http';
import net from 'node:net';
import { parseArgs } from 'node:util';
import { Agent } from 'undici';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-connection', 'host']);

function tcpProxy(upstream) {
  const { hostname, port } = new URL(upstream);
  return net.createServer((client) => {
    const up = net.connect(Number(port), hostname);
    client.setNoDelay(true);
    up.setNoDelay(true);
    client.pipe(up).pipe(client);
    const close = () => {
      client.destroy();
      up.destroy();
    };
    client.on('error', close);
    up.on('error', close);
  });
}

const strip = (headers) => {
  const out = {};
  for (const [k, v] of Object.entries(headers)) if (!HOP_BY_HOP.has(k)) out[k] = v;
  return out;
};

/** Reads a request's body whole: `null` when it has none. */
function readBody(req, done) {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => done(chunks.length > 0 ? Buffer.concat(chunks) : null));
}

function httpProxy(upstream) {
  const agent = new Agent({ keepAliveTimeout: 30_000 });
  const origin = new URL(upstream).origin;
  return http.createServer((req, res) => {
    readBody(req, (body) => {
      agent.request({ origin, path: req.url, method: req.method, headers: strip(req.headers), body }).then(
        (up) => {
          res.writeHead(up.statusCode, strip(up.headers));
          up.body.pipe(res);
        },
        (err) => {
          res.writeHead(502, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: err.message } }));
        },
      );
    });
  });
}

function replayProxy(upstream) {
  const agent = new Agent({ keepAliveTimeout: 30_000 });
  const origin = new URL(upstream).origin;
  /** `${method} ${path}\n${body}` → the first answer to it, whole */
  const seen = new Map();
  const send = (res, answer) => {
    res.writeHead(answer.status, answer.headers);
    res.end(answer.bytes);
  };
  return http.createServer((req, res) => {
    readBody(req, (body) => {
      const key = `${req.method} ${req.url}\n${body ?? ''}`;
      const known = seen.get(key);
      if (known) return send(res, known);
      agent
        .request({ origin, path: req.url, method: req.method, headers: strip(req.headers), body })
        .then(async (up) => {
          const bytes = Buffer.from(await up.body.arrayBuffer());
          const headers = strip(up.headers);
          headers['content-length'] = String(bytes.length);
          const answer = { status: up.statusCode, headers, bytes };
          seen.set(key, answer);
          send(res, answer);
        })
        .catch((err) => {
          res.writeHead(502, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: err.message } }));
        });
    });
  });
}

const { values } = parseArgs({ options: { kind: { type: 'string' }, upstream: { type: 'string' }, port: { type: 'string', default: '0' } } });
const KINDS = { tcp: tcpProxy, http: httpProxy, replay: replayProxy };
if (!values.upstream || !Object.hasOwn(KINDS, values.kind ?? '')) {
  process.stderr.write('usage: node bench/reference-proxy.mjs --kind tcp|http|replay --upstream http://127.0.0.1:PORT [--port N]\n');
  process.exit(2);
}
const server = KINDS[values.kind](values.upstream);
server.listen(Number(values.port), '127.0.0.1', () => {
  const { port } = server.address();
  process.stdout.write(`${JSON.stringify({ port, url: `http://127.0.0.1:${port}` })}\n`);
});
if (process.send) process.once('disconnect', () => process.exit(0));
process.once('SIGTERM', () => process.exit(0));
