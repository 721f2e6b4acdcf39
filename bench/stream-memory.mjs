// Where the 1,000-stream peak goes: the shared tools' streams.mjs rounds (as bench/cost.mjs runs them: the mock's
// 60 chunks 100 ms apart, two rounds 5 s apart, a fresh relay and data dir each time), with what cost.mjs does not
// show beside each peak —
//   - the process's own peak, sampled every 10 ms from outside (streams.mjs samples every 100 ms and stops when its
//     last response ends; the relay's RSS goes on rising while the report worker takes the end's batches);
//   - where that peak's pages are (/proc/PID/smaps at it): anonymous (V8's heaps, thread stacks, glibc's other
//     arenas), glibc's main arena ([heap]), the node binary's pages, other files;
//   - each isolate at that moment (bench/lib/isolate-probe.cjs, preloaded): the event loop's and the report worker's
//     V8 heap (committed / used, the new space's share), external memory and array buffers.
// Builds are interleaved (A B A B …), since the machine's hour moves a peak more than most changes do.
//
//   node bench/stream-memory.mjs [--build LABEL=DIR]... [--pairs N] [--streams N] [--relay-env K=V]... [--json FILE]
//
// DIR is a built checkout (its dist/cli.js); without --build, this checkout. Measuring aid: the preload itself
// adds ~1 MB to each isolate.
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { exitOnProblems, parseCommandLine, parseRelayEnv } from './lib/options.mjs';
import { BENCH_DIR, ROOT, freePort, installCleanup, makeLog, makeTempDir, sleep, spawnNode, startRelay, stopChild } from './lib/processes.mjs';
import { statusMb, streamRound } from './lib/stream-round.mjs';

const HELP = `Usage: node bench/stream-memory.mjs [options]   (npm run build first)

  --build LABEL=DIR  a built checkout to measure (repeatable; interleaved)   default: this checkout
  --pairs N          runs of each build                                      default 3
  --streams N        streams a round                                         default 1000
  --relay-env K=V    a setting for every relay (repeatable)
  --shared DIR       the shared measuring tools                              default ../shared/bench
  --json FILE        also write every run's figures as JSON
`;

const values = parseCommandLine(
  process.argv.slice(2),
  {
    build: { type: 'string', multiple: true },
    pairs: { type: 'string', default: '3' },
    streams: { type: 'string', default: '1000' },
    'relay-env': { type: 'string', multiple: true },
    shared: { type: 'string' },
    json: { type: 'string' },
  },
  HELP,
);
const problems = [];
const builds = (values.build ?? [`this=${ROOT}`]).map((b) => {
  const eq = b.indexOf('=');
  const build = { label: b.slice(0, eq), dir: path.resolve(b.slice(eq + 1)) };
  if (eq <= 0) problems.push(`--build expects LABEL=DIR, got "${b}"`);
  else if (!existsSync(path.join(build.dir, 'dist', 'cli.js'))) problems.push(`${build.dir}/dist/cli.js is missing: build that checkout first`);
  return build;
});
const pairs = Number(values.pairs);
const streams = Number(values.streams);
if (!(pairs >= 1)) problems.push('--pairs must be a number ≥ 1');
if (!(streams >= 1)) problems.push('--streams must be a number ≥ 1');
const relayEnv = parseRelayEnv(values['relay-env'], problems);
const shared = path.resolve(values.shared ?? path.join(ROOT, '..', 'shared', 'bench'));
if (!existsSync(path.join(shared, 'streams.mjs'))) problems.push(`the shared measuring tools are not at ${shared}: pass --shared DIR`);
exitOnProblems('stream-memory', problems, HELP);

const log = makeLog('stream-memory');
installCleanup({ log, relayGraceMs: 15_000 });
const PROBE = path.join(BENCH_DIR, 'lib', 'isolate-probe.cjs');


/** /proc/PID/smaps summed by kind of mapping, in MB. */
function pagesOf(pid, exe) {
  const sums = { anonymous: 0, mainArena: 0, nodeBinary: 0, otherFiles: 0 };
  let kind = 'anonymous';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) {
      const name = line.split(/\s+/).slice(5).join(' ');
      kind = name === '' || name.startsWith('[anon') || name === '[stack]' ? 'anonymous' : name === '[heap]' ? 'mainArena' : name === exe ? 'nodeBinary' : name.startsWith('[') ? 'anonymous' : 'otherFiles';
    } else if (line.startsWith('Rss:')) sums[kind] += Number(line.split(/\s+/)[1]) / 1024;
  }
  for (const k of Object.keys(sums)) sums[k] = Math.round(sums[k] * 10) / 10;
  return sums;
}

/** One round of streams.mjs, with the process's RSS sampled every 10 ms meanwhile (and smaps at each new high). */
async function round(url, pid, exe, state) {
  return streamRound({
    shared,
    url,
    streams,
    pid,
    onHigh(rss) {
      if (rss <= state.peak) return;
      state.peak = rss;
      state.peakAt = Date.now();
      if (rss > state.pagesAt + 0.5) {
        try {
          state.pages = pagesOf(pid, exe);
          state.pagesAt = rss;
        } catch {
          /* gone meanwhile */
        }
      }
    },
  });
}

/** The isolates' lines nearest `at` (each isolate's last line at or before it, within 200 ms). */
function isolatesAt(lines, at) {
  const byTag = new Map();
  for (const l of lines) if (l.t <= at && at - l.t <= 200) byTag.set(l.tag, l);
  return [...byTag.values()];
}

async function measure(build, upstreamUrl, under) {
  const dataDir = mkdtempSync(path.join(under, 'run-'));
  const probe = path.join(dataDir, 'isolates.ndjson');
  const nodeOptions = [process.env.NODE_OPTIONS, `--require "${PROBE}"`].filter(Boolean).join(' ');
  const relay = await startRelay({
    cli: path.join(build.dir, 'dist', 'cli.js'),
    upstreamUrl,
    dataDir: path.join(dataDir, 'data'),
    env: { ...relayEnv, NODE_OPTIONS: nodeOptions, LLM_RELAY_ISOLATE_PROBE: probe },
    buildCommand: 'npm run build',
  });
  const pid = relay.child.pid;
  try {
    const exe = readlinkSync(`/proc/${pid}/exe`);
    await sleep(3000);
    const idle = statusMb(pid, 'VmRSS');
    const state = { peak: 0, peakAt: 0, pages: undefined, pagesAt: 0 };
    const first = await round(relay.url, pid, exe, state);
    await sleep(4000);
    const second = await round(relay.url, pid, exe, state);
    const lines = readFileSync(probe, 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((l) => l.pid === pid);
    return {
      label: build.label,
      idle: Math.round(idle * 10) / 10,
      rounds: [first.rss_peak_mb, second.rss_peak_mb],
      errors: first.errors + second.errors,
      processPeak: Math.round(state.peak * 10) / 10,
      pages: state.pages,
      isolates: isolatesAt(lines, state.peakAt),
    };
  } finally {
    await stopChild(relay, 15_000);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function describe(r) {
  const p = r.pages;
  const iso = r.isolates
    .map((i) => `${i.tag} heap ${i.heap}/${i.used} (new ${i.newSpace}), ext ${i.external}, ab ${i.arrayBuffers}`)
    .join('; ');
  return (
    `${r.label}: idle ${r.idle} MB, streams.mjs ${r.rounds.join(' / ')} MB, process peak ${r.processPeak} MB` +
    (r.errors ? `, ${r.errors} failed streams` : '') +
    (p ? `\n    at it: anonymous ${p.anonymous}, main arena ${p.mainArena}, node binary ${p.nodeBinary}, other files ${p.otherFiles}` : '') +
    (iso ? `\n    isolates (committed/used MB): ${iso}` : '')
  );
}

const port = await freePort();
const upstreamUrl = `http://127.0.0.1:${port}`;
const mock = spawnNode('fake upstream', [path.join(shared, 'upstream.mjs')], {
  env: { ...process.env, UPSTREAM_PORT: String(port), STREAM_CHUNKS: '60', STREAM_CHUNK_DELAY_MS: '100' },
});
const results = [];
// (removed at the end, on failure and on Ctrl-C, with whatever a run left in it)
const runs = await makeTempDir('relay-stream-memory-');
try {
  await sleep(500);
  for (let i = 1; i <= pairs; i++) {
    for (const build of builds) {
      log(`${build.label}, run ${i} of ${pairs}: two rounds of ${streams} streams`);
      const r = await measure(build, upstreamUrl, runs);
      results.push(r);
      console.log(describe(r));
    }
  }
} finally {
  await stopChild(mock, 3000);
}
console.log('\nmedians (MB): the higher streams.mjs round; the process peak');
for (const build of builds) {
  const mine = results.filter((r) => r.label === build.label);
  console.log(`  ${build.label}: ${median(mine.map((r) => Math.max(...r.rounds))).toFixed(1)}; ${median(mine.map((r) => r.processPeak)).toFixed(1)}   (${mine.map((r) => Math.max(...r.rounds)).join(', ')})`);
}
if (values.json) writeFileSync(values.json, `${JSON.stringify(results, null, 1)}\n`);
