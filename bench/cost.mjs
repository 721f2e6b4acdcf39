#!/usr/bin/env node
// What one exchange costs, with the team's shared measuring tools (../shared/bench, see its README), in one
// run on this machine, against the targets of the cost work:
//
//   CPU time per exchange    cpu.sh: user + system µs per answer, all threads (relay hit, miss, streamed miss,
//                            direct-API report) against the mock upstream answering directly and a bare
//                            @fastify/http-proxy; each row's floor (reference-proxy.mjs, report-floor.mjs); and
//                            the relay's rows thread by thread (event loop, report worker, the rest)
//   instructions             cost.sh (valgrind callgrind; ~20 min, only with --instructions)
//   memory                   streams.mjs: RSS idle, with 1,000 streams open, after two rounds; the same rounds
//                            through the floor (bench/reference-proxy.mjs --kind http: node:http + undici)
//   storage                  conversations.mjs 30 15: the data dir against the distinct content
//   durable reports/s        50 clients posting reports through the direct API, this checkout against
//                            --before DIR (another checkout, built), interleaved rounds, with two floors:
//                            report-floor.mjs as it is (nothing kept) and --durable (each turn's bodies
//                            appended to a file and fdatasync'd before their 201s)
//
// Prints the section and writes it into bench/results.md (its own part of the file). It does not build:
// `npm run bench:cost` builds first.
import autocannon from 'autocannon';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { writeSection } from './lib/results-file.mjs';
import { statusMb, streamRound } from './lib/stream-round.mjs';
import { BENCH_DIR, CLOCK_TICKS, ROOT, cpuTimeMs, freePort, sleep, startHelper, startRelay, stopChild, threadTicks } from './lib/processes.mjs';

const HELP = `Usage: node bench/cost.mjs [options]      (npm run bench:cost builds first)

  --shared DIR       the shared measuring tools            default ../shared/bench (beside the checkout)
  --instructions     also run cost.sh (callgrind, ~20 minutes)
  --before DIR       a built checkout to compare durable reports/s with (e.g. a worktree of an older commit)
  --rounds N         interleaved reports/s rounds          default 3
  --skip LIST        parts to leave out: cpu,memory,storage,reports
  --out FILE         default bench/results.md;  --no-write: print only`;

const { values } = parseArgs({
  options: {
    shared: { type: 'string' },
    instructions: { type: 'boolean', default: false },
    before: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    skip: { type: 'string', default: '' },
    out: { type: 'string' },
    'no-write': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const shared = path.resolve(values.shared ?? path.join(ROOT, '..', 'shared', 'bench'));
if (!existsSync(path.join(shared, 'cpu.sh'))) {
  console.error(`the shared measuring tools are not at ${shared} (cpu.sh missing): pass --shared DIR`);
  process.exit(2);
}
const skip = new Set(values.skip.split(',').filter(Boolean));
const rounds = Number(values.rounds);
const log = (msg) => process.stderr.write(`[cost] ${msg}\n`);
const commitOf = (dir) => {
  try {
    const sha = execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['-C', dir, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim();
    return dirty ? `${sha} (with uncommitted changes)` : sha;
  } catch {
    return 'unknown';
  }
};
const ratio = (a, b) => (a && b ? a / b : NaN);
const fmt = (x, digits = 2) => (Number.isFinite(x) ? x.toFixed(digits) : '—');
const verdict = (value, limit) => (Number.isFinite(value) ? (value <= limit ? 'PASS' : 'FAIL') : '—');

/** Runs a shared shell tool from the checkout's root; its JSON lines, by `${target} ${mode}`. */
function runTool(script, env = {}) {
  const out = execFileSync('bash', [path.join(shared, script)], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, ...env }, maxBuffer: 1 << 24 });
  const rows = new Map();
  for (const line of out.split('\n')) {
    if (!line.startsWith('{')) continue;
    const row = JSON.parse(line);
    if (row.target) rows.set(`${row.target} ${row.mode}`, row);
  }
  return rows;
}

const sections = [];
const targets = [];

// ── CPU time and instructions ──
function perExchange(rows, field, unit, limits) {
  const v = (k) => rows.get(k)?.[field];
  const lines = [
    `| exchange | relay ${unit} | reference | reference ${unit} | ratio | target |`,
    '|---|--:|---|--:|--:|--:|',
  ];
  const cases = [
    ['hit', 'relay hit', 'direct miss', 'the mock answering directly', limits.hit],
    ['miss', 'relay miss', 'bare miss', 'bare proxy', limits.miss],
    ['streamed miss', 'relay stream-miss', 'bare stream-miss', 'bare proxy streaming', limits.stream],
    ['direct-API report (durable)', 'relay report', 'direct miss', 'the mock answering directly', limits.report],
  ];
  for (const [name, relayKey, refKey, refName, limit] of cases) {
    const r = ratio(v(relayKey), v(refKey));
    lines.push(`| ${name} | ${v(relayKey) ?? '—'} | ${refName} | ${v(refKey) ?? '—'} | ${fmt(r)}× | ≤ ${limit}× ${verdict(r, limit)} |`);
    targets.push({ what: `${field === 'cpu_us_per_req' ? 'CPU time' : 'instructions'} per ${name}`, value: `${fmt(r)}×`, limit: `≤ ${limit}×`, verdict: verdict(r, limit) });
  }
  return lines;
}

/**
 * CPU µs (user + system, all threads) per answer of process `pid` under ../shared/bench/client.mjs, measured
 * as cpu.sh measures its rows: WARM answers first, then N counted, C in flight (cpu.sh's defaults).
 */
function clientCpu(url, mode, pid) {
  const n = warmThenCount(url, mode);
  const before = cpuTimeMs(pid);
  const { errors } = clientRun(url, mode, n);
  return { us: Math.round(((cpuTimeMs(pid) - before) * 1000) / n), errors };
}

/** One run of ../shared/bench/client.mjs: its summary ({"n","errors"}). */
function clientRun(url, mode, n) {
  const out = execFileSync(process.execPath, [path.join(shared, 'client.mjs'), url, mode, String(n), process.env.C ?? '8'], { encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').pop());
}

/** The warm-up run (WARM answers); the number of answers to count next (N). */
function warmThenCount(url, mode) {
  clientRun(url, mode, Number(process.env.WARM ?? 3000));
  return Number(process.env.N ?? 20000);
}

/**
 * The relay's CPU µs per answer under the same client.mjs load, thread by thread: the event loop (the
 * process's first thread), the report worker (the busiest thread the relay did not have when it became
 * ready: it starts with the first report and again after an idle stop) and the rest (V8's helper threads,
 * libuv's pool). `atReady`: the relay's thread ids right after it answered /healthz.
 */
function clientThreads(url, mode, pid, atReady) {
  const n = warmThenCount(url, mode);
  const before = threadTicks(pid);
  const { errors } = clientRun(url, mode, n);
  const after = threadTicks(pid);
  const used = [...after].map(([tid, ticks]) => [tid, ticks - (before.get(tid) ?? 0)]);
  const loop = used.find(([tid]) => tid === String(pid))?.[1] ?? 0;
  const worker = Math.max(0, ...used.filter(([tid]) => tid !== String(pid) && !atReady.has(tid)).map(([, t]) => t));
  const all = used.reduce((sum, [, t]) => sum + t, 0);
  // µs per answer, to a tenth
  const us = (ticks) => Math.round((ticks * 1e7) / CLOCK_TICKS / n) / 10;
  return { all: us(all), loop: us(loop), worker: us(worker), others: us(all - loop - worker), errors };
}

/** the relay's rows per thread, measured by floors() beside them */
let threads = [];

/**
 * The floor of each CPU row, in the same minutes, under the same client.mjs loads: what the least server in
 * Node doing that row's job costs, against the row's own reference measured again beside it.
 *   hit           bench/reference-proxy.mjs --kind replay (node:http, a Map from request body to the first
 *                 answer's bytes: no key, no store, no report) against the mock answering directly
 *   miss, stream  bench/reference-proxy.mjs --kind http (node:http + undici, the body piped, nothing kept)
 *                 against the bare @fastify/http-proxy
 *   report        bench/report-floor.mjs --durable (node:http, JSON.parse, the turn's bodies appended to a
 *                 file and fdatasync'd together, a 201) against the mock answering directly
 */
async function floors() {
  const port = await freePort();
  const upstreamUrl = `http://127.0.0.1:${port}`;
  const mock = spawn(process.execPath, [path.join(shared, 'upstream.mjs')], { cwd: shared, env: { ...process.env, UPSTREAM_PORT: String(port) }, stdio: 'ignore' });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'relay-cost-floor-'));
  /** CPU a request of a helper under each of `modes`, started for them and stopped after */
  const measured = async (start, modes) => {
    const proc = await start();
    try {
      return Object.fromEntries(modes.map((mode) => [mode, clientCpu(proc.url, mode, proc.child.pid)]));
    } finally {
      await stopChild(proc, 5000);
    }
  };
  try {
    await sleep(500);
    const direct = clientCpu(upstreamUrl, 'miss', mock.pid);
    const replay = await measured(() => startHelper('replay floor', 'reference-proxy.mjs', ['--kind', 'replay', '--upstream', upstreamUrl]), ['hit']);
    const http = await measured(() => startHelper('node:http proxy', 'reference-proxy.mjs', ['--kind', 'http', '--upstream', upstreamUrl]), ['miss', 'stream-miss']);
    // bench/bare-proxy.mjs: the same app, at the same versions, as the shared tools' anchors/fastify-proxy.mjs
    const bare = await measured(() => startHelper('bare proxy', 'bare-proxy.mjs', ['--upstream', upstreamUrl]), ['miss', 'stream-miss']);
    const durable = await measured(() => startHelper('durable floor', 'report-floor.mjs', ['--durable', path.join(dir, 'journal')]), ['report']);
    const relay = await startRelay({ cli: path.join(ROOT, 'dist/cli.js'), upstreamUrl, dataDir: path.join(dir, 'relay'), buildCommand: 'npm run bench:cost' });
    try {
      const atReady = new Set(threadTicks(relay.child.pid).keys());
      threads = ['hit', 'miss', 'stream-miss', 'report'].map((mode) => [mode, clientThreads(relay.url, mode, relay.child.pid, atReady)]);
    } finally {
      await stopChild(relay, 15_000);
    }
    return [
      ['hit', 'node:http answering from a Map (reference-proxy.mjs --kind replay)', replay.hit, 'the mock answering directly', direct, 1.5],
      ['miss', 'node:http + undici (reference-proxy.mjs --kind http)', http.miss, 'bare proxy', bare.miss, 1.2],
      ['streamed miss', 'the same, streaming', http['stream-miss'], 'bare proxy streaming', bare['stream-miss'], 1.5],
      ['direct-API report (durable)', 'node:http + JSON.parse + fdatasync per turn (report-floor.mjs --durable)', durable.report, 'the mock answering directly', direct, 2],
    ];
  } finally {
    mock.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
}

if (!skip.has('cpu')) {
  log('cpu.sh: CPU time per exchange (about 2 minutes)');
  const rows = runTool('cpu.sh');
  log('the floor of each row, and the relay thread by thread, under the same loads (about two minutes)');
  const f = await floors();
  sections.push(
    '### CPU time per exchange (`cpu.sh`: user + system µs, all threads, 20,000 answers after 3,000 warm-up, 8 in flight)',
    '',
    ...perExchange(rows, 'cpu_us_per_req', 'µs', { hit: 1.5, miss: 1.2, stream: 1.5, report: 2 }),
    '',
    `Direct streamed: ${rows.get('direct stream-miss')?.cpu_us_per_req ?? '—'} µs. Requests/s of the relay's rows: ` +
      ['hit', 'miss', 'stream-miss', 'report'].map((m) => `${m} ${rows.get(`relay ${m}`)?.rps ?? '—'}`).join(', ') + '.',
    '',
    "Each row's floor, measured right after under the same client.mjs load (the least a server in Node doing that row's " +
      'job costs), against its reference measured again beside it:',
    '',
    '| exchange | floor | floor µs | reference | reference µs | floor ratio | target | room the target leaves |',
    '|---|---|--:|---|--:|--:|--:|--:|',
    ...f.map(([name, floorName, floor, refName, ref, limit]) => {
      const r = ratio(floor.us, ref.us);
      const errors = floor.errors + ref.errors;
      return `| ${name} | ${floorName} | ${floor.us}${errors ? ` (${errors} errors)` : ''} | ${refName} | ${ref.us} | ${fmt(r)}× | ≤ ${limit}× | ${fmt(limit - r)}× of the reference |`;
    }),
    '',
  );
  sections.push(
    "Where the relay's CPU goes, thread by thread, under the same loads right after (the relay alone, fed by the same mock; " +
      'the report worker is the busiest thread started after the relay was ready):',
    '',
    '| exchange | all threads µs | event loop | report worker | other threads (V8, libuv) |',
    '|---|--:|--:|--:|--:|',
    ...threads.map(([mode, t]) => `| ${mode} | ${t.all}${t.errors ? ` (${t.errors} errors)` : ''} | ${t.loop} | ${t.worker} | ${t.others} |`),
    '',
  );
  for (const [name, , floor, , ref] of f)
    targets.push({ what: `a ${name} at its floor against the same reference`, value: `${fmt(ratio(floor.us, ref.us))}×`, limit: '(the least any Node server could)', verdict: '—' });
}
if (values.instructions) {
  log('cost.sh: instructions per exchange under callgrind (about 20 minutes)');
  const rows = runTool('cost.sh');
  sections.push(
    '### Instructions per exchange (`cost.sh`: callgrind, every thread, median of 3 windows of 1,000 after 1,500 warm-up)',
    '',
    ...perExchange(rows, 'instr_per_req', 'instructions', { hit: 1.5, miss: 1.15, stream: 1.5, report: 1.5 }),
    '',
  );
}

// ── memory ──
/**
 * Idle RSS, the peaks of two rounds of 1,000 streams, and RSS 10 s and 30 s after, of the process `pid`
 * serving `url`. The same for the relay and for the floor: bench/reference-proxy.mjs --kind http (node:http
 * and an undici Agent, nothing kept), what any Node proxy holding 1,000 open streams pays.
 */
async function streamRounds(url, pid) {
  const rss = () => statusMb(pid);
  await sleep(3000);
  const idle = rss();
  // (the process's own peak as well: streams.mjs stops at its last response, the relay's report worker starts after it)
  const round = () => streamRound({ shared, url, streams: 1000, pid });
  const first = await round();
  await sleep(4000); // (+ the second round() waits after streams.mjs: 5 s apart, as before)
  const second = await round();
  await sleep(9000);
  const after10 = rss();
  await sleep(20_000);
  const after30 = rss();
  const peak = Math.max(first.rss_peak_mb, second.rss_peak_mb, first.processPeak, second.processPeak);
  return { idle, first, second, after10, after30, peak };
}

async function memory() {
  const port = await freePort();
  const upstreamUrl = `http://127.0.0.1:${port}`;
  const mock = spawn(process.execPath, [path.join(shared, 'upstream.mjs')], {
    cwd: shared,
    env: { ...process.env, UPSTREAM_PORT: String(port), STREAM_CHUNKS: '60', STREAM_CHUNK_DELAY_MS: '100' },
    stdio: 'ignore',
  });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'relay-cost-mem-'));
  try {
    await sleep(500);
    const relay = await startRelay({ cli: path.join(ROOT, 'dist', 'cli.js'), upstreamUrl, dataDir, buildCommand: 'npm run bench:cost' });
    const r = await streamRounds(relay.url, relay.child.pid);
    await stopChild(relay, 10_000);
    log('memory: the same rounds through the floor (node:http + undici, bench/reference-proxy.mjs)');
    const ref = await startHelper('node:http proxy', 'reference-proxy.mjs', ['--kind', 'http', '--upstream', upstreamUrl]);
    const f = await streamRounds(ref.url, ref.child.pid);
    await stopChild(ref, 10_000);
    targets.push({ what: 'RSS idle after start', value: `${fmt(r.idle, 1)} MB`, limit: '≤ 80 MB', verdict: verdict(r.idle, 80) });
    targets.push({ what: 'RSS with 1,000 streams open', value: `${fmt(r.peak, 1)} MB (floor ${fmt(f.peak, 1)} MB)`, limit: '≤ 150 MB', verdict: verdict(r.peak, 150) });
    targets.push({
      what: 'RSS after two rounds (30 s later) − idle',
      value: `${fmt(r.after30 - r.idle, 1)} MB (floor ${fmt(f.after30 - f.idle, 1)} MB)`,
      limit: '≤ 20 MB',
      verdict: verdict(r.after30 - r.idle, 20),
    });
    const row = (name, m) =>
      `| ${name} | ${fmt(m.idle, 1)} MB | ${m.first.rss_peak_mb} MB | ${m.second.rss_peak_mb} MB | ${m.first.processPeak} / ${m.second.processPeak} MB | ${m.first.completed + m.second.completed} of 2,000 | ${fmt(m.after10, 1)} MB | ${fmt(m.after30, 1)} MB |`;
    return [
      '### Memory (`streams.mjs`: 1,000 streamed calls open at once, 60 chunks 100 ms apart, two rounds 5 s apart)',
      '',
      '| process | idle after start | peak, round 1 | peak, round 2 | process peak, round 1 / 2 | completed | 10 s after | 30 s after |',
      '|---|--:|--:|--:|--:|--:|--:|--:|',
      row('relay', r),
      row('floor: node:http + undici (bench/reference-proxy.mjs), nothing kept', f),
      '',
      "Peaks: streams.mjs's own (RSS every 100 ms while its streams are open); the process peak is the server's RSS read every 10 ms from the round's start to a second after its last stream (the relay's report worker starts after a burst's end). The target row takes the higher of all four.",
      '',
    ];
  } finally {
    mock.kill();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
if (!skip.has('memory')) {
  log('memory: two rounds of 1,000 streams through the relay, then through the floor (about two minutes)');
  sections.push(...(await memory()));
}

// ── storage ──
if (!skip.has('storage')) {
  log('storage: 30 conversations of 15 turns, then every request again');
  const out = execFileSync(process.execPath, [path.join(shared, 'conversations.mjs'), '30', '15'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, RELAY_DIR: ROOT } });
  const s = JSON.parse(out.trim().split('\n').pop());
  targets.push({ what: 'data dir ÷ distinct content', value: `${s.data_over_distinct}×`, limit: '≤ 3×', verdict: verdict(s.data_over_distinct, 3) });
  sections.push(
    '### Storage (`conversations.mjs 30 15`: 900 exchanges, every request carrying the whole history)',
    '',
    '| exchanges | wire bytes | distinct content | data dir | per exchange | data ÷ wire | data ÷ distinct |',
    '|--:|--:|--:|--:|--:|--:|--:|',
    `| ${s.exchanges} | ${s.wire_bytes.toLocaleString('en')} | ${s.distinct_content_bytes.toLocaleString('en')} | ${s.data_dir_bytes.toLocaleString('en')} | ${s.per_exchange_bytes} B | ${s.data_over_wire}× | ${s.data_over_distinct}× |`,
    '',
  );
}

// ── durable reports/s ──
const REPORT = JSON.stringify({
  metadata: { client: 'bench', environment: 'bench' },
  request: { timestamp: '2026-11-25T12:00:00.000Z', body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'How fast are durable reports?' }] } },
  response: {
    timestamp: '2026-11-25T12:00:01.000Z',
    body: { model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: 'Fast enough.' } }], usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 } },
  },
});

/**
 * reports/s of bench/report-floor.mjs under the same load: what the machine allows at all; with `journal` (a
 * file), the floor of a durable service (--durable: each turn's bodies appended to it and fdatasync'd before
 * their 201s — no validation, derivation, store or worker)
 */
async function floorPerSecond(journal) {
  const args = [path.join(BENCH_DIR, 'report-floor.mjs'), ...(journal ? ['--durable', journal] : [])];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const url = await new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`report-floor.mjs exited (${code})`)));
      child.stdout.once('data', (d) => resolve(JSON.parse(String(d).split('\n')[0]).url));
    });
    return await postReports(url, child.pid);
  } finally {
    child.kill('SIGTERM');
    if (journal) rmSync(journal, { force: true });
  }
}

/** The machine's CPU time so far, in clock ticks: [all, idle] (idle counts iowait: a core waiting on the disk is free). */
function machineTicks() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return [f.reduce((a, b) => a + b, 0), f[3] + f[4]];
}

/**
 * Durable reports/s under 50 clients, and where the time went while they were measured: the CPU the server
 * (pid) used, in cores, and the cores the machine left idle. A server that answers fewer reports while
 * cores stay idle waits on something (a sync, a hand-over between its threads), rather than on the CPU.
 */
async function postReports(base, pid) {
  const load = (duration) =>
    autocannon({
      url: `${base}/api/reporting/v2/request`,
      method: 'POST',
      connections: 50,
      duration,
      headers: { 'content-type': 'application/json' },
      body: REPORT,
    });
  await load(2);
  const cpu0 = cpuTimeMs(pid);
  const [all0, idle0] = machineTicks();
  const r = await load(5);
  const cpu1 = cpuTimeMs(pid);
  const [all1, idle1] = machineTicks();
  const seconds = (all1 - all0) / CLOCK_TICKS / os.cpus().length;
  return {
    rps: r['2xx'] / 5,
    // how long a client waited for its 201: under 50 clients, a durable service's tail is its longest stall
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.non2xx + r.errors,
    cores: cpu0 !== undefined && cpu1 !== undefined ? (cpu1 - cpu0) / 1000 / seconds : NaN,
    idle: (idle1 - idle0) / CLOCK_TICKS / seconds,
  };
}

async function reportsPerSecond(dir) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'relay-cost-rps-'));
  const relay = await startRelay({ cli: path.join(dir, 'dist', 'cli.js'), upstreamUrl: 'http://127.0.0.1:9', dataDir, buildCommand: 'npm run build' });
  try {
    return await postReports(relay.url, relay.child.pid);
  } finally {
    await stopChild(relay, 10_000);
    rmSync(dataDir, { recursive: true, force: true });
  }
}
if (!skip.has('reports')) {
  const dirs = [...(values.before ? [['before', path.resolve(values.before)]] : []), ['this checkout', ROOT]];
  const got = new Map([...dirs.map(([name]) => [name, []]), ['floor', []], ['durable floor', []]]);
  const journalDir = mkdtempSync(path.join(os.tmpdir(), 'relay-cost-journal-'));
  for (let r = 1; r <= rounds; r++) {
    for (const [name, dir] of dirs) {
      log(`reports/s: round ${r}, ${name}`);
      got.get(name).push(await reportsPerSecond(dir));
    }
    log(`reports/s: round ${r}, floor (bench/report-floor.mjs)`);
    got.get('floor').push(await floorPerSecond());
    log(`reports/s: round ${r}, durable floor (bench/report-floor.mjs --durable)`);
    got.get('durable floor').push(await floorPerSecond(path.join(journalDir, 'journal')));
  }
  rmSync(journalDir, { recursive: true, force: true });
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const lines = [
    '| relay | commit | durable reports/s (median) | rounds | its CPU, cores (median) | machine idle, cores (median) | latency p50 / p99, ms (median) | non-2xx |',
    '|---|---|--:|---|--:|--:|--:|--:|',
  ];
  const row = (name, commit, runs) =>
    `| ${name} | ${commit} | ${Math.round(median(runs.map((x) => x.rps))).toLocaleString('en')} | ${runs.map((x) => Math.round(x.rps)).join(', ')} | ` +
    `${fmt(median(runs.map((x) => x.cores)))} | ${fmt(median(runs.map((x) => x.idle)))} | ${median(runs.map((x) => x.p50))} / ${median(runs.map((x) => x.p99))} | ` +
    `${runs.reduce((s, x) => s + x.errors, 0)} |`;
  for (const [name, dir] of dirs) lines.push(row(name, commitOf(dir), got.get(name)));
  const floor = got.get('floor');
  lines.push(row('floor: node:http + JSON.parse + 201, nothing kept (bench/report-floor.mjs)', '—', floor));
  const durableFloor = got.get('durable floor');
  lines.push(row("durable floor: the same + each turn's bodies appended to a file and fdatasync'd before their 201s (report-floor.mjs --durable)", '—', durableFloor));
  if (values.before) {
    const r = median(got.get('this checkout').map((x) => x.rps)) / median(got.get('before').map((x) => x.rps));
    targets.push({ what: 'durable reports/s against before', value: `${fmt(r)}×`, limit: '≥ 2×', verdict: Number.isFinite(r) ? (r >= 2 ? 'PASS' : 'FAIL') : '—' });
    // where the target stands against the floor: 2× before, as a share of what a server that keeps nothing does
    const f = median(floor.map((x) => x.rps)) / median(got.get('before').map((x) => x.rps));
    targets.push({ what: 'the floor (report-floor.mjs) against before', value: `${fmt(f)}×`, limit: '(the most any relay could reach)', verdict: '—' });
    // …and of a server that keeps what it acknowledges, as cheaply as one can here (no validation, derivation, store)
    const d = median(durableFloor.map((x) => x.rps)) / median(got.get('before').map((x) => x.rps));
    targets.push({ what: 'the durable floor (report-floor.mjs --durable) against before', value: `${fmt(d)}×`, limit: '(the most any durable relay could reach)', verdict: '—' });
  }
  sections.push(
    '### Durable reports/s (50 clients posting to `/api/reporting/v2/request`, 5 s after 2 s warm-up, SQLite)',
    '',
    ...lines,
    '',
    `CPU: the server's own (all threads), in cores of the ${os.cpus().length}; idle: what the machine left unused meanwhile (with iowait). The load generator runs in this process, on the same cores. Latency: autocannon's, from a request sent to its 201 (ms).`,
    '',
  );
}

const markdown = [
  '## Cost per exchange (`npm run bench:cost`: bench/cost.mjs, with the tools of ../shared/bench)',
  '',
  `- date: ${new Date().toISOString()}; node ${process.version}; ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'CPU'}`,
  `- relay: commit ${commitOf(ROOT)}; cache sqlite, reports sqlite; load average before the run: ${os.loadavg().map((x) => x.toFixed(2)).join(', ')}`,
  '',
  '| target | measured | required | |',
  '|---|--:|--:|---|',
  ...targets.map((t) => `| ${t.what} | ${t.value} | ${t.limit} | ${t.verdict} |`),
  '',
  ...sections,
].join('\n');
process.stdout.write(`\n${markdown}\n`);
if (!values['no-write']) await writeSection(path.resolve(values.out ?? path.join(BENCH_DIR, 'results.md')), 'cost', markdown);
