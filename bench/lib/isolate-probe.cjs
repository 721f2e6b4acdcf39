// A preload for bench/stream-memory.mjs (`NODE_OPTIONS=--require …/isolate-probe.cjs`): every 50 ms each isolate
// of the process (the event loop, and every worker: Node runs preloads in workers too) appends one JSON line to
// the file named by LLM_RELAY_ISOLATE_PROBE — its V8 heap (committed and used, the new space's share), its
// external memory and array buffers, and the process's RSS — so that the moment of a peak can be split by
// isolate. Measuring aid only: the line is written synchronously, ~20 small appends a second a thread.
'use strict';
const out = process.env.LLM_RELAY_ISOLATE_PROBE;
if (out) {
  const fs = require('node:fs');
  const v8 = require('node:v8');
  const { isMainThread, threadId } = require('node:worker_threads');
  const tag = isMainThread ? 'loop' : `worker ${threadId}`;
  const mb = (bytes) => Math.round(bytes / 104857.6) / 10;
  const timer = setInterval(() => {
    const heap = v8.getHeapStatistics();
    const mem = process.memoryUsage();
    const newSpace = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
    const line = {
      t: Date.now(),
      tag,
      pid: process.pid,
      rss: mb(mem.rss),
      heap: mb(heap.total_heap_size),
      used: mb(heap.used_heap_size),
      newSpace: mb(newSpace ? newSpace.space_size : 0),
      external: mb(mem.external),
      arrayBuffers: mb(mem.arrayBuffers),
    };
    try {
      fs.appendFileSync(out, `${JSON.stringify(line)}\n`);
    } catch {
      clearInterval(timer); // the run is over (its directory removed)
    }
  }, 50);
  timer.unref();
}
