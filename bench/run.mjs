#!/usr/bin/env node
// The llm-relay benchmark: one run, loopback only, every server in its own child process.
//
//   direct       autocannon → fake upstream
//   bare proxy   autocannon → fastify + @fastify/http-proxy → fake upstream
//   relay miss   autocannon → node dist/cli.js (sqlite cache + sqlite reports) → fake upstream, every body unique
//   relay hit    autocannon → node dist/cli.js, the same body every time (answered from the cache)
//
// each for a JSON chat completion and a streamed (SSE) one, plus the time to the first body chunk of the
// streamed answer (sequential undici requests). Prints a markdown table and the project's targets with
// PASS/FAIL, and writes the same to bench/results.md. It does not build: `npm run bench` builds first.
// `node bench/run.mjs --help` lists the options.
import autocannon from 'autocannon';
import { Pool, request } from 'undici';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeSection } from './lib/results-file.mjs';
import { exitOnProblems, parseCommandLine, parseRelayEnv } from './lib/options.mjs';
import { BENCH_DIR, ROOT, cleanup, cpuTimeMs, describeExit, installCleanup, makeLog, makeTempDir, sleep, startHelper, startRelay, stopChild, tail } from './lib/processes.mjs';

const CLI = path.join(ROOT, 'dist', 'cli.js');
const ENDPOINT = '/v1/chat/completions';
const MODEL = 'gpt-4o-mini';
const AUTH = 'Bearer sk-bench';

// ───────────────────────────── options ─────────────────────────────

const HELP = `Usage: node bench/run.mjs [options]      (npm run bench builds the relay first)

Options (each also read from the environment variable shown):
  --upstream-latency LIST
                      the fake upstream's time to answer, in ms; each value is a run of every scenario
                      (0: answers at once, so the run is CPU-bound; 100: a model that thinks, still several
                      times faster than a real one)                  BENCH_UPSTREAM_LATENCY_MS default 0,100
  --connections N     autocannon connections per scenario           BENCH_CONNECTIONS   default 50
  --duration S        measured seconds per scenario                 BENCH_DURATION      default 5
  --warmup S          unmeasured warm-up seconds before each one    BENCH_WARMUP        default 1
  --ttfc-requests N   sequential first-chunk samples per scenario   BENCH_TTFC_REQUESTS default 300
  --ttfc-warmup N     unmeasured first-chunk requests before them   BENCH_TTFC_WARMUP   default 30
  --pause MS          idle time between scenarios                   BENCH_PAUSE_MS      default 1000
  --rounds N          repeat the load phase N times, interleaved; report each scenario's median round
                                                                    BENCH_ROUNDS        default 1
  --only LIST         run a subset: any of direct,bare,node-proxy,relay-miss,relay-hit (or relay) and/or
                      json,stream (node-proxy: the first-chunk floor, streamed only, not loaded)
                                                                    BENCH_ONLY          default all
  --relay-env K=V     extra environment for the relay, repeatable (e.g. RELAY_CACHE_URL=memory)
  --relay-cli FILE    the relay's entry point                       BENCH_RELAY_CLI     default dist/cli.js
  --out FILE          where to write the results                    BENCH_OUT           default bench/results.md
  --no-write          do not write the results file
  --strict            exit 1 when a target FAILs (always exit 1 when a scenario had errors)
  -h, --help          this text
`;

function parseLatencies(raw, problems) {
  const list = raw.split(',').map((v) => v.trim()).filter(Boolean).map(Number);
  if (list.length === 0 || list.some((n) => !Number.isInteger(n) || n < 0 || n > 60_000)) {
    problems.push(`--upstream-latency (BENCH_UPSTREAM_LATENCY_MS) must be a comma-separated list of integers 0–60000, got "${raw}"`);
    return [0];
  }
  return [...new Set(list)];
}

function parseOptions(argv) {
  const values = parseCommandLine(
    argv,
    {
      'upstream-latency': { type: 'string' },
      connections: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      'ttfc-requests': { type: 'string' },
      'ttfc-warmup': { type: 'string' },
      pause: { type: 'string' },
      rounds: { type: 'string' },
      only: { type: 'string' },
      'relay-env': { type: 'string', multiple: true },
      'relay-cli': { type: 'string' },
      out: { type: 'string' },
      'no-write': { type: 'boolean' },
      strict: { type: 'boolean' },
    },
    HELP,
  );
  const problems = [];
  const num = (name, env, dflt, min, integer = true) => {
    const raw = values[name] ?? process.env[env] ?? String(dflt);
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
      problems.push(`--${name} (${env}) must be ${integer ? 'an integer' : 'a number'} ≥ ${min}, got "${raw}"`);
    }
    return n;
  };
  const opts = {
    connections: num('connections', 'BENCH_CONNECTIONS', 50, 1),
    duration: num('duration', 'BENCH_DURATION', 5, 1),
    warmup: num('warmup', 'BENCH_WARMUP', 1, 0),
    ttfcRequests: num('ttfc-requests', 'BENCH_TTFC_REQUESTS', 300, 1),
    ttfcWarmup: num('ttfc-warmup', 'BENCH_TTFC_WARMUP', 30, 0),
    pauseMs: num('pause', 'BENCH_PAUSE_MS', 1000, 0),
    rounds: num('rounds', 'BENCH_ROUNDS', 1, 1),
    out: path.resolve(values.out ?? process.env.BENCH_OUT ?? path.join(BENCH_DIR, 'results.md')),
    write: !values['no-write'],
    strict: Boolean(values.strict),
    relayEnv: parseRelayEnv(values['relay-env'], problems),
    relayCli: path.resolve(values['relay-cli'] ?? process.env.BENCH_RELAY_CLI ?? CLI),
    latencies: parseLatencies(values['upstream-latency'] ?? process.env.BENCH_UPSTREAM_LATENCY_MS ?? '0,100', problems),
    targets: ['direct', 'bare', 'node-proxy', 'relay-miss', 'relay-hit'],
    modes: ['json', 'stream'],
  };
  const only = (values.only ?? process.env.BENCH_ONLY ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  if (only.length > 0) {
    const targets = new Set();
    const modes = new Set();
    for (const t of only) {
      if (t === 'relay') targets.add('relay-miss').add('relay-hit');
      else if (opts.targets.includes(t)) targets.add(t);
      else if (opts.modes.includes(t)) modes.add(t);
      else problems.push(`--only: unknown "${t}" (known: ${[...opts.targets, 'relay', ...opts.modes].join(', ')})`);
    }
    if (targets.size > 0) opts.targets = opts.targets.filter((t) => targets.has(t));
    if (modes.size > 0) opts.modes = opts.modes.filter((m) => modes.has(m));
  }
  exitOnProblems('bench', problems, HELP);
  return opts;
}

// ───────────────────────────── child processes and the relay's log ─────────────────────────────

const log = makeLog('bench');
installCleanup({ log, relayGraceMs: 8000 });

// What the relay logs (warn and above, pino JSON), grouped by the phase of the run it was logged in.
let currentPhase = 'start-up';
const setPhase = (p) => {
  currentPhase = p;
};
const relayLog = new Map();
const PINO_LEVELS = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

function recordRelayLine(line) {
  if (!line.trim()) return;
  let level = 'output';
  let msg = line.trim().slice(0, 300);
  try {
    const j = JSON.parse(line);
    level = PINO_LEVELS[j.level] ?? String(j.level);
    msg = String(j.msg ?? '');
    if (j.err) {
      const at = String(j.err.stack ?? '').split('\n').find((l) => l.trim().startsWith('at '));
      msg += ` — ${j.err.type ?? 'Error'}: ${j.err.message}${at ? ` (${at.trim().replaceAll(`file://${ROOT}/`, '').replaceAll(`${ROOT}/`, '')})` : ''}`;
    }
    if (j.req?.method) msg += ` — ${j.req.method} ${j.req.url}`;
    if (j.res?.statusCode) msg += ` → ${j.res.statusCode}`;
  } catch {
    /* plain text */
  }
  const key = `${currentPhase}\u0000${level}\u0000${msg}`;
  const entry = relayLog.get(key);
  if (entry) entry.count++;
  else if (relayLog.size < 200) relayLog.set(key, { phase: currentPhase, level, msg, count: 1 });
}

// ───────────────────────────── requests and checks ─────────────────────────────

const RUN_ID = Math.random().toString(36).slice(2, 10);
const HEADERS = { 'content-type': 'application/json', authorization: AUTH };
/** The request headers of a run with the given upstream latency (the fake upstream reads x-fake-latency-ms). */
const headersFor = (latency) => (latency > 0 ? { ...HEADERS, 'x-fake-latency-ms': String(latency) } : HEADERS);

function chatBody(mode, content) {
  const body = { model: MODEL, messages: [{ role: 'user', content }] };
  if (mode === 'stream') body.stream = true;
  return JSON.stringify(body);
}

/** A body factory: unique (a counter in the message) or always the same. */
function bodyFactory(mode, unique, label) {
  if (!unique) {
    const fixed = chatBody(mode, `Benchmark ${RUN_ID}: explain in one paragraph why a response cache helps (${mode}).`);
    return () => fixed;
  }
  let n = 0;
  return () => chatBody(mode, `Benchmark ${RUN_ID} ${label} request #${++n}: explain in one paragraph why a response cache helps (${mode}).`);
}

/** Full check of one answer; returns a problem description, or null. */
function checkAnswer(mode, status, text) {
  if (status !== 200) return `HTTP ${status}: ${summarizeBody(text)}`;
  if (mode === 'json') {
    let v;
    try {
      v = JSON.parse(text);
    } catch {
      return `200 but the body is not JSON: ${summarizeBody(text)}`;
    }
    if (v?.object !== 'chat.completion' || typeof v?.choices?.[0]?.message?.content !== 'string') {
      return `200 but not a chat.completion: ${summarizeBody(text)}`;
    }
    return null;
  }
  const events = text.split(/\r?\n\r?\n/).map((e) => e.trim()).filter(Boolean);
  const datas = events.map((e) => e.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n'));
  if (datas.length < 2) return `200 but not an SSE stream of chunks: ${summarizeBody(text)}`;
  if (datas[datas.length - 1] !== '[DONE]') return `the stream does not end with data: [DONE]: …${text.slice(-120)}`;
  for (const d of datas.slice(0, -1)) {
    try {
      if (JSON.parse(d).object !== 'chat.completion.chunk') return `an event is not a chat.completion.chunk: ${d.slice(0, 120)}`;
    } catch {
      return `an event is not JSON: ${d.slice(0, 120)}`;
    }
  }
  return null;
}

/** The cheap per-response check used under load (the same for every scenario). */
function looksRight(mode, body) {
  return mode === 'json'
    ? body.charCodeAt(0) === 123 && body.includes('"choices"')
    : body.startsWith('data:') && body.includes('chat.completion.chunk') && body.trimEnd().endsWith('data: [DONE]');
}

function summarizeBody(text) {
  try {
    const v = JSON.parse(text);
    const code = v.code ?? v.error?.code ?? v.error?.type;
    const message = v.message ?? v.error?.message ?? (typeof v.error === 'string' ? v.error : undefined);
    if (code || message) return [code, message].filter(Boolean).join(': ').slice(0, 240);
  } catch {
    /* not JSON */
  }
  return JSON.stringify(text.slice(0, 200));
}

/** One request; the full body as text, and when its first chunk arrived. */
async function call(dispatcherOrUrl, body, headers = HEADERS) {
  const t0 = process.hrtime.bigint();
  const res =
    typeof dispatcherOrUrl === 'string'
      ? await request(`${dispatcherOrUrl}${ENDPOINT}`, { method: 'POST', headers, body, headersTimeout: 75_000, bodyTimeout: 75_000 })
      : await dispatcherOrUrl.request({ method: 'POST', path: ENDPOINT, headers, body, headersTimeout: 75_000, bodyTimeout: 75_000 });
  let first;
  let text = '';
  res.body.setEncoding('utf8');
  await new Promise((resolve, reject) => {
    res.body.on('data', (chunk) => {
      first ??= process.hrtime.bigint();
      text += chunk;
    });
    res.body.on('end', resolve);
    res.body.on('error', reject);
  });
  const cache = res.headers['x-relay-cache'];
  return {
    status: res.statusCode,
    cache: Array.isArray(cache) ? cache.join(',') : cache,
    text,
    firstChunkMs: first === undefined ? undefined : Number(first - t0) / 1e6,
  };
}

/** Check a request against one scenario's expectations; returns a problem description, or null. */
function checkCall(sc, r) {
  const problem = checkAnswer(sc.mode, r.status, r.text);
  if (problem) return problem;
  if (sc.expectCache && r.cache !== sc.expectCache) {
    return `expected x-relay-cache: ${sc.expectCache}, got ${r.cache === undefined ? 'no x-relay-cache header' : `x-relay-cache: ${r.cache}`}`;
  }
  return null;
}

/** Before loading a scenario: a sample must answer 200, a valid body, and the right x-relay-cache. */
async function preflight(sc) {
  if (sc.target === 'relay-hit') {
    // the warm-up call that stores the entry (a MISS on a fresh data dir), then the same body must HIT
    const warm = await call(sc.url, sc.nextBody(), sc.headers);
    const problem = checkAnswer(sc.mode, warm.status, warm.text);
    if (problem) return `warm-up call: ${problem}`;
    let last;
    const deadline = Date.now() + 3000; // storing may finish just after the answer was sent
    do {
      last = await call(sc.url, sc.nextBody(), sc.headers);
      if (last.status === 200 && last.cache === 'HIT') break;
      await sleep(50);
    } while (Date.now() < deadline);
    const p = checkCall(sc, last);
    if (p) return `after a warm-up call (x-relay-cache: ${warm.cache ?? 'none'}), the same request: ${p}`;
  }
  for (let i = 0; i < 3; i++) {
    const p = checkCall(sc, await call(sc.url, sc.nextBody(), sc.headers));
    if (p) return p;
  }
  return null;
}

// ───────────────────────────── measurements ─────────────────────────────

const percentile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];

/** Sequential requests on one keep-alive connection: time from sending to the first body chunk. */
async function measureFirstChunk(sc, count, warm) {
  const pool = sc.ttfcPool ?? (sc.ttfcPool = new Pool(new URL(sc.url).origin, { connections: 1, pipelining: 1 }));
  for (let i = 0; i < count + warm; i++) {
    let r;
    try {
      r = await call(pool, sc.nextBody(), sc.headers);
    } catch (err) {
      sc.ttfc.errors++;
      sc.ttfc.firstError ??= `${err.code ?? err.name}: ${err.message}`;
      continue;
    }
    const p = checkCall(sc, r);
    if (p) {
      sc.ttfc.errors++;
      sc.ttfc.firstError ??= p;
    } else if (i >= warm) {
      sc.ttfc.samples.push(r.firstChunkMs);
    }
  }
}

/** One autocannon run; the per-response hook counts x-relay-cache values and malformed bodies. */
async function load(sc, seconds, connections, counters) {
  const origin = new URL(sc.url).origin;
  const cpu0 = cpuSnapshot(sc);
  const result = await autocannon({
    url: origin,
    connections,
    duration: seconds,
    timeout: 10 + Math.ceil(sc.latency / 1000),
    requests: [
      {
        method: 'POST',
        path: ENDPOINT,
        headers: { ...sc.headers },
        setupRequest: (req) => {
          req.body = sc.nextBody();
          return req;
        },
        onResponse: (status, body, _context, headers) => {
          if (!counters) return;
          const v = headers['x-relay-cache'] ?? headers['X-Relay-Cache'] ?? '(none)';
          counters.cache[v] = (counters.cache[v] ?? 0) + 1;
          if (status >= 200 && status < 300 && !looksRight(sc.mode, body)) {
            counters.bad++;
            counters.firstBad ??= body.slice(0, 160);
          }
        },
      },
    ],
  });
  if (counters) counters.cpuMs = cpuSince(cpu0, sc);
  return result;
}

/** CPU time so far of this process (autocannon runs here) and of each server the scenario loads. */
function cpuSnapshot(sc) {
  const u = process.cpuUsage();
  const snap = { 'load generator': (u.user + u.system) / 1000 };
  for (const p of sc.procs) snap[p.name] = cpuTimeMs(p.child.pid);
  return snap;
}

function cpuSince(before, sc) {
  const after = cpuSnapshot(sc);
  const out = {};
  for (const [name, ms] of Object.entries(after)) {
    if (ms !== undefined && before[name] !== undefined) out[name] = ms - before[name];
  }
  return out;
}

/** One round of one scenario: a warm-up run, then the measured run. */
async function runLoad(sc, opts) {
  if (opts.warmup > 0) {
    const w = await load(sc, opts.warmup, opts.connections, null);
    sc.warmupErrors = (sc.warmupErrors ?? 0) + w.errors + w.non2xx;
  }
  const counters = { cache: {}, bad: 0, firstBad: undefined };
  const r = await load(sc, opts.duration, opts.connections, counters);
  const round = {
    reqPerSec: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    responses: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors - r.timeouts,
    timeouts: r.timeouts,
    bad: counters.bad,
    firstBad: counters.firstBad,
    cache: counters.cache,
    cpuMs: counters.cpuMs,
    statusCodes: Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([k, v]) => [k, v.count])),
  };
  (sc.rounds ??= []).push(round);
  sc.load = aggregateRounds(sc);
  return round;
}

/** The median round's speed and latency; every round's errors and counts. */
function aggregateRounds(sc) {
  const rounds = sc.rounds;
  const median = [...rounds].sort((a, b) => a.reqPerSec - b.reqPerSec)[Math.floor((rounds.length - 1) / 2)];
  const sum = (k) => rounds.reduce((n, r) => n + r[k], 0);
  const merge = (k) => {
    const out = {};
    for (const r of rounds) for (const [v, c] of Object.entries(r[k])) out[v] = (out[v] ?? 0) + c;
    return out;
  };
  const cache = merge('cache');
  return {
    reqPerSec: median.reqPerSec,
    cpuUsPerResponse: Object.fromEntries(
      Object.entries(median.cpuMs ?? {}).map(([name, ms]) => [name, median.responses > 0 ? (ms * 1000) / median.responses : undefined]),
    ),
    p50: median.p50,
    p99: median.p99,
    perRound: rounds.map((r) => r.reqPerSec),
    responses: sum('responses'),
    non2xx: sum('non2xx'),
    errors: sum('errors'),
    timeouts: sum('timeouts'),
    bad: sum('bad'),
    firstBad: rounds.find((r) => r.firstBad !== undefined)?.firstBad,
    cache,
    cacheMismatches: sc.expectCache ? Object.entries(cache).reduce((n, [v, c]) => (v === sc.expectCache ? n : n + c), 0) : 0,
    statusCodes: merge('statusCodes'),
  };
}

// ───────────────────────────── report ─────────────────────────────

const TARGET_LABEL = { direct: 'direct', bare: 'bare proxy', 'node-proxy': 'node:http proxy', 'relay-miss': 'relay miss', 'relay-hit': 'relay hit' };
const MODE_LABEL = { json: 'JSON', stream: 'stream' };
const fmtInt = (n) => (n === undefined || Number.isNaN(n) ? '—' : Math.round(n).toLocaleString('en-US'));
const fmtMs = (n, digits = 0) => (n === undefined || Number.isNaN(n) ? '—' : digits === 0 && n < 1 ? '<1' : n.toFixed(digits));

function problemsOf(sc) {
  const out = [];
  if (sc.error) out.push(sc.error);
  if (sc.load) {
    const l = sc.load;
    if (l.non2xx) out.push(`${l.non2xx} non-2xx answers (${JSON.stringify(l.statusCodes)})`);
    if (l.errors) out.push(`${l.errors} connection errors`);
    if (l.timeouts) out.push(`${l.timeouts} timeouts`);
    if (l.bad) out.push(`${l.bad} malformed 2xx bodies (first: ${JSON.stringify(l.firstBad)})`);
    if (l.cacheMismatches) out.push(`${l.cacheMismatches} answers without x-relay-cache: ${sc.expectCache} (${JSON.stringify(l.cache)})`);
  }
  if (sc.warmupErrors) out.push(`${sc.warmupErrors} errors/non-2xx during the warm-up`);
  if (sc.ttfc && sc.ttfc.errors) out.push(`first-chunk run: ${sc.ttfc.errors} failed requests (first: ${sc.ttfc.firstError})`);
  return out;
}

const valid = (sc) => sc !== undefined && sc.load !== undefined && problemsOf(sc).length === 0;
const ttfcP = (sc, q) => (sc?.ttfc && sc.ttfc.samples.length > 0 ? percentile(sc.ttfc.sorted, q) : undefined);

function buildReport(scenarios, opts, meta) {
  const find = (target, mode, latency) => scenarios.find((s) => s.target === target && s.mode === mode && s.latency === latency);
  const lines = [];
  lines.push('| scenario | req/s | p50 ms | p99 ms | first chunk p50 ms | first chunk p99 ms | responses | errors |');
  lines.push('|---|--:|--:|--:|--:|--:|--:|---|');
  for (const sc of scenarios) {
    const l = sc.load;
    const problems = problemsOf(sc);
    const errCell = sc.error
      ? `**not measured**: ${sc.error.split('\n')[0].slice(0, 160)}`
      : problems.length > 0
        ? `**${problems.length} problem${problems.length > 1 ? 's' : ''}** (see below)`
        : sc.firstChunkOnly
          ? '0 (first chunk only, not loaded)'
          : '0';
    lines.push(
      `| ${sc.name} | ${fmtInt(l?.reqPerSec)} | ${fmtMs(l?.p50)} | ${fmtMs(l?.p99)} | ${sc.mode === 'stream' ? fmtMs(ttfcP(sc, 0.5), 3) : '—'} | ${sc.mode === 'stream' ? fmtMs(ttfcP(sc, 0.99), 3) : '—'} | ${fmtInt(l?.responses)} | ${errCell} |`,
    );
  }

  const cpuLines = [];
  if (scenarios.some((sc) => sc.load && Object.keys(sc.load.cpuUsPerResponse).length > 1)) {
    const fmtUs = (n) => (n === undefined ? '—' : Math.round(n).toLocaleString('en-US'));
    cpuLines.push('| scenario | load generator µs | fake upstream µs | proxy under test µs | all µs |', '|---|--:|--:|--:|--:|');
    for (const sc of scenarios) {
      if (!sc.load) continue;
      const c = sc.load.cpuUsPerResponse;
      const proxy = c.relay ?? c['bare proxy'];
      const all = Object.values(c).reduce((n, v) => n + (v ?? 0), 0);
      cpuLines.push(`| ${sc.name} | ${fmtUs(c['load generator'])} | ${fmtUs(c['fake upstream'])} | ${fmtUs(proxy)} | ${fmtUs(all)} |`);
    }
  }

  const checks = [];
  const ratioCheck = (label, num, den, threshold, bound) => {
    if (!num || !den) return; // not selected with --only
    let value = '—';
    let verdict;
    if (!valid(num) || !valid(den)) {
      const bad = [num, den].filter((s) => !valid(s)).map((s) => s.name);
      verdict = `FAIL (no clean measurement of ${bad.join(', ')})`;
    } else {
      const ratio = num.load.reqPerSec / den.load.reqPerSec;
      value = `${ratio.toFixed(2)}×`;
      verdict = ratio >= threshold ? 'PASS' : `FAIL${bound && bound.value < threshold ? ` (${bound.text})` : ''}`;
    }
    checks.push({ label, value, target: `≥ ${threshold.toFixed(2)}×`, verdict });
  };
  // What no proxy on this machine can beat, measured in the same run (see bench/README.md).
  const hitCeiling = (mode, latency) => {
    const d = find('direct', mode, latency);
    const b = find('bare', mode, latency);
    if (!valid(d) || !valid(b)) return undefined;
    const value = d.load.reqPerSec / b.load.reqPerSec;
    return { value, text: `ceiling here: direct ÷ bare proxy = ${value.toFixed(2)}×` };
  };
  const firstChunkFloor = (latency) => {
    const d = find('direct', 'stream', latency);
    const n = find('node-proxy', 'stream', latency);
    if (ttfcP(d, 0.5) === undefined || ttfcP(n, 0.5) === undefined || problemsOf(n).length > 0) return undefined;
    return ttfcP(n, 0.5) - ttfcP(d, 0.5);
  };
  for (const latency of opts.latencies) {
    const at = ` · upstream ${latency} ms`;
    for (const mode of ['json', 'stream']) {
      ratioCheck(`relay miss ÷ bare proxy req/s (${MODE_LABEL[mode]}${at})`, find('relay-miss', mode, latency), find('bare', mode, latency), 1.0);
    }
    for (const mode of ['json', 'stream']) {
      ratioCheck(`relay hit ÷ bare proxy req/s (${MODE_LABEL[mode]}${at})`, find('relay-hit', mode, latency), find('bare', mode, latency), 3.0, hitCeiling(mode, latency));
    }
    const miss = find('relay-miss', 'stream', latency);
    const direct = find('direct', 'stream', latency);
    const label = `relay miss first chunk p50 − direct first chunk p50 (stream${at})`;
    if (miss && direct) {
      const ok = (s) => s.ttfc && s.ttfc.samples.length > 0 && problemsOf(s).length === 0;
      if (!ok(miss) || !ok(direct)) {
        const bad = [miss, direct].filter((s) => !ok(s)).map((s) => s.name);
        checks.push({ label, value: '—', target: '≤ 1.000 ms', verdict: `FAIL (no clean measurement of ${bad.join(', ')})` });
      } else {
        const d = ttfcP(miss, 0.5) - ttfcP(direct, 0.5);
        const floor = firstChunkFloor(latency);
        const why = floor !== undefined && floor > 1 ? ` (floor here: the node:http proxy is +${floor.toFixed(3)} ms)` : '';
        checks.push({ label, value: `${d >= 0 ? '+' : ''}${d.toFixed(3)} ms`, target: '≤ 1.000 ms', verdict: d <= 1 ? 'PASS' : `FAIL${why}` });
      }
    }
  }
  const targetLines = [];
  if (checks.length > 0) {
    targetLines.push('| target | measured | required | result |', '|---|--:|--:|---|');
    for (const c of checks) targetLines.push(`| ${c.label} | ${c.value} | ${c.target} | ${c.verdict} |`);
  } else {
    targetLines.push('(none of the targets applies to the scenarios selected with --only)');
  }

  // for reading the targets: what the baseline costs
  const info = [];
  for (const latency of opts.latencies) {
    const at = `, upstream ${latency} ms`;
    for (const mode of ['json', 'stream']) {
      const b = find('bare', mode, latency);
      const d = find('direct', mode, latency);
      if (valid(b) && valid(d)) {
        // A hit cannot cost less than the fake upstream's own bare answer, so in a CPU-bound run this bounds
        // what any relay's hit ÷ bare proxy could reach on this machine.
        info.push(`direct ÷ bare proxy req/s (${MODE_LABEL[mode]}${at}): ${(d.load.reqPerSec / b.load.reqPerSec).toFixed(2)}×`);
      }
    }
    const direct = find('direct', 'stream', latency);
    const bareS = find('bare', 'stream', latency);
    const hitS = find('relay-hit', 'stream', latency);
    if (direct && bareS && ttfcP(direct, 0.5) !== undefined && ttfcP(bareS, 0.5) !== undefined) {
      info.push(`bare proxy first chunk p50 − direct (stream${at}): ${(ttfcP(bareS, 0.5) - ttfcP(direct, 0.5)).toFixed(3)} ms`);
    }
    const floor = firstChunkFloor(latency);
    if (floor !== undefined) {
      // The least one HTTP hop written in Node costs here: no framework, no limits, no cache, no report.
      info.push(`node:http proxy first chunk p50 − direct (stream${at}): ${floor.toFixed(3)} ms (the floor of the first-chunk target for any Node proxy here)`);
    }
    const missS = find('relay-miss', 'stream', latency);
    if (bareS && missS && ttfcP(bareS, 0.5) !== undefined && ttfcP(missS, 0.5) !== undefined) {
      // What the relay itself adds to a hop, whatever the hop costs on this machine.
      info.push(`relay miss first chunk p50 − bare proxy (stream${at}): ${(ttfcP(missS, 0.5) - ttfcP(bareS, 0.5)).toFixed(3)} ms`);
    }
    if (direct && hitS && ttfcP(direct, 0.5) !== undefined && ttfcP(hitS, 0.5) !== undefined) {
      info.push(`relay hit first chunk p50 − direct (stream${at}): ${(ttfcP(hitS, 0.5) - ttfcP(direct, 0.5)).toFixed(3)} ms`);
    }
  }
  if (opts.rounds > 1) {
    for (const sc of scenarios) {
      if (sc.load) info.push(`${sc.name}: req/s per round ${sc.load.perRound.map(fmtInt).join(', ')} (the table shows the median round)`);
    }
  }
  for (const sc of scenarios) {
    if (sc.load && sc.expectCache) {
      const counts = Object.entries(sc.load.cache).map(([v, c]) => `${v}×${c}`).join(', ');
      info.push(`${sc.name}: x-relay-cache under load: ${counts || '(no answers)'}`);
    }
  }

  const problemLines = [];
  for (const sc of scenarios) {
    for (const p of problemsOf(sc)) problemLines.push(`- **${sc.name}**: ${p.replace(/\n/g, '\n  ')}`);
  }
  for (const w of meta.warnings) problemLines.push(`- ${w.replace(/\n/g, '\n  ')}`);
  info.push(...meta.notes);

  const logLines = [];
  if (relayLog.size > 0) {
    logLines.push(
      'What the relay logged at warn level and above (RELAY_LOG_LEVEL=warn), by the phase of the run in which the line ' +
        'arrived (approximate: logging is asynchronous).',
      '',
      '| during | level | message | count |',
      '|---|---|---|--:|',
    );
    for (const e of relayLog.values()) {
      logLines.push(`| ${e.phase} | ${e.level} | ${e.msg.replaceAll('|', '\\|').slice(0, 400)} | ${e.count} |`);
    }
  } else if (scenarios.some((sc) => sc.target.startsWith('relay') && sc.load)) {
    logLines.push('Nothing at warn level or above.');
  }

  const settings =
    `${opts.connections} connections, ${opts.duration} s measured after ${opts.warmup} s warm-up per scenario; ` +
    `first chunk: ${opts.ttfcRequests} sequential requests on one keep-alive connection after ${opts.ttfcWarmup} warm-up requests ` +
    `(a third of each with a slow upstream); upstream latency runs: ${opts.latencies.map((l) => `${l} ms`).join(', ')}` +
    (opts.rounds > 1 ? `; ${opts.rounds} interleaved load rounds, median shown` : '');
  const relayEnv = Object.keys(opts.relayEnv).length
    ? `, extra relay env ${Object.entries(opts.relayEnv).map(([k, v]) => `${k}=${v}`).join(' ')}`
    : '';

  const body = [
    '### Throughput and latency',
    '',
    ...lines,
    '',
    'req/s: mean of the per-second samples; p50/p99: autocannon latency of 2xx answers (whole ms); first chunk: ' +
      'time from sending a streamed request to its first body chunk (undici, sequential).',
    '',
    ...(cpuLines.length
      ? [
          '### CPU per answer',
          '',
          ...cpuLines,
          '',
          'CPU time (user + system, all threads) each process used during the measured run of the median round, ' +
            'divided by the answers in that run (Linux /proc, 10 ms ticks). Steadier than req/s on a shared machine: ' +
            'this is what the relay costs, whatever else runs.',
          '',
        ]
      : []),
    '### Targets',
    '',
    ...targetLines,
    '',
    ...(info.length ? ['### Notes', '', ...info.map((i) => `- ${i}`), ''] : []),
    '### Errors',
    '',
    ...(problemLines.length ? problemLines : ['None: every answer was a 200 with a well-formed body and the expected `x-relay-cache`.']),
    '',
    ...(logLines.length ? ['### Relay log', '', ...logLines, ''] : []),
  ].join('\n');

  const header = [
    '## Throughput against a direct call and a bare proxy (`npm run bench`: bench/run.mjs)',
    '',
    `- date: ${meta.date}`,
    `- node: ${process.version} (${process.platform} ${process.arch})`,
    `- CPU: ${meta.cpu}`,
    `- relay: ${meta.commit}; cache ${opts.relayEnv.RELAY_CACHE_URL ?? 'sqlite'}, reports ${opts.relayEnv.RELAY_REPORTS_URL ?? 'sqlite'}${relayEnv}`,
    `- load average before the run: ${meta.loadavg}`,
    `- settings: ${settings}`,
    '- everything on one machine over loopback: autocannon, the fake upstream, the bare proxy and the relay share the CPU',
    '',
  ].join('\n');

  return { markdown: `${header}\n${body}`, checks, body };
}

/** dist/ is rebuilt as a whole by tsc: a source file newer than the entry point means a stale build. */
function staleBuild(cli) {
  if (cli !== CLI || !existsSync(CLI)) return undefined;
  const built = statSync(CLI).mtimeMs;
  const newer = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && statSync(p).mtimeMs > built) newer.push(path.relative(ROOT, p));
    }
  };
  try {
    walk(path.join(ROOT, 'src'));
  } catch {
    return undefined;
  }
  return newer.length
    ? `dist/ may be stale: ${newer.length} file(s) in src/ changed after the last build (${newer.slice(0, 3).join(', ')}${newer.length > 3 ? ', …' : ''}); \`npm run bench\` builds first`
    : undefined;
}

function gitDescribe() {
  try {
    const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return `commit ${sha}${dirty ? ' (with uncommitted changes)' : ''}`;
  } catch {
    return 'commit unknown (not a git checkout)';
  }
}

// ───────────────────────────── main ─────────────────────────────

async function main() {
  const opts = parseOptions(process.argv.slice(2));
  const cpus = os.cpus();
  const meta = {
    date: new Date().toISOString(),
    cpu: `${cpus[0]?.model?.trim() ?? 'unknown'} × ${cpus.length}`,
    commit: gitDescribe(),
    warnings: [],
    notes: [],
    loadavg: os.loadavg().map((n) => n.toFixed(2)).join(', '),
  };
  const wantRelay = opts.targets.some((t) => t.startsWith('relay'));
  if (wantRelay) {
    const stale = staleBuild(opts.relayCli);
    if (stale) {
      meta.warnings.push(stale);
      log(stale);
    }
  }

  log(`starting the fake upstream${opts.targets.includes('bare') ? ', the bare proxy' : ''}${opts.targets.includes('node-proxy') ? ', the node:http proxy' : ''}${wantRelay ? ' and the relay' : ''}`);
  const upstream = await startHelper('fake upstream', 'fake-upstream.mjs', []);
  const urls = { direct: upstream.url };
  const procs = { direct: [upstream] };
  let bareError;
  if (opts.targets.includes('bare')) {
    try {
      const bare = await startHelper('bare proxy', 'bare-proxy.mjs', ['--upstream', upstream.url]);
      urls.bare = bare.url;
      procs.bare = [bare, upstream];
    } catch (err) {
      bareError = `the bare proxy did not start: ${err.message}`;
    }
  }
  // The thinnest HTTP proxy in Node (node:http + undici, bench/reference-proxy.mjs): its first chunk is the
  // floor of the first-chunk target on this machine. Measured for the first chunk only, never loaded.
  let nodeProxyError;
  if (opts.targets.includes('node-proxy') && opts.modes.includes('stream')) {
    try {
      const ref = await startHelper('node:http proxy', 'reference-proxy.mjs', ['--kind', 'http', '--upstream', upstream.url]);
      urls['node-proxy'] = ref.url;
      procs['node-proxy'] = [ref, upstream];
    } catch (err) {
      nodeProxyError = `the node:http proxy did not start: ${err.message}`;
    }
  }
  let relayError;
  let relay;
  if (wantRelay) {
    const dataDir = await makeTempDir('llm-relay-bench-');
    try {
      relay = await startRelay({
        cli: opts.relayCli,
        upstreamUrl: upstream.url,
        dataDir,
        env: opts.relayEnv,
        onLogLine: recordRelayLine,
        buildCommand: 'npm run bench',
      });
      urls['relay-miss'] = urls['relay-hit'] = relay.url;
      procs['relay-miss'] = procs['relay-hit'] = [relay, upstream];
    } catch (err) {
      relayError = `the relay did not start: ${err.message}`;
    }
  }

  const scenarios = [];
  for (const latency of opts.latencies) for (const mode of opts.modes) {
    for (const target of opts.targets) {
      if (target === 'node-proxy' && mode !== 'stream') continue;
      scenarios.push({
        name: `${TARGET_LABEL[target]} · ${MODE_LABEL[mode]} · upstream ${latency} ms`,
        target,
        mode,
        latency,
        headers: headersFor(latency),
        url: urls[target],
        procs: procs[target] ?? [],
        expectCache: target === 'relay-miss' ? 'MISS' : target === 'relay-hit' ? 'HIT' : undefined,
        nextBody: bodyFactory(mode, target !== 'relay-hit', `${target}-${latency}`),
        error: target === 'bare' ? bareError : target === 'node-proxy' ? nodeProxyError : target.startsWith('relay') ? relayError : undefined,
        ttfc: mode === 'stream' ? { samples: [], errors: 0, firstError: undefined } : undefined,
        firstChunkOnly: target === 'node-proxy',
      });
    }
  }
  const deadProcess = (sc) => {
    const dead = sc.procs.find((p) => p.exit);
    return dead ? `${dead.name} exited with ${describeExit(dead.exit)} during the run:\n${tail(dead.output)}` : undefined;
  };

  // 1. a sample of every scenario must be right before anything is measured
  for (const sc of scenarios) {
    if (sc.error) continue;
    setPhase(`check ${sc.name}`);
    try {
      const p = await preflight(sc);
      if (p) sc.error = `sample request before loading: ${p}`;
    } catch (err) {
      sc.error = deadProcess(sc) ?? `sample request before loading failed: ${err.code ?? err.name}: ${err.message}`;
    }
    log(`check ${sc.name}: ${sc.error ? `FAILED — ${sc.error.split('\n')[0]}` : 'ok'}`);
  }

  // 2. first chunk of the streamed answers, while the machine is otherwise idle; interleaved in rounds
  const streamed = scenarios.filter((s) => s.ttfc && !s.error);
  if (streamed.length > 0) {
    log(`first chunk: ${opts.ttfcRequests} sequential requests per streamed scenario`);
    const rounds = Math.min(3, opts.ttfcRequests);
    for (let round = 0; round < rounds; round++) {
      const count = Math.floor(opts.ttfcRequests / rounds) + (round < opts.ttfcRequests % rounds ? 1 : 0);
      for (const sc of streamed) {
        setPhase(`first chunk ${sc.name}`);
        try {
          // with a slow upstream every sample takes its latency: a third of the samples is plenty there
          const share = sc.latency > 0 ? 1 / 3 : 1;
          await measureFirstChunk(sc, Math.ceil(count * share), round === 0 ? Math.ceil(opts.ttfcWarmup * share) : 0);
        } catch (err) {
          sc.ttfc.errors++;
          sc.ttfc.firstError ??= deadProcess(sc) ?? err.message;
        }
      }
    }
    for (const sc of streamed) {
      sc.ttfc.sorted = [...sc.ttfc.samples].sort((a, b) => a - b);
      await sc.ttfcPool?.close().catch(() => {});
    }
  }

  // 3. throughput under load; with --rounds, the scenarios take turns
  for (let round = 1; round <= opts.rounds; round++) {
    for (const sc of scenarios) {
      if (sc.error || sc.firstChunkOnly) continue;
      const dead = deadProcess(sc);
      if (dead) {
        sc.error = dead;
        continue;
      }
      await sleep(opts.pauseMs);
      const of = opts.rounds > 1 ? ` (round ${round}/${opts.rounds})` : '';
      log(`load ${sc.name}${of}: ${opts.connections} connections, ${opts.warmup} s warm-up + ${opts.duration} s`);
      setPhase(`load ${sc.name}`);
      try {
        const r = await runLoad(sc, opts);
        log(`  ${fmtInt(r.reqPerSec)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, ${r.non2xx + r.errors + r.timeouts + r.bad} errors`);
      } catch (err) {
        sc.error = `autocannon failed: ${err.message}`;
      }
      sc.error ??= deadProcess(sc);
    }
  }
  setPhase('end of the run');

  // stop the relay now, so its shutdown (SIGTERM: drain, flush reports, exit 0) is part of the report
  if (relay && !relay.exit) {
    setPhase('shutdown (SIGTERM)');
    relay.expectedExit = true;
    const t0 = Date.now();
    await stopChild(relay, 8000);
    const ms = Date.now() - t0;
    if (relay.exit.code !== 0) {
      meta.warnings.push(`the relay did not shut down cleanly on SIGTERM: it exited with ${describeExit(relay.exit)} after ${ms} ms${relay.exit.signal === 'SIGKILL' ? ' (killed after 8 s)' : ''}`);
    } else {
      meta.notes.push(`the relay shut down on SIGTERM with exit code 0 in ${ms} ms`);
    }
  }

  const report = buildReport(scenarios, opts, meta);
  process.stdout.write(`\n${report.markdown}\n`);
  if (opts.write) {
    await writeSection(opts.out, 'throughput', report.markdown);
    log(`results written to ${path.relative(process.cwd(), opts.out) || opts.out}`);
  }
  const anyProblem = scenarios.some((s) => problemsOf(s).length > 0);
  const anyFail = report.checks.some((c) => c.verdict !== 'PASS');
  if (anyProblem) log('some scenarios were not measured cleanly: see "Errors"');
  return anyProblem || (opts.strict && anyFail) ? 1 : 0;
}

let code = 1;
try {
  code = await main();
} catch (err) {
  log(`failed: ${err.stack ?? err}`);
  code = 1;
} finally {
  await cleanup();
}
process.exit(code);
