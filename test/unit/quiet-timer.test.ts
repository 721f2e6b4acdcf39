// The quiet timer fires once nothing has poked it for a moment, or when its longest wait is up, and says which.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_DELAY_MS, QUIET_MS, createQuietTimer } from '../../src/quiet-timer.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('quiet timer', () => {
  it('fires QUIET_MS after the last poke, told it is quiet', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const fired: boolean[] = [];
    const timer = createQuietTimer((quiet) => fired.push(quiet));
    timer.poke();
    await vi.advanceTimersByTimeAsync(QUIET_MS - 1);
    timer.poke();
    await vi.advanceTimersByTimeAsync(QUIET_MS - 1);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(2);
    expect(fired).toEqual([true]);
  });

  it('fires MAX_DELAY_MS after the first poke however often it is poked, told it is not quiet', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const fired: { at: number; quiet: boolean }[] = [];
    const start = performance.now();
    const timer = createQuietTimer((quiet) => fired.push({ at: performance.now() - start, quiet }));
    for (let i = 0; i < MAX_DELAY_MS + 10; i++) {
      timer.poke();
      await vi.advanceTimersByTimeAsync(1);
    }
    expect(fired[0]!.quiet).toBe(false);
    expect(fired[0]!.at).toBeGreaterThanOrEqual(MAX_DELAY_MS);
    expect(fired[0]!.at).toBeLessThanOrEqual(MAX_DELAY_MS + QUIET_MS);
  });

  it('takes its own quiet moment and longest wait', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const fired: { at: number; quiet: boolean }[] = [];
    const start = performance.now();
    const timer = createQuietTimer((quiet) => fired.push({ at: performance.now() - start, quiet }), { quietMs: 200, maxDelayMs: 2_000 });
    timer.poke();
    await vi.advanceTimersByTimeAsync(150);
    timer.poke(); // 150: the quiet moment starts again
    await vi.advanceTimersByTimeAsync(199);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toEqual([{ at: 350, quiet: true }]);
    // poked every 100 ms: fires at the longest wait
    for (let i = 0; i < 30; i++) {
      timer.poke();
      await vi.advanceTimersByTimeAsync(100);
    }
    expect(fired[1]).toEqual({ at: 350 + 2_000, quiet: false });
  });

  it('cancel forgets the firing', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const fired: boolean[] = [];
    const timer = createQuietTimer((quiet) => fired.push(quiet));
    timer.poke();
    timer.cancel();
    await vi.advanceTimersByTimeAsync(MAX_DELAY_MS * 2);
    expect(fired).toEqual([]);
  });
});
