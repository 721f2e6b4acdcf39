// The memory trim: the addon is built here (Linux, glibc) and gives memory back; the policy trims only in
// a quiet interval after RSS moved, and never twice for the same change.
import { readFileSync } from 'node:fs';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import {
  type Binding,
  MALLOC_ARENAS,
  TRIM_CHANGE_BYTES,
  collectAfterBurst,
  giveBackAfterStart,
  commandLine,
  loadTrimBinding,
  restartForMemory,
  startMemoryTrim,
  semiSpaceMb,
  withSemiSpaceCap,
} from '../../src/memory-trim.js';
import { NODE_MAJOR } from '../../src/node-major.js';

const MB = 1024 * 1024;

/** ~40 MB of objects kept through young collections (so they are in old space), then dropped */
function leavePromotedGarbage(): void {
  const kept: object[] = [];
  for (let i = 0; i < 300_000; i++) kept.push({ i, s: `x${i}`, a: [i] });
  for (let round = 0; round < 20; round++) {
    const churn: object[] = [];
    for (let i = 0; i < 100_000; i++) churn.push({ i });
  }
}

function rig(readings: { rss: number; utilization: number }[]) {
  let i = 0;
  let current = readings[0]!;
  const calls: number[] = [];
  /** what happened, in order: V8's notice, then the trim */
  const order: string[] = [];
  const trim = startMemoryTrim({
    everyMs: 0,
    release: () => {
      order.push('release');
    },
    reduce: () => order.push('reduce'),
    trim: () => {
      order.push('trim');
      calls.push(current.rss);
      current = { ...current, rss: current.rss - 30 * MB };
      return true;
    },
    rss: () => current.rss,
    utilization: () => current.utilization,
  })!;
  return {
    trim,
    calls,
    order,
    /** the next reading, then one tick */
    step() {
      current = readings[++i]!;
      return trim.tick();
    },
  };
}

describe('memory trim', () => {
  it('the addon is built on this machine (glibc) and malloc_trim runs', () => {
    // npm ci builds native/ (the install script); on this Linux the C library is glibc.
    const binding = loadTrimBinding();
    expect(binding, 'native/build/Release/malloc_trim.node: `npm run build:native` builds it').toBeDefined();
    expect(binding!.supported).toBe(true);
    expect(typeof binding!.trim()).toBe('boolean');
  });

  it('gives back freed native memory that free() kept', async () => {
    const binding = loadTrimBinding()!;
    // Many small native blocks freed with every 16th kept alive: free space below live blocks, which
    // free() does not give back (glibc only trims an arena's top).
    const rss = () => process.memoryUsage.rss();
    const kept: Buffer[] = [];
    let blocks: Buffer[] | null = [];
    for (let i = 0; i < 40_000; i++) {
      const b = Buffer.allocUnsafeSlow(4096 - 64);
      b.fill(1);
      if (i % 16 === 0) kept.push(b);
      else blocks.push(b);
    }
    blocks = null;
    // The Buffers' memory is freed when V8 collects them, partly on a background thread (its array buffer
    // sweeper): collect, let it run, and trim again until the freed memory has come back (or 2 s passed).
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    gc();
    const before = rss();
    let after = before;
    let released = false;
    for (let i = 0; i < 40 && before - after <= 64 * MB; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      gc();
      released = binding.trim() || released;
      after = rss();
    }
    expect(released).toBe(true);
    expect(kept.length).toBe(2500);
    // 150 MB were freed in runs of 15 blocks between live ones: most of it comes back
    expect(before - after).toBeGreaterThan(64 * MB);
  });

  it("tells V8 memory is short: garbage promoted to the event loop's old space goes, and the heap shrinks", async () => {
    const binding = loadTrimBinding()!;
    const heap = () => getHeapStatistics();
    leavePromotedGarbage();
    const before = heap();
    expect(binding.reduce()).toBe(true);
    let after = heap();
    // The collection runs in steps on the idle loop and can take seconds (the same steps in a plain node
    // process: ~10 MiB freed after 0.5-2 s, 65 MiB after 4 s; once, under the whole suite, 2 s gave 19.3 MiB).
    // Without the notice nothing is collected at all, however long this waits (-0.7 MiB after 5 s). A marking
    // the churn had started still counts them alive (it marks from where it began), and the notice starts
    // one only when none runs (under the whole suite, 10 s and 30 s once freed 4.3 and 4.7 MiB): it is given
    // again every 2 s, as the relay gives it at each quiet moment's trim.
    for (let i = 1; i <= 600 && before.used_heap_size - after.used_heap_size < 24 * MB; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      if (i % 40 === 0) binding.reduce();
      after = heap();
    }
    expect(before.used_heap_size - after.used_heap_size).toBeGreaterThan(16 * MB);
    expect(after.total_heap_size).toBeLessThan(before.total_heap_size);
  }, 45_000);

  it("at a burst's end, collects at once: the garbage in the event loop's old space is gone when the call returns, the heap shrunk, then it trims", () => {
    const binding = loadTrimBinding()!;
    expect(typeof binding.collect).toBe('function');
    const heap = () => getHeapStatistics();
    leavePromotedGarbage();
    const before = heap();
    const order: string[] = [];
    const spy: Binding = {
      ...binding,
      collect: () => (order.push('collect'), binding.collect!()),
      trim: () => (order.push('trim'), binding.trim()),
    };
    expect(collectAfterBurst(spy)).toBe(true);
    const after = heap(); // no waiting: unlike `reduce`, nothing is left for later steps
    expect(order).toEqual(['collect', 'trim']);
    expect(before.used_heap_size - after.used_heap_size).toBeGreaterThan(16 * MB);
    expect(after.total_heap_size).toBeLessThan(before.total_heap_size - 16 * MB);
  });

  it('gives back what a start left in the heap only when it holds more than 8 MB it does not use', () => {
    const binding = loadTrimBinding()!;
    const order: string[] = [];
    const spy: Binding = {
      ...binding,
      collect: () => (order.push('collect'), binding.collect!()),
      trim: () => (order.push('trim'), binding.trim()),
    };
    // the embedded default's start: 12 MB committed for 9 used
    expect(giveBackAfterStart({ heapTotal: 12 * MB, heapUsed: 9 * MB }, spy)).toBeUndefined();
    expect(order).toEqual([]);
    // a start that loaded the Redis client: 32 committed for 15
    const ms = giveBackAfterStart({ heapTotal: 32 * MB, heapUsed: 15 * MB }, spy);
    expect(typeof ms).toBe('number');
    expect(ms).toBeGreaterThanOrEqual(0);
    expect(order).toEqual(['collect', 'trim']);
    expect(giveBackAfterStart({ heapTotal: 32 * MB, heapUsed: 15 * MB }, null)).toBeUndefined();
  });

  it('collects nothing without the addon, or with one built before `collect` was added', () => {
    expect(collectAfterBurst(null)).toBe(false);
    let trims = 0;
    const old = { trim: () => (trims++, true), reduce: () => true, limitArenas: () => true, exec: () => 0, supported: true };
    expect(collectAfterBurst(old)).toBe(false);
    expect(trims).toBe(0);
  });

  it('trims once in a quiet interval after RSS grew, and not while busy', () => {
    const r = rig([
      { rss: 100 * MB, utilization: 0 },
      { rss: 180 * MB, utilization: 0.9 }, // a burst: busy, no trim
      { rss: 200 * MB, utilization: 0.4 },
      { rss: 190 * MB, utilization: 0.01 }, // quiet, 90 MB above the last base: trim
      { rss: 160 * MB, utilization: 0 }, // (what the trim gave back) unchanged since: nothing
      { rss: 160 * MB + TRIM_CHANGE_BYTES - 1, utilization: 0 }, // under the threshold
    ]);
    expect([r.step(), r.step(), r.step(), r.step(), r.step()]).toEqual([false, false, true, false, false]);
    expect(r.calls).toEqual([190 * MB]);
    expect(r.trim.trims).toBe(1);
    // The stores' caches go first and V8 is told, so what they free goes back with this trim (the heap's
    // C memory with the next one)
    expect(r.order).toEqual(['release', 'reduce', 'trim']);
  });

  it('trims again at the next quiet reading when what the release let go is freed later (connections closing)', () => {
    let current = { rss: 100 * MB, utilization: 0 };
    const order: string[] = [];
    let releases = 0;
    const t = startMemoryTrim({
      everyMs: 0,
      release: () => {
        order.push('release');
        return ++releases === 1;
      },
      reduce: () => order.push('reduce'),
      trim: () => {
        order.push('trim');
        return true;
      },
      rss: () => current.rss,
      utilization: () => current.utilization,
    })!;
    current = { rss: 150 * MB, utilization: 0 };
    expect(t.tick()).toBe(true); // RSS moved: release (which says more is coming), notice, trim
    current = { rss: 150 * MB, utilization: 0.5 };
    expect(t.tick()).toBe(false); // busy: waits
    current = { rss: 150 * MB, utilization: 0 };
    expect(t.tick()).toBe(true); // quiet, RSS unchanged, but due again
    expect(t.tick()).toBe(false); // the second release let nothing go: done
    expect(order).toEqual(['release', 'reduce', 'trim', 'release', 'reduce', 'trim']);
  });

  it('without the addon (not built), still lets go of what the relay keeps only to be fast', () => {
    let rss = 100 * MB;
    const released: number[] = [];
    const t = startMemoryTrim({ everyMs: 0, native: null, release: () => void released.push(rss), rss: () => rss, utilization: () => 0 });
    expect(t).toBeDefined();
    expect(t!.tick()).toBe(false); // unchanged
    rss = 150 * MB;
    expect(t!.tick()).toBe(true);
    expect(released).toEqual([150 * MB]);
    // with nothing to call at all, nothing starts
    expect(startMemoryTrim({ everyMs: 0, native: null })).toBeUndefined();
  });

  it('trims again when RSS fell (the report worker stopped and freed its own)', () => {
    const r = rig([
      { rss: 100 * MB, utilization: 0 },
      { rss: 150 * MB, utilization: 0 }, // trimmed (the rig's trim gives back 30 MB): base 120
      { rss: 100 * MB, utilization: 0 }, // the worker went: 20 MB under the base, its arena's free pages left: base 70
      { rss: 70 * MB, utilization: 0 },
    ]);
    expect([r.step(), r.step(), r.step()]).toEqual([true, true, false]);
  });
});

describe('restart with few malloc arenas', () => {
  /** a binding whose exec fails with EACCES (13), recording what it was asked */
  function fake(supported = true) {
    const calls: string[] = [];
    const native: Binding = {
      trim: () => false,
      reduce: () => false,
      supported,
      limitArenas: (n) => (calls.push(`limit ${n}`), true),
      exec: (path, argv) => (calls.push(`exec ${path} ${argv.join(' ')}`), 13),
    };
    return { native, calls };
  }

  it('execs the same command line with MALLOC_ARENA_MAX set; when the exec fails, caps the arenas from here on', () => {
    const f = fake();
    const env: NodeJS.ProcessEnv = {};
    // (the variable is set on the env given; process.env is what the exec passes on in the relay)
    const native = {
      ...f.native,
      exec: (path: string, argv: string[]) => {
        expect(env.MALLOC_ARENA_MAX).toBe(String(MALLOC_ARENAS));
        return f.native.exec(path, argv);
      },
    };
    restartForMemory(env, native, false);
    const [node, ...rest] = commandLine();
    // (the cap for this Node: see the next test)
    const cap = [`--max-semi-space-size=${semiSpaceMb(NODE_MAJOR)}`];
    expect(f.calls).toEqual([`exec ${process.execPath} ${[node, ...cap, ...rest].join(' ')}`, `limit ${MALLOC_ARENAS}`]);
    expect(env.MALLOC_ARENA_MAX).toBeUndefined();
  });

  it("caps V8's semi-spaces on the command line it execs (8 MB before Node 24, 16 from it), unless the operator set a cap there or in NODE_OPTIONS", () => {
    const line = ['/usr/bin/node', '--enable-source-maps', 'dist/cli.js', 'cache', 'export'];
    const capped = (mb: number) => ['/usr/bin/node', `--max-semi-space-size=${mb}`, '--enable-source-maps', 'dist/cli.js', 'cache', 'export'];
    for (const major of [20, 22, 23]) expect(withSemiSpaceCap(line, ['--enable-source-maps', ''], major)).toEqual(capped(8));
    for (const major of [24, 25, 26]) expect(withSemiSpaceCap(line, ['--enable-source-maps', ''], major)).toEqual(capped(16));
    const given = ['/usr/bin/node', '--max-semi-space-size=64', 'dist/cli.js'];
    for (const major of [20, 24]) {
      expect(withSemiSpaceCap(given, ['--max-semi-space-size=64', ''], major)).toEqual(given);
      expect(withSemiSpaceCap(line, ['--enable-source-maps', '--max-old-space-size=512 --max-semi-space-size=8'], major)).toEqual(line);
    }
    expect(withSemiSpaceCap([], [''], 20)).toEqual([]);
  });

  it('the Docker image, which needs no restart (it sets MALLOC_ARENA_MAX), starts with the cap the restart would add', () => {
    // The image's command line carries the cap itself; the two must not drift apart.
    const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
    expect(dockerfile).toMatch(/^ENV MALLOC_ARENA_MAX=\d+/m);
    const majors = [...dockerfile.matchAll(/^FROM node:(\d+)/gm)].map((m) => Number(m[1]));
    expect(majors.length).toBeGreaterThan(0);
    const cmd = dockerfile.match(/^CMD (\[.*\])$/m);
    expect(cmd).not.toBeNull();
    const argv = JSON.parse(cmd![1]!) as string[];
    // (the flag where the image's Node sizes the semi-spaces above the cap, none where it does not)
    for (const major of majors) expect(argv).toEqual(withSemiSpaceCap(['node', 'dist/cli.js'], [''], major));
  });

  it("leaves an operator's setting, a C library other than glibc and a missing addon alone", () => {
    for (const env of [{ MALLOC_ARENA_MAX: '8' }, { GLIBC_TUNABLES: 'glibc.malloc.tcache_count=0:glibc.malloc.arena_max=4' }]) {
      const f = fake();
      restartForMemory(env, f.native);
      expect(f.calls).toEqual([]);
    }
    const notGlibc = fake(false);
    restartForMemory({}, notGlibc.native);
    expect(notGlibc.calls).toEqual([]);
    expect(() => restartForMemory({}, null)).not.toThrow(); // the addon not built
  });

  it('under an inspector, valgrind or a sampling CPU profiler, or with an IPC channel, it does not exec (each would lose the process or its channel), and caps the arenas from here on', () => {
    const envs = [
      { NODE_OPTIONS: '--inspect=0' },
      { LD_PRELOAD: '/usr/libexec/valgrind/vgpreload_core-amd64-linux.so' },
      { NODE_OPTIONS: '--max-old-space-size=512 --cpu-prof' },
      { NODE_OPTIONS: '--prof --max-old-space-size=512' },
    ];
    for (const env of envs) {
      const f = fake();
      restartForMemory(env, f.native, false);
      expect(f.calls).toEqual([`limit ${MALLOC_ARENAS}`]);
    }
    // started with an IPC channel (child_process.fork): the channel's fd would not survive the exec
    const forked = fake();
    restartForMemory({}, forked.native, true);
    expect(forked.calls).toEqual([`limit ${MALLOC_ARENAS}`]);
    // a flag that only looks alike is no profiler
    const f = fake();
    restartForMemory({ NODE_OPTIONS: '--cpu-prof-dir=/tmp/p --heap-prof' }, f.native, false);
    expect(f.calls[0]).toMatch(/^exec /);
  });

  it('the built addon caps the arenas (glibc) and refuses a bad count', () => {
    const binding = loadTrimBinding()!;
    expect(binding.limitArenas(0)).toBe(false);
    // (mallopt's cap only affects threads that have no arena yet: harmless to the test process)
    expect(binding.limitArenas(64)).toBe(true);
  });

  it("the built addon's exec that fails returns errno and puts stdio's close-on-exec flags back", () => {
    const binding = loadTrimBinding()!;
    // (the flags line of /proc's fdinfo holds O_CLOEXEC, 02000000 in octal, as Node left it)
    const flags = () => [0, 1, 2].map((fd) => /flags:\s*(\d+)/.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1]);
    const before = flags();
    expect(binding.exec('/nonexistent/node', ['node', '-v'])).toBe(2); // ENOENT, after the flags were cleared
    expect(flags()).toEqual(before);
    expect(binding.exec('/nonexistent/node', [])).toBe(22); // EINVAL: no argv[0]
  });
});
