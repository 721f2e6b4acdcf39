// The real @pezzo/client 0.4.18 (with openai 4) against the relay's direct API and a local fake OpenAI.
import { Pezzo, PezzoOpenAI } from '@pezzo/client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type FakeUpstream, chatCompletion, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type TestRelay, get, startRelay } from '../helpers/relay.js';

let relay: TestRelay;
let upstream: FakeUpstream;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  relay = await startRelay({ cacheUrl: 'sqlite' });
});
afterAll(async () => {
  await relay.close();
  await upstream.close();
});

function client(projectId: string) {
  const pezzo = new Pezzo({ serverUrl: relay.url, apiKey: 'pez_test_key', projectId, environment: 'test' });
  return new PezzoOpenAI(pezzo, { apiKey: 'sk-upstream-test', baseURL: `${upstream.url}/v1` });
}

async function reportsOf(projectEnv: string) {
  const res = await get(`${relay.url}/api/reporting/v2/requests?environment=${projectEnv}&client=pezzo-ts&limit=100`);
  expect(res.status).toBe(200);
  return res.body.items as any[];
}

describe('@pezzo/client against the relay', () => {
  it('caches, reports every call, and keeps projects apart', async () => {
    const warn = vi.spyOn(console, 'warn');
    const a = client('project-a');
    const params = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Hello Bob' }] };

    const first = await a.chat.completions.create(params, { cache: true, properties: { userId: 'u1' } });
    expect(upstream.calls).toHaveLength(1);
    expect(first).toEqual(chatCompletion('echo: Hello Bob'));

    const second = await a.chat.completions.create(params, { cache: true, properties: { userId: 'u1' } });
    expect(upstream.calls).toHaveLength(1); // served from the relay's cache
    // Pezzo zeroes the usage of a cached answer; the content is the same.
    expect(second).toEqual({ ...first, usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } });

    // Another project never sees project-a's entry.
    const b = client('project-b');
    const third = await b.chat.completions.create(params, { cache: true });
    expect(third).toEqual(first);
    expect(upstream.calls).toHaveLength(2);

    // A call without the cache still goes upstream and is reported.
    await a.chat.completions.create(params);
    expect(upstream.calls).toHaveLength(3);
    expect(warn).not.toHaveBeenCalled();

    // Reporting is fire-and-forget in the client: wait until all four reports are there.
    let items: any[] = [];
    for (let i = 0; i < 50 && items.length < 4; i++) {
      items = await reportsOf('test');
      if (items.length < 4) await new Promise((r) => setTimeout(r, 20));
    }
    expect(items).toHaveLength(4);
    const flags = items.map((r) => [r.cacheEnabled, r.cacheHit]).sort();
    expect(flags).toEqual([
      [false, null],
      [true, false],
      [true, false],
      [true, true],
    ].sort());
    for (const r of items) {
      expect(r.metadata).toMatchObject({ client: 'pezzo-ts', clientVersion: '0.4.18', environment: 'test', provider: 'OpenAI', type: 'ChatCompletion' });
      expect(r.request.body).toEqual(params);
      expect(r.provider).toBe('openai');
      expect(r.status).toBe(200);
    }
    const miss = items.find((r) => r.cacheHit === false && r.properties?.userId === 'u1');
    expect(miss.usage).toEqual({ inputTokens: 12, outputTokens: 7, totalTokens: 19 });
    expect(miss.costUsd).toBe((12 * 0.15 + 7 * 0.6) / 1e6);
    const hit = items.find((r) => r.cacheHit === true);
    expect(hit.costUsd).toBe(0);
    warn.mockRestore();
  });
});
