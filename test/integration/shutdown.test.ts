// SIGTERM drains: a stream in flight finishes, its report lands, the process exits 0.
import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { tempDir } from '../helpers/relay.js';
import { spawnRelay } from '../helpers/relay-process.js';

let up: FakeUpstream;
let dataDir: string;
afterAll(async () => {
  await up?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describe('graceful shutdown', () => {
  it('SIGTERM during a stream lets it finish and its report land', async () => {
    up = await startFakeUpstream();
    up.eventGapMs = 100; // ~1 s of stream
    dataDir = await tempDir();
    const env = { RELAY_DATA_DIR: dataDir, RELAY_UPSTREAM_URL: up.url, RELAY_CACHE_URL: 'memory' };
    const relay = await spawnRelay(env);
    const res = await fetch(`${relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-term' },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'one two three four five six' }] }),
    });
    const reportId = res.headers.get('x-relay-report-id');
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    relay.child.kill('SIGTERM');
    // New connections are refused while the stream goes on.
    await new Promise((r) => setTimeout(r, 100));
    await expect(fetch(`${relay.url}/healthz`)).rejects.toThrow();
    let text = Buffer.from(first.value!).toString();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString();
    }
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    // Once the stream is done, the drain does not sit out the grace period (10 s by default) on the idle
    // keep-alive connection: it closes it and exits.
    const ended = Date.now();
    expect(await relay.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - ended).toBeLessThan(5_000);

    const again = await spawnRelay(env);
    try {
      const report = await (await fetch(`${again.url}/api/reporting/v2/requests/${reportId}`)).json();
      expect(report).toMatchObject({
        id: reportId,
        status: 200,
        proxy: { outcome: 'complete', cacheStatus: 'MISS' },
        response: { streamed: true, body: { choices: [{ message: { content: 'echo: one two three four five six' } }] } },
      });
    } finally {
      again.child.kill('SIGTERM');
      await again.exited;
    }
  });
});
