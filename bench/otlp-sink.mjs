// A stand-in OTLP endpoint for the tracing cost benchmark (bench/tracing-cost.sh): a node:http server that
// reads every request and answers 200 with an empty body, as a collector that keeps up would. Run as its
// own process, so its CPU is not the relay's. On SIGTERM it prints what it took: requests and bytes.
//   OTLP_SINK_PORT=18395 node bench/otlp-sink.mjs
import { createServer } from 'node:http';

const port = Number(process.env.OTLP_SINK_PORT ?? 18395);
let requests = 0;
let bytes = 0;
const server = createServer((req, res) => {
  req.on('data', (c) => (bytes += c.length));
  req.on('end', () => {
    requests++;
    res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/x-protobuf', 'content-length': 0 });
    res.end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port, url: `http://127.0.0.1:${port}` })}\n`));
process.on('SIGTERM', () => {
  process.stdout.write(`${JSON.stringify({ requests, bytes })}\n`);
  process.exit(0);
});
