// Memory a burst freed, handed back to the system. A thousand streams at once leave tens of MB of freed
// blocks inside glibc's arenas (Node's buffers, sockets and parsers, the report worker's batches), and
// glibc keeps them: free() only gives back the free space at the top of an arena, and what a burst frees is
// fragmented below it. malloc_trim(0) walks the arenas and gives back every free page (measured: a relay
// 30 s after two rounds of 1,000 streams, 137-148 MB -> 97-99 MB; docs/benchmarks.md). JavaScript cannot
// call it, so a small addon does (native/malloc-trim.c, built at install; without it this does nothing).
//
// When: in a quiet moment — the event loop idle over the last interval — and only when RSS moved by at
// least `changeBytes` since the last trim (grew with a burst, or fell as the report worker stopped and
// freed its own). Quiet and unchanged, nothing runs; busy, nothing runs either (a trim locks each arena
// while it walks it, and pages it gives back are faulted in again by the next allocations).
//
// The same moment tells V8 that memory is short (native/memory-pressure.cc): an idle relay allocates
// nothing, so nothing makes V8 collect the garbage a burst left in the event loop's heap, and now and then
// (1 run in ~5 of two rounds of 1,000 streams) it stayed there: 70-170 MB above idle 30 s later, where a
// full collection gave it back. The notice starts an incremental collection that also shrinks the heap (a call
// of ~0.5 ms; the collection runs in steps on the idle loop); what it frees of C memory goes back with the
// next trim, which the RSS it gives up makes due. And first the relay gives back what it keeps only to be
// fast (`release`: the SQLite cache connection's page cache; the idle upstream connections a burst left
// beyond a few dozen, freed as they close, so the next quiet reading trims again; docs/internals.md).
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import { loadAddon } from './native-addon.js';
import { NODE_MAJOR } from './node-major.js';

export interface Binding {
  trim(): boolean;
  /** V8's memory-pressure notice for the calling thread's heap (true when it was given) */
  reduce(): boolean;
  /**
   * The same notice at once: V8 collects all it can and shrinks the heap before it returns (absent from an
   * addon built before it was added: `npm run build:native`)
   */
  collect?(): boolean;
  /** mallopt(M_ARENA_MAX, n); true when it was set */
  limitArenas(n: number): boolean;
  /** execv(path, argv) with the current environment; returns only when it failed, with errno */
  exec(path: string, argv: string[]): number;
  supported: boolean;
}

/** Bytes as MB with one decimal, for the log lines about memory handed back. */
export const toMb = (bytes: number): number => Math.round(bytes / 104_857.6) / 10;

/** The addon: undefined when it was not built (native/binding.gyp; `npm run build:native`). */
export function loadTrimBinding(): Binding | undefined {
  return loadAddon<Binding>('malloc_trim');
}

/**
 * Gives back, at once, the memory the event loop's heap and the C library hold for a burst that is over: a
 * full collection that shrinks the heap (V8's low-memory notice: ~100 ms for the ~55 MB 1,000 streams leave,
 * on this thread), then malloc_trim. For a quiet moment only — nothing runs on the event loop meanwhile;
 * the report service calls it when a burst's records are about to start the report worker (report-service.ts,
 * `onBurstEnd`), so that the worker's memory is not added on top of the burst's. False when the addon was
 * not built, or built without `collect`.
 */
export function collectAfterBurst(binding: Binding | null | undefined = loadTrimBinding()): boolean {
  if (!binding?.collect) return false;
  binding.collect();
  binding.trim();
  return true;
}

/** Heap the event loop has committed but does not use, beyond which a start gives it back before listening. */
const START_SLACK_BYTES = 8 * 1024 * 1024;

/**
 * What the start itself left in the event loop's heap, given back before the relay listens. Loading a team
 * store's client grows the young generation to its cap (the Redis cache's node-redis and keyv: the heap 32 MB
 * committed for 15 used, against 12 for 9 on the embedded default), and nothing would shrink it later: the
 * quiet moment's trim (startMemoryTrim) measures from the RSS the relay listened with. Measured: a relay
 * with the Redis cache idles at 63-66 MB instead of 81-85, for 25-35 ms once before it listens. Returns how
 * long it took, or undefined when the heap holds little it does not use (the embedded default) or the addon
 * has no `collect`.
 */
export function giveBackAfterStart(
  usage: { heapTotal: number; heapUsed: number } = process.memoryUsage(),
  binding: Binding | null | undefined = loadTrimBinding(),
): number | undefined {
  if (usage.heapTotal - usage.heapUsed <= START_SLACK_BYTES) return undefined;
  const t0 = performance.now();
  return collectAfterBurst(binding) ? performance.now() - t0 : undefined;
}

/**
 * The malloc arenas all threads share, the event loop's included (glibc's default: 8 per core). After a burst
 * each arena's free top stays resident: `malloc_trim` gives back free pages inside every arena, but the top of
 * another thread's arena only shrinks when that thread frees into it (V8's helper threads, the report worker,
 * libuv's pool). With three, the event loop has one and the other threads share two. Measured
 * (docs/benchmarks.md, "Few malloc arenas"): RSS 30 s after two rounds of 1,000 streams ~22 -> ~15 MB above
 * idle, and no more CPU per exchange.
 */
export const MALLOC_ARENAS = 3;

/**
 * The cap on V8's semi-spaces (the young generation is two of them) the restart gives the event loop, in MB, by
 * Node major. Node 20 and 22 let them grow to 16 MB each; 8 keeps the event loop's new space at 16 MB committed
 * instead of 32 through a burst, which on Node 20.20 took 15-25 MB off the peak of two rounds of 1,000 streams
 * (six interleaved runs: 154-171 MB against 173-223), for a streamed miss ~2-5% more CPU (nine interleaved
 * pairs; hits, misses and durable reports within 0-4%: docs/benchmarks.md, "The event loop's young generation
 * at 8 MB"). Node 24 sizes them from the heap limit, up to 64 MB each on a machine with
 * this one's memory, and a thousand streams ending at once grow the event loop's new space to 128 MB committed:
 * on Node 24.21, two rounds of 1,000 streams peaked at 269-271 MB with the default, 234-244 with 16, 220-271 with 8
 * and 190-216 with 4 (interleaved pairs), with no CPU per exchange visible for 16 and 5-20% more for 4 (docs/
 * benchmarks.md, "Node 22 and 24"): there it stays 16, what was measured.
 */
export function semiSpaceMb(major: number = NODE_MAJOR): number {
  return major >= 24 ? 16 : 8;
}

/**
 * The command line the restart runs: `argv` with the semi-space cap after the executable (semiSpaceMb), unless
 * the operator gave one (on the command line or in NODE_OPTIONS, both in `nodeOptions`).
 */
export function withSemiSpaceCap(argv: string[], nodeOptions: string[], major: number = NODE_MAJOR): string[] {
  if (argv.length === 0 || nodeOptions.some((a) => a.includes('--max-semi-space-size'))) return argv;
  return [argv[0]!, `--max-semi-space-size=${semiSpaceMb(major)}`, ...argv.slice(1)];
}

/**
 * Lets the isolates started from now on (the report worker's) size their young generation themselves. The
 * semi-space cap is V8's for every isolate of the process and outweighs a worker's `resourceLimits`; V8 reads it
 * only as an isolate is set up, so the event loop keeps the cap it started with (checked: its new space stays
 * at 16 MB under `--max-semi-space-size=8` after this, and a worker asking for 8 MB gets 8, not 16;
 * test/integration/semi-space.test.ts).
 */
export function releaseSemiSpaceCap(): void {
  v8.setFlagsFromString('--max-semi-space-size=0');
}

/** This process's command line as it was given (`ps` shows the same after the restart), from /proc where it can. */
export function commandLine(): string[] {
  try {
    const parts = readFileSync('/proc/self/cmdline', 'utf8').split('\0');
    parts.pop(); // (each argument ends with a NUL)
    if (parts.length > 0) return parts;
  } catch {
    // not Linux: what Node says it was started with
  }
  return [process.argv0, ...process.execArgv, ...process.argv.slice(1)];
}

/**
 * Starts the process again with MALLOC_ARENA_MAX set and V8's semi-spaces capped (semiSpaceMb, unless the
 * operator set a cap: V8 sizes them as the isolate starts), once, before the server
 * loads. glibc reads the variable only as the process starts, and by the time JavaScript runs V8's helper
 * threads already hold arenas of their own (mallopt from here caps only threads started later: about half the
 * gain), so the relay execs itself: the same process (pid, parent, stdio), the same command line, one more Node
 * start-up (~60 ms). It does not when an operator set MALLOC_ARENA_MAX or the `glibc.malloc.arena_max` tunable
 * (their choice stands), without the addon or glibc, under an inspector (a debugger would lose the process it
 * attached to), valgrind (which would run only the first image) or a sampling CPU profiler (`--cpu-prof`,
 * `--prof`: its SIGPROF, sent by a thread the exec ends, can still be pending, and an exec keeps pending signals
 * but not their handlers, so the new image would die of it before its own profiler starts: seen in 2 starts of
 * 6), or with an IPC channel to its parent (`child_process.fork`, process managers, cluster workers: the
 * channel's fd is close-on-exec, so the parent would see it disconnect while the new image took NODE_CHANNEL_FD
 * for whatever fd came to have that number); then, or when the exec fails, it returns and the cap applies to the
 * threads started from now on.
 */
export function restartForMemory(
  env: NodeJS.ProcessEnv = process.env,
  native: Binding | null = loadTrimBinding() ?? null,
  // (Node takes NODE_CHANNEL_FD out of the environment once the channel is set up: the channel itself tells)
  ipcChannel: boolean = process.channel !== undefined,
): void {
  if (env.MALLOC_ARENA_MAX !== undefined || env.GLIBC_TUNABLES?.includes('glibc.malloc.arena_max')) return;
  if (!native?.supported) return;
  const nodeOptions = [...process.execArgv, env.NODE_OPTIONS ?? ''];
  const inspected = nodeOptions.some((a) => /--inspect|--debug/.test(a));
  const sampled = nodeOptions.some((a) => /(^|\s)--(cpu-prof|prof)(?=\s|=|$)/.test(a));
  // valgrind runs the program on its own synthetic CPU and does not follow an exec unless told to: the
  // restarted relay would run outside it (its preload in LD_PRELOAD says it is there)
  const underValgrind = env.LD_PRELOAD?.includes('vgpreload') === true;
  if (!inspected && !underValgrind && !sampled && !ipcChannel) {
    env.MALLOC_ARENA_MAX = String(MALLOC_ARENAS);
    native.exec(process.execPath, withSemiSpaceCap(commandLine(), nodeOptions));
    delete env.MALLOC_ARENA_MAX; // (still here: the exec failed)
  }
  native.limitArenas(MALLOC_ARENAS);
}

export interface MemoryTrimOptions {
  /**
   * gives back what the relay keeps only to be fast (the stores' caches, idle upstream connections); called
   * first, so the trim returns it. True when some of it is freed later (connections closing): the next quiet
   * reading trims again, whether RSS moved or not.
   */
  release?: () => boolean | void;
  /** how often the event loop's use and RSS are read (0: only when `tick` is called) */
  everyMs?: number;
  /** RSS change since the last trim that makes one worth it */
  changeBytes?: number;
  /** the event loop's utilisation over an interval at or under which the interval counts as quiet */
  quietUtilization?: number;
  /** (tests) the trim, V8's memory-pressure notice, RSS and the event loop's utilisation since the last reading */
  trim?: () => boolean;
  reduce?: () => void;
  rss?: () => number;
  utilization?: () => number;
  onTrim?: (rssBefore: number, rssAfter: number, released: boolean) => void;
  /** (tests) the addon as loaded: null as if it were not built */
  native?: Binding | null;
}

export interface MemoryTrim {
  /** one reading: trims when it is due; true when it trimmed */
  tick(): boolean;
  stop(): void;
  readonly trims: number;
}

export const TRIM_EVERY_MS = 2_000;
export const TRIM_CHANGE_BYTES = 4 * 1024 * 1024;
export const QUIET_UTILIZATION = 0.05;

function eventLoopUtilization(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const u = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    return u;
  };
}

/**
 * Starts the readings (an unref'd timer: it never keeps the process alive). Returns undefined when there
 * is nothing to call: no addon (not built), no `trim` and no `release` given.
 */
export function startMemoryTrim(opts: MemoryTrimOptions = {}): MemoryTrim | undefined {
  const native = opts.native === undefined ? loadTrimBinding() : (opts.native ?? undefined);
  if (!native && !opts.trim && !opts.release) return undefined;
  // Without glibc there is nothing to trim, but V8's notice still shrinks the heap; without the addon the
  // relay still lets go of what it keeps only to be fast.
  const trim = opts.trim ?? (native?.supported ? native.trim : () => false);
  const reduce = opts.reduce ?? (opts.trim ? undefined : native?.reduce);
  const rss = opts.rss ?? (() => process.memoryUsage.rss());
  const utilization = opts.utilization ?? eventLoopUtilization();
  const changeBytes = opts.changeBytes ?? TRIM_CHANGE_BYTES;
  const quiet = opts.quietUtilization ?? QUIET_UTILIZATION;
  let base = rss();
  let trims = 0;
  /** what the last release let go is freed after it: trim again at the next quiet reading */
  let again = false;

  const tick = (): boolean => {
    const u = utilization();
    if (u > quiet) return false;
    const before = rss();
    if (!again && Math.abs(before - base) < changeBytes) return false;
    again = opts.release?.() === true;
    reduce?.();
    const released = trim();
    base = rss();
    trims++;
    opts.onTrim?.(before, base, released);
    return true;
  };
  const everyMs = opts.everyMs ?? TRIM_EVERY_MS;
  const timer = everyMs > 0 ? setInterval(tick, everyMs) : undefined;
  timer?.unref();
  return {
    tick,
    stop: () => clearInterval(timer),
    get trims() {
      return trims;
    },
  };
}
