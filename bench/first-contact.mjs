// What the first call of each kind costs a relay that has just started: for each route below, a fresh relay
// (this checkout's dist/, embedded stores), the route's first answer timed at the client, its second, and
// the relay's RSS before and after. Routes the edges do not answer are served by the fastify site, which is
// built on the first request for it (http/site.ts). The proxied call goes to bench/fake-upstream.mjs, run
// here; its first and second calls are both misses (two different questions).
//   npm run build && node bench/first-contact.mjs [dist …]     (ROUNDS: fresh relays per route, 3;
//                                                                ROUTE: only the routes whose name holds it)
// Given several build directories (another checkout's dist/, its packages resolvable), one table each.
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, sleep, startRelay, stopChild } from './lib/processes.mjs';
import { startFakeUpstream } from './fake-upstream.mjs';

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const json = { 'content-type': 'application/json' };
const request = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
const ROUTES = {
  'proxied call (POST /v1/chat/completions, a miss)': {
    path: '/v1/chat/completions',
    init: (n) => ({
      method: 'POST',
      headers: { ...json, authorization: 'Bearer sk-first-contact' },
      body: JSON.stringify({ ...request, messages: [{ role: 'user', content: `question ${n}` }] }),
    }),
    status: 200,
  },
  'report (POST /api/reporting/v2/request)': {
    path: '/api/reporting/v2/request',
    init: {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ request: { timestamp: '2026-11-27T12:00:00.000Z', body: request }, response: { timestamp: '2026-11-27T12:00:01.000Z', body: {} } }),
    },
    status: 201,
  },
  'Pezzo cache retrieve': {
    path: '/api/cache/v1/request/retrieve',
    init: { method: 'POST', headers: { ...json, 'x-pezzo-api-key': 'k', 'x-pezzo-project-id': 'p' }, body: JSON.stringify({ request }) },
    status: 200,
  },
  'Pezzo cache save': {
    path: '/api/cache/v1/request/save',
    init: { method: 'POST', headers: { ...json, 'x-pezzo-api-key': 'k', 'x-pezzo-project-id': 'p' }, body: JSON.stringify({ request, response: { choices: [] } }) },
    status: 201,
  },
  'report list (GET /api/reporting/v2/requests)': { path: '/api/reporting/v2/requests?limit=10', init: {}, status: 200 },
  'dashboard (GET /dashboard/)': { path: '/dashboard/', init: {}, status: 200 },
  'a probe (GET /readyz)': { path: '/readyz', init: {}, status: 200 },
  'a scrape (GET /metrics)': { path: '/metrics', init: {}, status: 200 },
};

const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

async function timed(url, { init, status }, n) {
  const t0 = performance.now();
  const res = await fetch(url, typeof init === 'function' ? init(n) : init);
  await res.arrayBuffer();
  if (res.status !== status) throw new Error(`${url} answered ${res.status}, not ${status}`);
  return Math.round(performance.now() - t0);
}

/** One table: each route's first call, on fresh relays of the build in `dist`. */
async function firstCalls(dist, upstreamUrl) {
  console.log('| first call after a start | ms: first, second (each round) | RSS before → after, MB |');
  console.log('|---|---|---|');
  for (const [name, route] of Object.entries(ROUTES).filter(([name]) => name.includes(process.env.ROUTE ?? ''))) {
    const times = [];
    const rss = [];
    for (let round = 0; round < ROUNDS; round++) {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), 'relay-first-contact-'));
      const relay = await startRelay({ cli: path.join(dist, 'cli.js'), upstreamUrl, dataDir, buildCommand: 'npm run build' });
      try {
        await sleep(1000);
        const before = rssMb(relay.child.pid);
        const first = await timed(relay.url + route.path, route, 1);
        const second = await timed(relay.url + route.path, route, 2);
        await sleep(500);
        times.push(`${first}, ${second}`);
        rss.push(`${before.toFixed(0)} → ${rssMb(relay.child.pid).toFixed(0)}`);
      } finally {
        await stopChild(relay, 10_000);
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
    console.log(`| ${name} | ${times.join('; ')} | ${rss.join('; ')} |`);
  }
}

const dists = process.argv.length > 2 ? process.argv.slice(2).map((d) => path.resolve(d)) : [path.join(ROOT, 'dist')];
const upstream = await startFakeUpstream();
try {
  for (const dist of dists) {
    if (dists.length > 1) console.log(`\n${dist}:\n`);
    await firstCalls(dist, upstream.url);
  }
} finally {
  await upstream.close();
}
