#!/usr/bin/env node
// What one proxy hop costs on this machine, from the thinnest to the relay: the first streamed chunk of
// sequential requests (one keep-alive connection, each body unique, as in bench/run.mjs's first-chunk phase)
// through each of
//
//   direct             the fake upstream itself
//   tcp pipe           bytes piped between sockets, no HTTP parsing (bench/reference-proxy.mjs --kind tcp)
//   node:http+undici   the least an HTTP proxy written in Node does (bench/reference-proxy.mjs --kind http)
//   bare proxy         fastify + @fastify/http-proxy, the baseline of bench/run.mjs
//   relay miss         node dist/cli.js with its defaults (SQLite cache and reports)
//
// in interleaved rounds, with the CPU each proxy process used per request. It shows how much of the relay's
// first-chunk difference to a direct call any Node proxy pays here before it does anything of its own.
// `npm run bench:hop` builds first; `node bench/hop.mjs -h` lists the options.
import { Pool } from 'undici';
import path from 'node:path';
import { exitOnProblems, parseCommandLine } from './lib/options.mjs';
import { ROOT, cleanup, cpuTimeMs, installCleanup, makeLog, makeTempDir, startHelper, startRelay } from './lib/processes.mjs';

const HELP = `Usage: node bench/hop.mjs [options]      (npm run bench:hop builds the relay first)

Options:
  --requests N     measured requests per target, split over the rounds   default 600
  --rounds N       interleaved rounds (each target in turn, N times)     default 3
  --warmup N       unmeasured requests per target before the first round default 50
  --relay-cli FILE the relay's entry point                               default dist/cli.js
  -h, --help       this text
`;

const values = parseCommandLine(
  process.argv.slice(2),
  { requests: { type: 'string' }, rounds: { type: 'string' }, warmup: { type: 'string' }, 'relay-cli': { type: 'string' } },
  HELP,
);
const problems = [];
const int = (name, dflt, min) => {
  const n = Number(values[name] ?? dflt);
  if (!Number.isInteger(n) || n < min) problems.push(`--${name} must be an integer ≥ ${min}, got "${values[name]}"`);
  return n;
};
const opts = {
  requests: int('requests', 600, 1),
  rounds: int('rounds', 3, 1),
  warmup: int('warmup', 50, 0),
  relayCli: path.resolve(values['relay-cli'] ?? path.join(ROOT, 'dist', 'cli.js')),
};
exitOnProblems('hop', problems, HELP);

const log = makeLog('hop');
installCleanup({ log, relayGraceMs: 8000 });

const ENDPOINT = '/v1/chat/completions';
const HEADERS = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };
const RUN = Math.random().toString(36).slice(2, 10);
let counter = 0;
const nextBody = () =>
  JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: `hop ${RUN} #${++counter}: why cache?` }] });

/** One streamed request: ms from sending to its first body chunk; throws unless a whole SSE answer came. */
async function firstChunk(pool) {
  const t0 = process.hrtime.bigint();
  const res = await pool.request({ method: 'POST', path: ENDPOINT, headers: HEADERS, body: nextBody() });
  let first;
  let text = '';
  for await (const chunk of res.body) {
    first ??= process.hrtime.bigint();
    text += chunk;
  }
  if (res.statusCode !== 200 || !text.includes('data: [DONE]')) throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
  return Number(first - t0) / 1e6;
}

const percentile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];

try {
  const upstream = await startHelper('fake upstream', 'fake-upstream.mjs', []);
  const dataDir = await makeTempDir('llm-relay-hop-');
  const targets = [
    { name: 'direct', proc: upstream },
    { name: 'tcp pipe', proc: await startHelper('tcp pipe', 'reference-proxy.mjs', ['--kind', 'tcp', '--upstream', upstream.url]) },
    { name: 'node:http + undici', proc: await startHelper('node:http proxy', 'reference-proxy.mjs', ['--kind', 'http', '--upstream', upstream.url]) },
    { name: 'bare proxy', proc: await startHelper('bare proxy', 'bare-proxy.mjs', ['--upstream', upstream.url]) },
    { name: 'relay miss', proc: await startRelay({ cli: opts.relayCli, upstreamUrl: upstream.url, dataDir, buildCommand: 'npm run bench:hop' }) },
  ];
  for (const t of targets) {
    t.pool = new Pool(t.proc.url, { connections: 1, pipelining: 1 });
    t.samples = [];
    t.cpuMs = 0;
    t.requests = 0;
    for (let i = 0; i < opts.warmup; i++) await firstChunk(t.pool);
  }
  log(`${opts.requests} sequential streamed requests per target in ${opts.rounds} interleaved rounds`);
  for (let round = 0; round < opts.rounds; round++) {
    const count = Math.floor(opts.requests / opts.rounds) + (round < opts.requests % opts.rounds ? 1 : 0);
    for (const t of targets) {
      const cpu0 = cpuTimeMs(t.proc.child.pid);
      for (let i = 0; i < count; i++) t.samples.push(await firstChunk(t.pool));
      t.cpuMs += (cpuTimeMs(t.proc.child.pid) ?? NaN) - (cpu0 ?? NaN);
      t.requests += count;
    }
  }

  const direct = targets[0];
  for (const t of targets) t.sorted = [...t.samples].sort((a, b) => a - b);
  const d50 = percentile(direct.sorted, 0.5);
  const lines = [
    '| path | first chunk p50 ms | p90 ms | p50 − direct ms | CPU µs per request |',
    '|---|--:|--:|--:|--:|',
    ...targets.map((t) => {
      const p50 = percentile(t.sorted, 0.5);
      const us = Math.round((t.cpuMs * 1000) / t.requests);
      // /proc is Linux only: elsewhere the column stays empty
      const cpu = !Number.isFinite(us) ? '—' : t === direct ? `${us} (upstream)` : us;
      return `| ${t.name} | ${p50.toFixed(3)} | ${percentile(t.sorted, 0.9).toFixed(3)} | ${t === direct ? '—' : `+${(p50 - d50).toFixed(3)}`} | ${cpu} |`;
    }),
    '',
    `CPU: user + system time of the process answering (all its threads, 10 ms ticks) ÷ requests; for a proxy it is`,
    `the proxy's own, for direct the fake upstream's. Node ${process.version}, one keep-alive connection per target.`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  await Promise.all(targets.map((t) => t.pool.close()));
} catch (err) {
  log(`failed: ${err.stack ?? err}`);
  process.exitCode = 1;
} finally {
  await cleanup();
}
