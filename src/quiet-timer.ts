// A timer for bookkeeping that can wait: it fires once things are quiet, QUIET_MS after the last poke (a
// burst of answers is over), but never later than MAX_DELAY_MS after the first poke since it last fired.
// Clients are answered first; building reports and committing cache writes fill the gaps between bursts.
// It reads the global `performance`, so a test's fake clock drives it.

export const QUIET_MS = 3;
export const MAX_DELAY_MS = 50;

export interface QuietTimer {
  /** something is waiting: fire once it has been quiet for a moment */
  poke(): void;
  /** forget the pending firing (the caller is doing the work now) */
  cancel(): void;
}

export interface QuietTimerOptions {
  /** how long without a poke counts as quiet (default QUIET_MS) */
  quietMs?: number;
  /** the longest a firing waits after the first poke (default MAX_DELAY_MS) */
  maxDelayMs?: number;
}

/** `fire` is told whether it fires in a quiet moment (true) or because the longest wait was reached (false). */
export function createQuietTimer(fire: (quiet: boolean) => void, opts: QuietTimerOptions = {}): QuietTimer {
  const quietMs = opts.quietMs ?? QUIET_MS;
  const maxDelayMs = opts.maxDelayMs ?? MAX_DELAY_MS;
  let timer: NodeJS.Timeout | undefined;
  let first = 0;
  let last = 0;
  const check = (): void => {
    const now = performance.now();
    const quietFor = now - last;
    if (quietFor < quietMs && now - first < maxDelayMs) {
      timer = setTimeout(check, Math.max(1, quietMs - quietFor));
    } else {
      timer = undefined;
      fire(quietFor >= quietMs);
    }
  };
  return {
    poke() {
      last = performance.now();
      if (timer) return;
      first = last;
      timer = setTimeout(check, quietMs);
    },
    cancel() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
