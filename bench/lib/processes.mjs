// Child processes for bench/run.mjs and bench/soak.mjs: every server runs in its own node process, is tracked
// here, and is stopped (and the temp dir removed) at the end, on failure and on Ctrl-C.
//
//   installCleanup({ log, relayGraceMs })   once, at start-up: the exit and signal handlers
//   startHelper(name, script, args)         a bench/ helper that prints {"port","url"}
//   startRelay({ cli, upstreamUrl, … })     the built relay on a free port, ready on /healthz
//   makeTempDir(prefix)                     a temp dir that cleanup() removes
//   cpuTimeMs(pid), threadTicks(pid)        CPU a process has used, in all and per thread (/proc)
//   cleanup()                               stop every child (the relay first), remove the temp dir
import { request } from 'undici';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const BENCH_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const ROOT = path.resolve(BENCH_DIR, '..');

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const tail = (text, lines = 15) => text.trimEnd().split('\n').slice(-lines).join('\n');
export const describeExit = (e) => (e.signal ? `signal ${e.signal}` : `code ${e.code}`);
/** A logger to stderr: `[tag] message`. */
export const makeLog = (tag) => (msg) => process.stderr.write(`[${tag}] ${msg}\n`);

const children = new Set();
let tempDir;
let cleaning;
let relayGrace = 8000;

/** Spawn a node script (cwd: the project root); keep the tail of its output; track its exit. */
export function spawnNode(name, args, { env = process.env, ipc = false } = {}) {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe', ...(ipc ? ['ipc'] : [])],
  });
  const proc = { name, child, output: '', exit: undefined };
  const keep = (chunk) => {
    proc.output += chunk.toString();
    if (proc.output.length > 64 * 1024) proc.output = proc.output.slice(-32 * 1024);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  proc.exited = new Promise((resolve) =>
    child.on('exit', (code, signal) => {
      proc.exit = { code, signal };
      children.delete(proc);
      resolve(proc.exit);
    }),
  );
  child.on('error', (err) => keep(`spawn error: ${err.message}\n`));
  children.add(proc);
  return proc;
}

/**
 * CPU time (user + system, all threads) a process has used so far, in ms, from /proc (Linux); undefined
 * elsewhere or when the process is gone. Resolution: one clock tick (10 ms).
 */
export function cpuTimeMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the command name (field 2) may hold spaces and parentheses: count fields after its closing parenthesis
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}
export const CLOCK_TICKS = 100; // USER_HZ: 100 on every Linux architecture node supports

/** CPU ticks (user + system, CLOCK_TICKS a second) each thread of a process has used so far, by thread id (Linux). */
export function threadTicks(pid) {
  const out = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(tid, Number(fields[11]) + Number(fields[12]));
    } catch {
      // the thread ended
    }
  }
  return out;
}

/** Call onLine with every complete line of a stream (a runaway line of over 1 MB is dropped). */
export function forEachLine(stream, onLine) {
  let buf = '';
  stream.on('data', (chunk) => {
    buf += chunk.toString();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      onLine(line);
    }
    if (buf.length > 1_000_000) buf = '';
  });
}

/** Start one of the helper scripts in bench/ and read the {"port","url"} line it prints. */
export async function startHelper(name, script, args) {
  const proc = spawnNode(name, [path.join(BENCH_DIR, script), ...args], { ipc: true });
  proc.url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not print its port within 15 s:\n${tail(proc.output)}`)), 15_000);
    const onData = () => {
      const line = proc.output.split('\n').find((l) => l.startsWith('{'));
      if (!line) return;
      try {
        const { url } = JSON.parse(line);
        clearTimeout(timer);
        proc.child.stdout.off('data', onData);
        resolve(url);
      } catch {
        /* a partial line: wait for more */
      }
    };
    proc.child.stdout.on('data', onData);
    void proc.exited.then((e) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${describeExit(e)} before listening:\n${tail(proc.output)}`));
    });
  });
  return proc;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Start the built relay on a free port and wait for /healthz. The caller's RELAY_*, PORT and HOST variables
 * are not passed on; `env` is the relay's settings on top of upstream, data dir and RELAY_LOG_LEVEL=warn.
 * Every line the relay prints goes to onLogLine. buildCommand names the npm script that builds first.
 */
export async function startRelay({ cli, upstreamUrl, dataDir, env: extraEnv = {}, onLogLine, buildCommand }) {
  if (!existsSync(cli)) throw new Error(`${path.relative(ROOT, cli)} is missing: run \`${buildCommand}\` (it builds first) or \`npm run build\``);
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    // a RELAY_* setting of the caller's shell must not change what is measured or tested
    if (!k.startsWith('RELAY_') && k !== 'PORT' && k !== 'HOST') env[k] = v;
  }
  let lastError;
  for (let attempt = 1; attempt <= 3; attempt++) {
    const port = await freePort();
    Object.assign(env, {
      PORT: String(port),
      HOST: '127.0.0.1',
      RELAY_UPSTREAM_URL: upstreamUrl,
      RELAY_DATA_DIR: dataDir,
      RELAY_LOG_LEVEL: 'warn',
      ...extraEnv,
    });
    const proc = spawnNode('relay', [cli], { env });
    if (onLogLine) {
      forEachLine(proc.child.stdout, onLogLine);
      forEachLine(proc.child.stderr, onLogLine);
    }
    proc.url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && !proc.exit) {
      try {
        const res = await request(`${proc.url}/healthz`, { headersTimeout: 1000, bodyTimeout: 1000 });
        await res.body.dump();
        if (res.statusCode === 200) return proc;
      } catch {
        /* not listening yet */
      }
      await sleep(100);
    }
    if (!proc.exit) {
      proc.child.kill('SIGKILL');
      await proc.exited;
      throw new Error(`relay did not answer 200 on /healthz within 30 s:\n${tail(proc.output)}`);
    }
    lastError = new Error(`relay exited with ${describeExit(proc.exit)} before it was ready:\n${tail(proc.output)}`);
    if (!/EADDRINUSE/.test(proc.output)) break; // only a lost port race is worth another try
  }
  throw lastError;
}

/** SIGTERM, then SIGKILL after graceMs; resolves to how it exited. */
export async function stopChild(proc, graceMs) {
  if (proc.exit) return proc.exit;
  proc.child.kill('SIGTERM');
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), graceMs);
  const exit = await proc.exited;
  clearTimeout(timer);
  return exit;
}

/** A fresh directory under the system temp dir, removed by cleanup() and on exit. */
export async function makeTempDir(prefix) {
  tempDir = await mkdtemp(path.join(os.tmpdir(), prefix));
  return tempDir;
}

/** Stop every child and remove the temp dir; once, however often it is called. */
export function cleanup() {
  cleaning ??= (async () => {
    // the relay first (SIGTERM: it flushes its reports), then the proxy, then the upstream
    const order = ['relay', 'bare proxy', 'fake upstream'];
    const procs = [...children].sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));
    for (const p of procs) p.expectedExit = true;
    for (const p of procs) await stopChild(p, p.name === 'relay' ? relayGrace : 3000);
    if (tempDir) {
      await rm(tempDir, { recursive: true, force: true, maxRetries: 3 });
      tempDir = undefined;
    }
  })();
  return cleaning;
}

/** The exit and signal handlers: nothing may outlive this process. relayGraceMs: the relay's time to stop. */
export function installCleanup({ log, relayGraceMs }) {
  relayGrace = relayGraceMs;
  // last resort, synchronous
  process.on('exit', () => {
    for (const p of children) p.child.kill('SIGKILL');
    if (tempDir) rmSync(tempDir, { recursive: true, force: true });
  });
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.once(sig, () => {
      log(`${sig}: stopping the servers`);
      cleanup().finally(() => process.exit(130));
    });
  }
}
