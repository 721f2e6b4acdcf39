// What writing a miss's answer to the embedded cache costs (src/storage/sqlite-cache-store.ts): `set` of a
// short chat answer, 32 at a time as a busy relay's quiet timer commits them, in a fresh file per build. CPU
// time (user + system) of this process per write. With more than one build directory, their rounds are
// interleaved in one process (keep the old build as bench/span-encode.mjs says, then rebuild).
//   npm run build && node bench/cache-write.mjs [dist …]        (ANSWER_CHARS: pads the answer; ANSWER=stream)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const dirs = process.argv.length > 2 ? process.argv.slice(2) : ['dist'];
const pad = 'x'.repeat(Number(process.env.ANSWER_CHARS ?? 0));
// ANSWER=stream: a streamed answer's entry instead (its SSE text: 20 events of a few words, as
// ../shared/bench/upstream.mjs sends them, each repeating the chunk's envelope)
const WORDS = 'The quick brown fox jumps over the lazy dog while a proxy forwards the request to an upstream model'.split(' ');
const envelope = { id: 'chatcmpl-abc', object: 'chat.completion.chunk', created: 1764110000, model: 'gpt-4o-mini-2024-07-18', system_fingerprint: 'fp_bench0001' };
const sse =
  Array.from({ length: 20 }, (_, i) => {
    const content = ' ' + Array.from({ length: 5 }, (_, j) => WORDS[(i * 5 + j) % WORDS.length]).join(' ');
    return `data: ${JSON.stringify({ ...envelope, choices: [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }] })}\n\n`;
  }).join('') + 'data: [DONE]\n\n';
const streamValue = `{"v":2,"status":200,"headers":{"content-type":"text/event-stream"},"sse":true}\n${sse}`;
const jsonValue =
  `{"v":2,"status":200,"headers":[["content-type","application/json"]]}\n` +
  JSON.stringify({
    id: 'chatcmpl-abc',
    object: 'chat.completion',
    created: 1764110000,
    model: 'gpt-4o-mini-2024-07-18',
    choices: [{ index: 0, message: { role: 'assistant', content: `Hello there! How can I help you today with your question?${pad}` }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 20, completion_tokens: 25, total_tokens: 45 },
  });
const value = process.env.ANSWER === 'stream' ? streamValue : jsonValue;
const temp = mkdtempSync(join(tmpdir(), 'cache-write-'));
const builds = await Promise.all(
  dirs.map(async (dir, i) => {
    const { createSqliteCacheStore } = await import(pathToFileURL(resolve(dir, 'storage/sqlite-cache-store.js')).href);
    return { dir, store: createSqliteCacheStore({ file: join(temp, `cache-${i}.db`), maxBytes: 1e10 }), times: [] };
  }),
);

let n = 0;
const ROUNDS = 12;
for (let round = 0; round < ROUNDS; round++) {
  for (let k = 0; k < builds.length; k++) {
    const b = builds[(k + round) % builds.length];
    const before = process.cpuUsage();
    for (let batch = 0; batch < 100; batch++) {
      const at = Date.now();
      await Promise.all(Array.from({ length: 32 }, () => b.store.set({ key: `ns:${n++}`, value, createdAt: at, expiresAt: at + 3_600_000 })));
    }
    const used = process.cpuUsage(before);
    if (round >= 2) b.times.push((used.user + used.system) / 3200);
  }
}
console.log(`${value.length}-character answers, 3,200 writes a round, ${ROUNDS - 2} rounds after 2\n`);
console.log('| build | CPU µs a write (median) | fastest round |');
console.log('|---|--:|--:|');
for (const b of builds) {
  const sorted = [...b.times].sort((x, y) => x - y);
  console.log(`| ${b.dir} | ${sorted[sorted.length >> 1].toFixed(1)} | ${sorted[0].toFixed(1)} |`);
  await b.store.close();
}
rmSync(temp, { recursive: true, force: true });
