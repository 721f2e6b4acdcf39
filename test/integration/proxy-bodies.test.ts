// Bodies through the real proxy into the body store (SQLite in the data dir): a hit's report writes its row
// and no body bytes, streamed or not, and a conversation's next turn adds only its new messages; every
// report still reads back with the bodies the client sent and got.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { chat } from '../helpers/proxy-call.js';
import { type TestRelay, get, startRelay } from '../helpers/relay.js';
import { missingBlobs, sqliteRows } from '../helpers/report-stores.js';

let up: FakeUpstream;
let relay: TestRelay;
let file: string;
beforeAll(async () => {
  up = await startFakeUpstream();
  relay = await startRelay({ cacheUrl: 'sqlite', upstreamUrl: up.url });
  file = join(relay.dataDir, 'reports.sqlite');
});
afterAll(async () => {
  await relay.close();
  await up.close();
});

async function counts(): Promise<{ reports: number; blobs: number }> {
  await relay.reports.flush();
  const [r] = await sqliteRows(file, 'SELECT (SELECT count(*) FROM reports) AS reports, (SELECT count(*) FROM bodies) AS blobs');
  return { reports: Number(r!.reports), blobs: Number(r!.blobs) };
}

async function reportOf(res: { headers: Headers }) {
  await relay.reports.flush();
  return (await get(`${relay.url}/api/reporting/v2/requests/${res.headers.get('x-relay-report-id')}`)).body;
}

describe('bodies of proxied calls', () => {
  it.each([false, true])('a hit writes its report and no body bytes (stream: %s)', async (stream) => {
    const content = `hit me ${stream} ${Date.now()}`;
    const miss = await chat(relay.url, content, { stream });
    expect(miss.cache).toBe('MISS');
    const before = await counts();
    const hit = await chat(relay.url, content, { stream });
    expect(hit.cache).toBe('HIT');
    expect(hit.text).toBe(miss.text);
    expect(await counts()).toEqual({ reports: before.reports + 1, blobs: before.blobs });
    const [first, again] = [await reportOf(miss), await reportOf(hit)];
    expect(again.originReportId).toBe(first.id);
    expect(again.request.body).toEqual({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }], ...(stream ? { stream: true } : {}) });
    expect(again.response.body).toEqual(first.response.body);
    expect([again.responseBytes, again.responseSha256]).toEqual([first.responseBytes, first.responseSha256]);
  });

  it("stores a conversation's history once: each turn adds its new messages", async () => {
    const system = { role: 'system', content: `A long shared system prompt ${Date.now()}. `.repeat(50) };
    const messages: unknown[] = [system];
    const added: number[] = [];
    for (let turn = 0; turn < 5; turn++) {
      messages.push({ role: 'user', content: `turn ${turn}: a question long enough for a blob of its own` });
      const before = await counts();
      const res = await fetch(`${relay.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-default' },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages }),
      });
      const answer = (await res.json()) as { choices: { message: unknown }[] };
      messages.push(answer.choices[0]!.message);
      added.push((await counts()).blobs - before.blobs);
      const report = await reportOf(res);
      expect(report.request.body).toEqual({ model: 'gpt-4o-mini', messages: messages.slice(0, -1) });
      expect(report.response.body).toEqual(answer);
    }
    // The first turn: system prompt, question, answer message, two skeletons; then question, answer, two
    // skeletons a turn, however long the history grows.
    expect(added).toEqual([5, 4, 4, 4, 4]);
    expect(await missingBlobs({ rows: (sql) => sqliteRows(file, sql) })).toEqual([]);
  });
});
