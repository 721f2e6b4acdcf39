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
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

export interface Binding {
  trim(): boolean;
  /** V8's memory-pressure notice for the calling thread's heap (true when it was given) */
  reduce(): boolean;
  supported: boolean;
}

const require = createRequire(import.meta.url);

let binding: Binding | null | undefined;

/** The addon: undefined when it was not built (native/binding.gyp; `npm run build:native`). */
export function loadTrimBinding(): Binding | undefined {
  if (binding === undefined) {
    try {
      binding = require('../native/build/Release/malloc_trim.node') as Binding;
    } catch {
      binding = null;
    }
  }
  return binding ?? undefined;
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
