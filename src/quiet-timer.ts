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

export function createQuietTimer(fire: () => void): QuietTimer {
  let timer: NodeJS.Timeout | undefined;
  let first = 0;
  let last = 0;
  const check = (): void => {
    const now = performance.now();
    const quietFor = now - last;
    if (quietFor < QUIET_MS && now - first < MAX_DELAY_MS) {
      timer = setTimeout(check, Math.max(1, QUIET_MS - quietFor));
    } else {
      timer = undefined;
      fire();
    }
  };
  return {
    poke() {
      last = performance.now();
      if (timer) return;
      first = last;
      timer = setTimeout(check, QUIET_MS);
    },
    cancel() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
