// The floor of a durable-reports benchmark on this machine: the least any report service can do per posted
// report — node:http reads the body, JSON.parse checks it, and a 201 with a fresh id goes back — with
// nothing validated, stored, synced or handed to another thread. bench/cost.mjs loads it with the same 50
// clients as the relay, in the same rounds, so that a reports/s target can be set against what the machine
// itself allows (the load generator shares its two cores).
//
// With --durable it also keeps what it acknowledges, as cheaply as a durable service can here: the bodies of
// the reports that arrived in one turn of the event loop are appended to one file (preallocated, so that a
// sync need not commit the file's size) and fdatasync'd together before their 201s — the relay's journal
// (src/storage/report-journal.ts) without the worker thread, the derivation or the store. It is the floor of
// a durable report's CPU (`../shared/bench/cpu.sh` measures the relay's against the mock answering directly).
//   node bench/report-floor.mjs [--port N] [--durable FILE]     prints {"port":N,"url":…} once it listens
import { randomUUID } from 'node:crypto';
import { closeSync, fdatasyncSync, openSync, writeSync } from 'node:fs';
import { createServer } from 'node:http';

const flag = (name) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const port = Number(flag('--port') ?? 0);
const journal = flag('--durable');

/** --durable: a group commit per turn of the event loop. */
function groupCommit(file) {
  const SIZE = 64 * 1024 * 1024;
  const fd = openSync(file, 'w+');
  const zeros = Buffer.alloc(1024 * 1024);
  for (let at = 0; at < SIZE; at += zeros.length) writeSync(fd, zeros, 0, zeros.length, at);
  fdatasyncSync(fd);
  let position = 0;
  let waiting = [];
  const commit = () => {
    const group = waiting;
    waiting = [];
    const bytes = Buffer.concat(group.flatMap((g) => [g.body, Buffer.from('\n')]));
    if (position + bytes.length > SIZE) position = 0; // a benchmark's ring: old lines are not read again
    writeSync(fd, bytes, 0, bytes.length, position);
    position += bytes.length;
    fdatasyncSync(fd);
    for (const g of group) g.done();
  };
  process.on('exit', () => closeSync(fd));
  return (body, done) => {
    if (waiting.length === 0) setImmediate(commit);
    waiting.push({ body, done });
  };
}
const keep = journal ? groupCommit(journal) : (body, done) => done();

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    try {
      JSON.parse(body.toString('utf8'));
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"not JSON"}');
      return;
    }
    keep(body, () => res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id: randomUUID() })));
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1', () => {
  const actual = server.address().port;
  process.stdout.write(`${JSON.stringify({ port: actual, url: `http://127.0.0.1:${actual}` })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
