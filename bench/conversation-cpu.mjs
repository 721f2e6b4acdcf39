// What a conversation's turn costs the relay: CPU per exchange (user + system, from /proc, per thread) when
// every request carries the whole history, as chat clients and agents send it. The shared cost tools
// (../shared/bench) send two short messages per request; a real turn sends the history (here ~2 KB of system
// prompt, then ~7.5 KB on average over 15 turns), which the relay keys, forwards, and splits into the body
// store's message blobs on its report worker.
//
// Each round runs fresh conversations (8 in flight) through the bare proxy (bench/bare-proxy.mjs: the
// reference, what forwarding alone costs a Node proxy) and every relay measured, one after the other, so the
// rows of a round share the minute; the first round warms up and is not shown.
//
//   npm run bench:conversations -- [--conversations N] [--turns T] [--rounds R] [--before DIR]
//     --before DIR   another checkout (built: `npm run build` there) measured beside this one
import http from 'node:http';
import path from 'node:path';
import { exitOnProblems, parseCommandLine } from './lib/options.mjs';
import { ROOT, cleanup, installCleanup, makeLog, makeTempDir, startHelper, startRelay, threadTicks } from './lib/processes.mjs';

const HELP = `Usage: npm run bench:conversations -- [options]
  --conversations N   conversations per round (default 200)
  --turns T           turns per conversation (default 15)
  --rounds R          measured rounds (default 3), after one warm-up round
  --before DIR        a built checkout measured beside this one, round by round
`;
const opts = parseCommandLine(
  process.argv.slice(2),
  { conversations: { type: 'string' }, turns: { type: 'string' }, rounds: { type: 'string' }, before: { type: 'string' } },
  HELP,
);
const problems = [];
const count = (name, fallback) => {
  const n = Number(opts[name] ?? fallback);
  if (!Number.isInteger(n) || n < 1) problems.push(`--${name} must be a positive integer`);
  return n;
};
const CONVERSATIONS = count('conversations', 200);
const TURNS = count('turns', 15);
const ROUNDS = count('rounds', 3);
exitOnProblems('conversation-cpu', problems, HELP);

const log = makeLog('conversation-cpu');
installCleanup({ log, relayGraceMs: 15_000 });

// The conversations.mjs workload's shape: a ~2 KB system prompt shared by every conversation, a short
// question per turn, the answer sent back in the next turn's history.
const WORDS = 'cache report proxy token stream answer model latency budget prompt history vector'.split(' ');
let seed = 7;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const prose = (n) => Array.from({ length: n }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(' ');
const SYSTEM = `You are a careful assistant. ${prose(300)}`;

/** Runs one round of conversations against url; returns the number of exchanges. */
async function converse(url, tag) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  const post = (body) =>
    new Promise((resolve, reject) => {
      const req = http.request(`${url}/v1/chat/completions`, {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-conversations', 'content-length': Buffer.byteLength(body) },
      });
      req.on('response', (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks).toString()) : reject(new Error(`status ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
  let next = 0;
  let exchanges = 0;
  const one = async () => {
    while (next < CONVERSATIONS) {
      const c = next++;
      const messages = [{ role: 'system', content: SYSTEM }];
      for (let t = 0; t < TURNS; t++) {
        messages.push({ role: 'user', content: `${tag} ${c} ${t} ${prose(20)}` });
        const answer = JSON.parse(await post(JSON.stringify({ model: 'gpt-4o-mini', messages })));
        exchanges++;
        messages.push({ role: 'assistant', content: `${answer.choices[0].message.content} ${prose(80)}` });
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, one));
  agent.destroy();
  return exchanges;
}

async function measure(target, tag) {
  const pid = target.child.pid;
  const before = threadTicks(pid);
  const exchanges = await converse(target.url, tag);
  const after = threadTicks(pid);
  let main = 0;
  let others = 0;
  for (const [tid, ticks] of after) {
    const used = ticks - (before.get(tid) ?? 0);
    if (tid === String(pid)) main += used;
    else others += used;
  }
  const us = (ticks) => Math.round((ticks * 10_000) / exchanges);
  return { exchanges, main: us(main), others: us(others), total: us(main + others) };
}

const dir = await makeTempDir('relay-conversations-');
const upstream = await startHelper('fake upstream', 'fake-upstream.mjs', []);
const checkouts = [...(opts.before ? [['before', path.resolve(opts.before)]] : []), ['this checkout', ROOT]];
const bare = await startHelper('bare proxy', 'bare-proxy.mjs', ['--upstream', upstream.url]);
const relays = [{ name: 'bare proxy (reference)', relay: bare, rows: [] }];
for (const [i, [name, checkout]] of checkouts.entries()) {
  const relay = await startRelay({
    cli: path.join(checkout, 'dist/cli.js'),
    upstreamUrl: upstream.url,
    dataDir: path.join(dir, `data-${i}`),
    buildCommand: 'npm run bench:conversations',
  });
  relays.push({ name, relay, rows: [] });
}
log(`${CONVERSATIONS} conversations × ${TURNS} turns per round, ${ROUNDS} rounds after a warm-up: ${relays.map((r) => r.name).join(', ')}`);
for (let round = 0; round <= ROUNDS; round++) {
  for (const r of relays) {
    const row = await measure(r.relay, `r${round}-${r.name}`);
    if (round > 0) r.rows.push(row);
    log(`round ${round}${round === 0 ? ' (warm-up)' : ''} ${r.name}: ${row.total} µs an exchange (event loop ${row.main}, other threads ${row.others})`);
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const reference = median(relays[0].rows.map((x) => x.total));
let out = `| process | CPU µs per exchange (median) | ÷ bare proxy | event loop | other threads | rounds (all threads) |\n|---|--:|--:|--:|--:|---|\n`;
for (const r of relays) {
  const total = median(r.rows.map((x) => x.total));
  out += `| ${r.name} | ${total} | ${(total / reference).toFixed(2)}× | ${median(r.rows.map((x) => x.main))} | ${median(r.rows.map((x) => x.others))} | ${r.rows.map((x) => x.total).join(', ')} |\n`;
}
process.stdout.write(out);
await cleanup();
