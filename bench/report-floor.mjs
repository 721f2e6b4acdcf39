// The floor of a durable-reports benchmark on this machine: the least any report service can do per posted
// report — node:http reads the body, JSON.parse checks it, and a 201 with a fresh id goes back — with
// nothing validated, stored, synced or handed to another thread. bench/cost.mjs loads it with the same 50
// clients as the relay, in the same rounds, so that a reports/s target can be set against what the machine
// itself allows (the load generator shares its two cores).
//   node bench/report-floor.mjs [--port N]     prints {"port":N,"url":…} once it listens
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

const i = process.argv.indexOf('--port');
const port = i > 0 ? Number(process.argv[i + 1]) : 0;
const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    try {
      JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"not JSON"}');
      return;
    }
    res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id: randomUUID() }));
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1', () => {
  const actual = server.address().port;
  process.stdout.write(`${JSON.stringify({ port: actual, url: `http://127.0.0.1:${actual}` })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
