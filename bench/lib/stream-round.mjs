// One round of the shared streams.mjs (N streamed calls open at once through URL) with the server's own RSS
// sampled every 10 ms from outside, until a second after streams.mjs is done: streams.mjs samples every 100 ms
// and stops at its last response, while a relay's RSS can go on rising after it (its report worker takes the
// end's records). Used by cost.mjs and stream-memory.mjs.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** VmRSS (or another field of /proc/PID/status given in kB) in MB. */
export const statusMb = (pid, field = 'VmRSS') => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`${field}:\\s+(\\d+)`))[1]) / 1024;

/**
 * Runs the round; `onHigh(rss)` is called at each new high of the process's RSS. Resolves with streams.mjs's
 * own result and `processPeak` (MB), the highest reading of the round and the second after it.
 */
export async function streamRound({ shared, url, streams, pid, onHigh }) {
  const child = spawn(process.execPath, [path.join(shared, 'streams.mjs'), url, String(streams), String(pid)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  let processPeak = 0;
  const sampler = setInterval(() => {
    let rss;
    try {
      rss = statusMb(pid);
    } catch {
      return; // the server is gone: the round's own result says so
    }
    if (rss > processPeak) {
      processPeak = rss;
      onHigh?.(rss);
    }
  }, 10);
  const code = await new Promise((resolve) => child.on('exit', resolve));
  await sleep(1000);
  clearInterval(sampler);
  if (code !== 0) throw new Error(`streams.mjs exited with ${code}`);
  return { ...JSON.parse(out), processPeak: Math.round(processPeak * 10) / 10 };
}
