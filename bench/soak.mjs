#!/usr/bin/env node
// The llm-relay soak test: a bounded run (default 2 minutes), loopback only, every server in its own child
// process (bench/fake-upstream.mjs and the built relay, `node dist/cli.js`, with a fresh temp data dir and
// SQLite cache and reports, as bench/run.mjs starts them).
//
// For the whole duration, N workers (default 30) share a steady request rate (default 200/s) and mix:
//   hit       one of a few fixed chat bodies (JSON or streamed): after their first call, answered from the cache
//   miss      a unique JSON chat body: looked up, forwarded, stored, reported
//   stream    a unique streamed chat body, read to its `data: [DONE]`
//   abort     a unique streamed body the upstream paces (x-fake-event-gap-ms); the client reads the first
//             chunk and goes away in the middle of the stream
//   4xx / 5xx the upstream answers an error (x-fake-status, or a body without a model): passed through
//   report    a direct POST /api/reporting/v2/request (201 = durable)
// Every request that reached the relay is counted as an exchange: each proxied exchange (hit, miss, error,
// abort) becomes exactly one report, and so does each 201 of the direct API.
//
// At the end it waits until the relay has flushed (no report pending, outbox empty), counts the stored reports
// (the NDJSON export), reads /metrics, and checks:
//   reports stored == exchanges made · llm_relay_reports_dropped_total == 0 · RSS flat · every answer as expected
// RSS (VmRSS of the relay process, /proc/<pid>/status) is sampled after the warm-up ("start"), every 10 s and at
// the end of the load ("end"). Exit 1 on any FAIL. Children and the temp dir are always removed.
//
//   npm run soak                       (builds first)   ·   node bench/soak.mjs --minutes 1   ·   -h for options
import { Agent, request } from 'undici';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { exitOnProblems, parseCommandLine, parseRelayEnv } from './lib/options.mjs';
import { ROOT, cleanup, describeExit, installCleanup, makeLog, makeTempDir, sleep, startHelper, startRelay, stopChild } from './lib/processes.mjs';

const ENDPOINT = '/v1/chat/completions';
const MODEL = 'gpt-4o-mini';
const AUTH = 'Bearer sk-soak';
const MB = 1024 * 1024;

// ───────────────────────────── options ─────────────────────────────

const HELP = `Usage: node bench/soak.mjs [options]      (npm run soak builds the relay first)

Options (each also read from the environment variable shown):
  --minutes N        length of the load, in minutes (fractions allowed)  SOAK_MINUTES      default 2
  --workers N        concurrent workers                                  SOAK_WORKERS      default 30
  --rps N            total requests per second the workers share (0: as fast as they can)
                                                                         SOAK_RPS          default 200
  --warmup S         seconds before the "start" RSS sample               SOAK_WARMUP       default min(15, a quarter of the run)
  --sample S         seconds between RSS samples                         SOAK_SAMPLE       default 10
  --relay-env K=V    extra environment for the relay, repeatable
  --relay-cli FILE   the relay's entry point                             SOAK_RELAY_CLI    default dist/cli.js
  -h, --help         this text
`;

function parseOptions(argv) {
  const values = parseCommandLine(
    argv,
    {
      minutes: { type: 'string' },
      workers: { type: 'string' },
      rps: { type: 'string' },
      warmup: { type: 'string' },
      sample: { type: 'string' },
      'relay-env': { type: 'string', multiple: true },
      'relay-cli': { type: 'string' },
    },
    HELP,
  );
  const problems = [];
  const num = (name, env, dflt, min, integer) => {
    const raw = values[name] ?? process.env[env] ?? (dflt === undefined ? undefined : String(dflt));
    if (raw === undefined) return undefined;
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
      problems.push(`--${name} (${env}) must be ${integer ? 'an integer' : 'a number'} ≥ ${min}, got "${raw}"`);
    }
    return n;
  };
  const minutes = num('minutes', 'SOAK_MINUTES', 2, 0.05, false);
  const opts = {
    durationMs: minutes * 60_000,
    workers: num('workers', 'SOAK_WORKERS', 30, 1, true),
    rps: num('rps', 'SOAK_RPS', 200, 0, false),
    warmupMs: (num('warmup', 'SOAK_WARMUP', undefined, 0, false) ?? Math.min(15, (minutes * 60) / 4)) * 1000,
    sampleMs: num('sample', 'SOAK_SAMPLE', 10, 1, false) * 1000,
    relayCli: path.resolve(values['relay-cli'] ?? process.env.SOAK_RELAY_CLI ?? path.join(ROOT, 'dist', 'cli.js')),
    relayEnv: parseRelayEnv(values['relay-env'], problems),
  };
  if (opts.warmupMs >= opts.durationMs) problems.push(`--warmup must be shorter than the run (${minutes} min)`);
  exitOnProblems('soak', problems, HELP);
  return opts;
}

// ───────────────────────────── child processes and the relay's log ─────────────────────────────

const log = makeLog('soak');
installCleanup({ log, relayGraceMs: 12_000 });

/** What the relay logs at warn and above (pino JSON), counted by level and message. */
const relayLog = new Map();
const PINO_LEVELS = { 40: 'warn', 50: 'error', 60: 'fatal' };
function recordRelayLine(raw) {
  const line = raw.trim();
  if (!line) return;
  let key = `output: ${line.slice(0, 200)}`;
  try {
    const j = JSON.parse(line);
    key = `${PINO_LEVELS[j.level] ?? j.level}: ${j.msg ?? ''}${j.err ? ` — ${j.err.type ?? 'Error'}: ${j.err.message}` : ''}`;
  } catch {
    /* plain text */
  }
  if (relayLog.has(key) || relayLog.size < 100) relayLog.set(key, (relayLog.get(key) ?? 0) + 1);
}

// ───────────────────────────── the workload ─────────────────────────────

const RUN_ID = Math.random().toString(36).slice(2, 10);
/** Weighted mix of what a worker does next. */
const MIX = [
  ['hit', 30],
  ['miss', 18],
  ['stream', 14],
  ['abort', 8],
  ['upstream-4xx', 7],
  ['upstream-5xx', 7],
  ['report', 16],
];
const MIX_TOTAL = MIX.reduce((s, [, w]) => s + w, 0);
/** A few fixed bodies, JSON and streamed: after their first (MISS) call, cache hits. */
const HIT_BODIES = Array.from({ length: 12 }, (_, i) => chatBody(`Soak ${RUN_ID}: the cached question #${i}.`, i % 2 === 1));
const ABORT_EVENT_GAP_MS = 30;

let seq = 0;
function chatBody(content, stream = false, extra = {}) {
  const body = { model: MODEL, messages: [{ role: 'user', content }], ...extra };
  if (stream) Object.assign(body, { stream: true, stream_options: { include_usage: true } });
  return JSON.stringify(body);
}
const unique = (what) => `Soak ${RUN_ID} ${what} #${++seq}: explain why a response cache helps.`;
const pick = (list) => list[Math.floor(Math.random() * list.length)];

function nextKind() {
  let r = Math.random() * MIX_TOTAL;
  for (const [kind, w] of MIX) if ((r -= w) < 0) return kind;
  return MIX[0][0];
}

const stats = {
  /** requests sent, by kind */
  sent: Object.fromEntries(MIX.map(([k]) => [k, 0])),
  /** requests that reached the relay and got an answer head: one report each (direct: only 201s) */
  exchanges: 0,
  /** requests that failed before an answer head: each may or may not have become a report */
  uncertain: 0,
  /** answers that were not what the request asked for */
  unexpected: 0,
  problems: new Map(),
  cache: {},
  status: {},
};

function problem(kind, text) {
  stats.unexpected++;
  const key = `${kind}: ${text}`.slice(0, 300);
  stats.problems.set(key, (stats.problems.get(key) ?? 0) + 1);
}

/** One unit of work; every outcome is counted, nothing throws. */
async function work(relayUrl, dispatcher, kind) {
  stats.sent[kind]++;
  const headers = { 'content-type': 'application/json', authorization: AUTH };
  let body;
  let expect = { status: 200, mode: 'json' };
  let path = ENDPOINT;
  switch (kind) {
    case 'hit': {
      body = pick(HIT_BODIES);
      expect.mode = body.includes('"stream":true') ? 'stream' : 'json';
      break;
    }
    case 'miss':
      body = chatBody(unique('miss'));
      break;
    case 'stream':
      body = chatBody(unique('stream'), true);
      expect.mode = 'stream';
      break;
    case 'abort':
      body = chatBody(unique('abort'), true);
      headers['x-fake-event-gap-ms'] = String(ABORT_EVENT_GAP_MS);
      expect.mode = 'abort';
      break;
    case 'upstream-4xx':
      if (Math.random() < 0.3) {
        body = JSON.stringify({ messages: [{ role: 'user', content: unique('no model') }] });
        expect = { status: 400, mode: 'error' };
      } else {
        const status = pick([400, 401, 404, 409, 422, 429]);
        headers['x-fake-status'] = String(status);
        body = chatBody(unique(`upstream ${status}`));
        expect = { status, mode: 'error' };
      }
      break;
    case 'upstream-5xx': {
      const status = pick([500, 502, 503, 529]);
      headers['x-fake-status'] = String(status);
      body = chatBody(unique(`upstream ${status}`), Math.random() < 0.5);
      expect = { status, mode: 'error' };
      break;
    }
    case 'report': {
      path = '/api/reporting/v2/request';
      const started = Date.now() - 1500;
      body = JSON.stringify({
        metadata: { client: 'soak', clientVersion: '1', environment: 'soak', promptId: `p${seq % 7}` },
        request: { timestamp: new Date(started).toISOString(), body: { model: MODEL, messages: [{ role: 'user', content: unique('report') }] } },
        response: {
          timestamp: new Date(started + 1200).toISOString(),
          status: 200,
          body: { model: MODEL, object: 'chat.completion', usage: { prompt_tokens: 24, completion_tokens: 142, total_tokens: 166 } },
        },
        properties: { run: RUN_ID, worker: seq % 30 },
        cacheEnabled: false,
        cacheHit: null,
      });
      expect = { status: 201, mode: 'report' };
      break;
    }
  }

  let res;
  try {
    res = await dispatcher.request({ origin: relayUrl, method: 'POST', path, headers, body, headersTimeout: 30_000, bodyTimeout: 30_000 });
  } catch (err) {
    stats.uncertain++;
    problem(kind, `no answer: ${err.code ?? err.name}: ${err.message}`);
    return;
  }
  const cache = res.headers['x-relay-cache'];
  stats.status[res.statusCode] = (stats.status[res.statusCode] ?? 0) + 1;
  if (cache) stats.cache[cache] = (stats.cache[cache] ?? 0) + 1;
  if (kind !== 'report' || res.statusCode === 201) stats.exchanges++;
  if (kind !== 'report' && !cache) problem(kind, `HTTP ${res.statusCode} without x-relay-cache`);

  if (expect.mode === 'abort') {
    // Read the first chunk, then go away in the middle of the (paced) stream.
    try {
      for await (const _chunk of res.body) break;
    } catch {
      /* the abort itself */
    }
    if (res.statusCode !== 200) problem(kind, `HTTP ${res.statusCode} before the abort`);
    return;
  }
  let text;
  try {
    text = await res.body.text();
  } catch (err) {
    problem(kind, `body cut: ${err.code ?? err.name}: ${err.message}`);
    return;
  }
  if (res.statusCode !== expect.status) {
    problem(kind, `HTTP ${res.statusCode} (expected ${expect.status}): ${text.slice(0, 160)}`);
    return;
  }
  if (expect.mode === 'json' && !(text.startsWith('{') && text.includes('"chat.completion"'))) problem(kind, `200 but not a chat.completion: ${text.slice(0, 120)}`);
  if (expect.mode === 'stream' && !(text.startsWith('data:') && text.trimEnd().endsWith('data: [DONE]'))) problem(kind, `200 but not a complete SSE stream: …${text.slice(-120)}`);
  if (expect.mode === 'error' && !text.includes('"error"')) problem(kind, `HTTP ${res.statusCode} without the upstream's error body: ${text.slice(0, 120)}`);
  if (expect.mode === 'report' && !text.includes('"id"')) problem(kind, `201 without an id: ${text.slice(0, 120)}`);
}

// ───────────────────────────── measurements ─────────────────────────────

function rssOf(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

async function metrics(url) {
  const res = await request(`${url}/metrics`, { headersTimeout: 10_000, bodyTimeout: 10_000 });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`/metrics answered ${res.statusCode}`);
  const value = (name) => {
    const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+|NaN)$`, 'm').exec(text);
    return m ? Number(m[1]) : undefined;
  };
  return {
    dropped: value('llm_relay_reports_dropped_total'),
    written: value('llm_relay_reports_written_total'),
    pending: value('llm_relay_reports_pending'),
    outbox: value('llm_relay_outbox_depth'),
    cacheEntries: value('llm_relay_cache_entries'),
    cacheBytes: value('llm_relay_cache_bytes'),
  };
}

async function readyz(url) {
  const res = await request(`${url}/readyz`, { headersTimeout: 10_000, bodyTimeout: 10_000 });
  return { status: res.statusCode, body: await res.body.json() };
}

/** Every stored report, read back through the NDJSON export: the count, and how they split. */
async function storedReports(url) {
  const res = await request(`${url}/api/reporting/v2/requests/export`, { headersTimeout: 60_000, bodyTimeout: 60_000 });
  if (res.statusCode !== 200) throw new Error(`export answered ${res.statusCode}: ${(await res.body.text()).slice(0, 200)}`);
  const split = { direct: 0, byOutcome: {} };
  let count = 0;
  let rest = '';
  const take = (line) => {
    if (!line.trim()) return;
    count++;
    const r = JSON.parse(line);
    if (!r.proxy) split.direct++;
    else split.byOutcome[r.proxy.outcome] = (split.byOutcome[r.proxy.outcome] ?? 0) + 1;
  };
  for await (const chunk of res.body) {
    rest += chunk.toString('utf8');
    const lines = rest.split('\n');
    rest = lines.pop() ?? '';
    for (const l of lines) take(l);
  }
  take(rest);
  return { count, split };
}

const fmtMB = (b) => `${(b / MB).toFixed(1)} MB`;
const fmtT = (ms) => `${(ms / 1000).toFixed(0).padStart(4)} s`;

// ───────────────────────────── main ─────────────────────────────

async function main() {
  const opts = parseOptions(process.argv.slice(2));
  const checks = [];
  let exitCode = 1;
  try {
    const upstream = await startHelper('fake upstream', 'fake-upstream.mjs', ['--host', '127.0.0.1', '--port', '0']);
    const tempDir = await makeTempDir('llm-relay-soak-');
    const relay = await startRelay({
      cli: opts.relayCli,
      upstreamUrl: upstream.url,
      dataDir: tempDir,
      env: { RELAY_CACHE_URL: 'sqlite', RELAY_REPORTS_URL: 'sqlite', ...opts.relayEnv },
      onLogLine: recordRelayLine,
      buildCommand: 'npm run soak',
    });
    const pid = relay.child.pid;
    log(
      `relay pid ${pid} on ${relay.url} (sqlite cache and reports in ${tempDir}), upstream ${upstream.url}; ` +
        `${opts.workers} workers, ${opts.rps > 0 ? `${opts.rps} req/s` : 'unthrottled'}, ${(opts.durationMs / 60_000).toFixed(2)} min, ` +
        `warm-up ${opts.warmupMs / 1000} s, ${os.cpus().length} cores`,
    );

    // ── load ──
    const dispatcher = new Agent({ connections: opts.workers * 2, keepAliveTimeout: 30_000, pipelining: 1 });
    const t0 = performance.now();
    const end = t0 + opts.durationMs;
    let nextAt = t0;
    const slot = () => {
      if (opts.rps <= 0) return 0;
      const now = performance.now();
      const at = Math.max(nextAt, now);
      nextAt = at + 1000 / opts.rps;
      return at - now;
    };
    const samples = [];
    let startRss;
    const sample = (label) => {
      const s = { t: performance.now() - t0, rss: rssOf(pid), sent: Object.values(stats.sent).reduce((a, b) => a + b, 0), label };
      samples.push(s);
      log(`${fmtT(s.t)}  RSS ${fmtMB(s.rss).padStart(9)}  ${s.sent} requests${label ? `  (${label})` : ''}`);
      return s;
    };
    const warmTimer = setTimeout(() => (startRss = sample('start, after warm-up')), opts.warmupMs);
    const sampleTimer = setInterval(() => {
      // the warm-up sample may have just been taken
      if (performance.now() - t0 - (samples.at(-1)?.t ?? -Infinity) > 1000) sample();
    }, opts.sampleMs);
    sample('before the load');

    const worker = async () => {
      while (performance.now() < end) {
        const wait = slot();
        if (wait > 0) await sleep(wait);
        if (performance.now() >= end) break;
        await work(relay.url, dispatcher, nextKind());
      }
    };
    await Promise.all(Array.from({ length: opts.workers }, worker));
    clearTimeout(warmTimer);
    clearInterval(sampleTimer);
    const loadMs = performance.now() - t0;
    startRss ??= samples[0];
    // an interval sample taken just now would only repeat the end sample
    if (samples.length > 1 && samples.at(-1) !== startRss && performance.now() - t0 - samples.at(-1).t < 1000) samples.pop();
    const endRss = sample('end of the load');
    await dispatcher.close();

    // ── drain: nothing pending, outbox empty, then the stored count settles ──
    const expectedMin = stats.exchanges;
    const expectedMax = stats.exchanges + stats.uncertain;
    let m;
    let stored;
    let ready;
    const drainStart = performance.now();
    for (;;) {
      m = await metrics(relay.url);
      ready = await readyz(relay.url);
      const outboxDepth = ready.body?.reports?.outboxDepth;
      if (m.pending === 0 && m.outbox === 0 && outboxDepth === 0) {
        stored = await storedReports(relay.url);
        if (stored.count >= expectedMin || performance.now() - drainStart > 30_000) break;
      } else if (performance.now() - drainStart > 30_000) {
        stored = await storedReports(relay.url);
        break;
      }
      await sleep(250);
    }
    await sleep(2100); // the cache gauges are read from the store at most every 2 s
    m = await metrics(relay.url);
    const drainMs = performance.now() - drainStart;

    // ── report ──
    const sentTotal = Object.values(stats.sent).reduce((a, b) => a + b, 0);
    const out = [];
    out.push('', `llm-relay soak — ${new Date().toISOString()}, ${(loadMs / 1000).toFixed(1)} s of load, ${opts.workers} workers, ${opts.rps > 0 ? `${opts.rps} req/s target` : 'unthrottled'}`);
    out.push(`  requests sent        ${sentTotal} (${(sentTotal / (loadMs / 1000)).toFixed(1)} req/s): ${MIX.map(([k]) => `${k} ${stats.sent[k]}`).join(', ')}`);
    out.push(`  answers              ${Object.entries(stats.status).map(([s, n]) => `${s}×${n}`).join(', ')}; x-relay-cache ${Object.entries(stats.cache).map(([s, n]) => `${s}×${n}`).join(', ')}`);
    out.push(`  exchanges made       ${stats.exchanges}${stats.uncertain ? ` (+${stats.uncertain} without an answer head, may or may not be reports)` : ''}`);
    out.push(`  reports stored       ${stored.count} (direct ${stored.split.direct}; proxied by outcome: ${Object.entries(stored.split.byOutcome).map(([k, n]) => `${k} ${n}`).join(', ')}); drained in ${(drainMs / 1000).toFixed(1)} s`);
    out.push(`  reports written      ${m.written} (llm_relay_reports_written_total), pending ${m.pending}, outbox ${m.outbox}`);
    out.push(`  reports dropped      ${m.dropped} (llm_relay_reports_dropped_total)`);
    out.push(`  cache entries        ${m.cacheEntries} (llm_relay_cache_entries), ${fmtMB(m.cacheBytes ?? 0)}`);
    out.push(`  relay RSS            start ${fmtMB(startRss.rss)} (at ${fmtT(startRss.t).trim()}), end ${fmtMB(endRss.rss)}; samples:`);
    for (const s of samples) out.push(`                         ${fmtT(s.t)}  ${fmtMB(s.rss).padStart(9)}  after ${String(s.sent).padStart(6)} requests${s.label ? `  ${s.label}` : ''}`);
    // Least-squares slope of the samples after the warm-up: a leak shows as a steady climb.
    const after = samples.filter((s) => s.t >= startRss.t);
    if (after.length >= 3) {
      const mt = after.reduce((a, s) => a + s.t, 0) / after.length;
      const mr = after.reduce((a, s) => a + s.rss, 0) / after.length;
      const slope = after.reduce((a, s) => a + (s.t - mt) * (s.rss - mr), 0) / after.reduce((a, s) => a + (s.t - mt) ** 2, 0);
      out.push(`  RSS trend            ${((slope * 60_000) / MB).toFixed(1)} MB/min after the warm-up (least squares, informational)`);
    }
    if (stats.problems.size > 0) {
      out.push('  unexpected answers:');
      for (const [p, n] of [...stats.problems].sort((a, b) => b[1] - a[1]).slice(0, 15)) out.push(`    ${n}× ${p}`);
    }

    // ── checks ──
    checks.push({
      name: 'reports stored == exchanges made',
      ok: stored.count >= expectedMin && stored.count <= expectedMax,
      detail: `${stored.count} stored, ${stats.exchanges} exchanges${stats.uncertain ? ` (+${stats.uncertain} uncertain)` : ''}`,
    });
    checks.push({ name: 'reports dropped == 0', ok: m.dropped === 0, detail: `${m.dropped}` });
    // RSS flat: end ≤ start × 1.5 + 30 MB. The start sample is taken after the warm-up, but a healthy process
    // still grows for a while after it: V8 enlarges old space in steps and collects lazily, so the heap settles
    // above its warm-up size; SQLite's page caches (2 MB per connection by default) and its WAL index fill as
    // the report table and the cache grow; glibc's malloc arenas keep freed memory. That growth is bounded and
    // partly proportional to the process size (the ×1.5), partly fixed (the +30 MB). A leak grows with the
    // number of exchanges instead: at the default 2 min × 200 req/s (24,000 exchanges) and a ~100 MB start,
    // the allowance of ~80 MB is used up by anything that keeps ≥ ~3.5 KB per exchange — a retained request or
    // response body (≥ 1 KB here), report (≈ 2–3 KB), socket or timer. Smaller leaks need a longer run
    // (--minutes); the trend line above shows them earlier.
    const rssLimit = startRss.rss * 1.5 + 30 * MB;
    checks.push({ name: 'RSS flat (end ≤ start × 1.5 + 30 MB)', ok: endRss.rss <= rssLimit, detail: `end ${fmtMB(endRss.rss)} ≤ ${fmtMB(rssLimit)}` });
    checks.push({ name: 'every answer as expected', ok: stats.unexpected === 0, detail: `${stats.unexpected} unexpected` });
    checks.push({ name: '/readyz 200 at the end', ok: ready.status === 200, detail: `${ready.status} ${JSON.stringify(ready.body)}` });

    // ── stop the relay (SIGTERM: flush and exit 0) ──
    const relayExit = await stopChild(relay, 12_000);
    checks.push({ name: 'relay exits 0 on SIGTERM', ok: relayExit.code === 0, detail: describeExit(relayExit) });
    if (relayLog.size > 0) {
      out.push('  relay log (warn and above):');
      for (const [k, n] of relayLog) out.push(`    ${n}× ${k.slice(0, 240)}`);
    } else out.push('  relay log (warn and above): nothing');

    out.push('');
    for (const c of checks) out.push(`  ${c.ok ? 'PASS' : 'FAIL'}  ${c.name.padEnd(40)} ${c.detail}`);
    const pass = checks.every((c) => c.ok);
    out.push('', pass ? 'PASS' : 'FAIL', '');
    process.stdout.write(out.join('\n'));
    exitCode = pass ? 0 : 1;
  } catch (err) {
    log(`error: ${err.stack ?? err}`);
    exitCode = 1;
  } finally {
    await cleanup();
  }
  process.exit(exitCode);
}

await main();
