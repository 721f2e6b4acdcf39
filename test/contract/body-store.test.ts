// The body store behind both report stores: any body comes back exactly as it went in (deep-equal, key
// order included), chat requests and answers are kept one message per blob, and a hit's report or a
// conversation's next turn writes only what is new. Real SQLite and PostgreSQL; never skipped.
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import type { StoredReport } from '../../src/storage/report-store.js';
import { createReportPruner } from '../../src/storage/report-pruner.js';
import { variant } from '../../src/storage/report-variant.js';
import { type StoreKind, dropSchemas, missingBlobs, openStore } from '../helpers/report-stores.js';
import { makeReport } from './report-fixtures.js';

afterAll(dropSchemas);

/** Any key, odd ones among them: prototype names, unicode, the split points' own names. */
const key = fc.oneof(
  fc.string(),
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'messages', 'system', 'choices', 'message', 'input', 'output', 'tools', 'instructions', 'body', '0', 'é世🎉', ''),
);

/** Objects built with own keys in a given order (Object.fromEntries defines `__proto__` as a plain key). */
const json: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(null, true, false, 0, 1.5, -7, 1e21, ''),
    fc.string({ unit: 'grapheme' }),
    fc.string({ unit: 'binary' }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.array(fc.tuple(key, tie('value')), { maxLength: 5 }).map((entries) => Object.fromEntries(entries)),
  ),
})).value;

const extras = fc.array(fc.tuple(key, json), { maxLength: 3 });

const item = fc.oneof(fc.record({ role: fc.constantFrom('user', 'assistant'), content: fc.string() }), json);
/** Any value, or an array (of items, or of anything) for the keys split item by item. */
const maybeList = fc.oneof(fc.array(item, { maxLength: 6 }), json, fc.string());

/** Keys put in a random order (the first swapped with any other). */
function shuffled(entries: [string, unknown][], at: number): Record<string, unknown> {
  const i = at % entries.length;
  [entries[0], entries[i]] = [entries[i]!, entries[0]!];
  return Object.fromEntries(entries);
}

/** A chat request: `messages` (and maybe `system`) among other keys, in any order. */
const chatRequest = fc
  .tuple(extras, fc.array(item, { maxLength: 6 }), fc.option(fc.oneof(fc.string(), fc.array(json, { maxLength: 3 }), json)), fc.nat())
  .map(([more, messages, system, at]) => {
    const entries: [string, unknown][] = [['model', 'gpt-4o'], ['messages', messages], ...more];
    if (system !== null) entries.push(['system', system]);
    return shuffled(entries, at);
  });

/** An agent's or a Responses API request: `input` items, `instructions`, `tools`, and maybe `messages` too. */
const agentRequest = fc
  .tuple(extras, maybeList, fc.option(fc.oneof(fc.string(), json)), fc.option(maybeList), fc.option(fc.array(item, { maxLength: 3 })), fc.nat())
  .map(([more, input, instructions, tools, messages, at]) => {
    const entries: [string, unknown][] = [['model', 'gpt-4.1'], ['input', input], ...more];
    if (instructions !== null) entries.push(['instructions', instructions]);
    if (tools !== null) entries.push(['tools', tools]);
    if (messages !== null) entries.push(['messages', messages]);
    return shuffled(entries, at);
  });

/** A chat answer: `choices[i].message`, some choices without one. */
const chatAnswer = fc
  .tuple(extras, fc.array(fc.oneof(fc.record({ index: fc.nat(), message: json, finish_reason: fc.string() }), json), { maxLength: 4 }))
  .map(([more, choices]) => Object.fromEntries([['object', 'chat.completion'], ...more, ['choices', choices]]));

/** A Responses API answer: `output` items, with the request's `instructions` and `tools` echoed. */
const responsesAnswer = fc
  .tuple(extras, maybeList, fc.option(fc.string()), fc.option(maybeList), fc.nat())
  .map(([more, output, instructions, tools, at]) => {
    const entries: [string, unknown][] = [['object', 'response'], ['output', output], ...more];
    if (instructions !== null) entries.push(['instructions', instructions]);
    if (tools !== null) entries.push(['tools', tools]);
    return shuffled(entries, at);
  });

const body = fc.oneof(json, chatRequest, agentRequest, chatAnswer, responsesAnswer, fc.string());

/** JSON text: what the bodies must come back as, key order included. */
const text = (v: unknown): string => JSON.stringify(v);

describe.each<StoreKind>(['sqlite', 'postgres'])('body store: %s', (kind) => {
  it('gives back any report body exactly as it was sent (property)', async () => {
    const { store } = await openStore(kind);
    let n = 0;
    try {
      await fc.assert(
        fc.asyncProperty(fc.option(body, { nil: undefined }), fc.option(body, { nil: undefined }), async (req, res) => {
          const id = `p-${++n}`;
          const report = makeReport(id, n);
          report.request = req === undefined ? { timestamp: report.request.timestamp } : { timestamp: report.request.timestamp, body: req };
          report.response = res === undefined ? { timestamp: report.response.timestamp } : { body: res, timestamp: report.response.timestamp };
          await store.insertMany([report]);
          const got = (await store.get(id))!;
          expect(text(got.request.body)).toBe(text(req));
          expect(text(got.response.body)).toBe(text(res));
          expect(got).toEqual(JSON.parse(text(report)));
          expect(Object.keys(got.response)).toEqual(Object.keys(report.response));
        }),
        { numRuns: 250 },
      );
      const page = await store.list({ limit: 1000 });
      expect(page.items).toHaveLength(n);
    } finally {
      await store.close();
    }
  });

  it("stores each message once: a conversation's turn adds its new messages, a hit adds nothing", async () => {
    const s = await openStore(kind, undefined, { blobsOnly: true });
    const blobs = async (): Promise<number> => Number((await s.rows('SELECT count(*) AS n FROM bodies'))[0]!.n);
    try {
      const system = { role: 'system', content: 'You are terse. '.repeat(100) };
      const messages: unknown[] = [system];
      const sent: StoredReport[] = [];
      const counts: number[] = [];
      for (let turn = 0; turn < 4; turn++) {
        messages.push({ role: 'user', content: `question ${turn}: what does the relay keep of a conversation?` });
        const answer = { role: 'assistant', content: `answer ${turn}: each message once, and a skeleton per body.` };
        const report = makeReport(`turn-${turn}`, turn, {
          request: { timestamp: new Date().toISOString(), body: { model: 'gpt-4o', messages: [...messages] } },
          response: { timestamp: new Date().toISOString(), body: { id: `c${turn}`, choices: [{ index: 0, message: answer }] } },
        });
        await s.store.insertMany([report]);
        sent.push(report);
        messages.push(answer);
        counts.push(await blobs());
      }
      // First turn: system, question, answer, and the two skeletons. Each later turn: its question, its
      // answer and the two skeletons; the history it repeats (the earlier answers too) is already stored.
      expect(counts).toEqual([5, 9, 13, 17]);

      // A hit's report: the same request and answer as an earlier one, nothing new to store.
      const origin = sent[2]!;
      await s.store.insertMany([
        makeReport('hit', 10, { request: origin.request, response: origin.response, cacheHit: true, originReportId: origin.id }),
      ]);
      expect(await blobs()).toBe(17);
      for (const r of [...sent, { ...origin, id: 'hit' }]) {
        const got = (await s.store.get(r.id))!;
        expect(text(got.request.body)).toBe(text(r.request.body));
        expect(text(got.response.body)).toBe(text(r.response.body));
      }
      expect(await missingBlobs(s)).toEqual([]);
    } finally {
      await s.store.close();
    }
  });

  it("stores an agent's tools and instructions once, and each turn's new input and output items only (Responses API)", async () => {
    const s = await openStore(kind);
    const blobs = async (): Promise<number> => Number((await s.rows('SELECT count(*) AS n FROM bodies'))[0]!.n);
    try {
      const tools = Array.from({ length: 12 }, (_, i) => ({ type: 'function', name: `tool_${i}`, description: 'Reads one file of the repository.', parameters: { type: 'object' } }));
      const instructions = 'You are a coding agent. Read before you write, and run the tests before you answer.';
      const input: unknown[] = [];
      const counts: number[] = [];
      for (let turn = 0; turn < 3; turn++) {
        input.push({ role: 'user', content: `turn ${turn}: what does this repository keep of an agent's session?` });
        const item = { type: 'message', id: `msg_${turn}`, role: 'assistant', content: [{ type: 'output_text', text: `answer ${turn}: each item once.` }] };
        const request = { model: 'gpt-4.1', instructions, tools, input: [...input] };
        const answer = { id: `resp_${turn}`, object: 'response', instructions, tools, output: [item] };
        const report = makeReport(`agent-${turn}`, turn, {
          request: { timestamp: new Date().toISOString(), body: request },
          response: { timestamp: new Date().toISOString(), body: answer },
        });
        await s.store.insertMany([report]);
        input.push(item);
        counts.push(await blobs());
        const got = (await s.store.get(report.id))!;
        expect(text(got.request.body)).toBe(text(request));
        expect(text(got.response.body)).toBe(text(answer));
      }
      // First turn: the request's skeleton, tools, instructions and question; the answer's skeleton and item
      // (its echoed tools and instructions are the request's blobs). Each later turn: a question, an item and
      // the two skeletons; the tools (~1.6 KB) are never stored again.
      expect(counts).toEqual([6, 10, 14]);
      expect(await missingBlobs(s)).toEqual([]);
    } finally {
      await s.store.close();
    }
  });

  it("reads back a hit's variants (report-variant.ts) as the reports they are: their own ids, times and durations", async () => {
    const s = await openStore(kind);
    try {
      const base = makeReport('hit-0', 30, { cacheHit: true, costUsd: 0, costSavedUsd: 0.00033, originReportId: 'origin' });
      const variants = [1, 2, 3].map((n) => {
        const at = Date.parse(base.request.timestamp) + n * 60_000;
        return variant(base, { id: `hit-${n}`, requestMs: at, receivedMs: at + 7 * n, durationMs: 7 * n });
      });
      // the base and its variants in one batch, and a variant alone in a later one
      await s.store.insertMany([base, variants[0]!, variants[1]!]);
      await s.store.insertMany([variants[2]!]);
      for (const r of [base, ...variants]) {
        const got = (await s.store.get(r.id))!;
        expect(got).toEqual(JSON.parse(text(r)));
        // (PostgreSQL's jsonb orders a report's own keys its way; SQLite keeps them as they were)
        if (kind === 'sqlite') expect(text(got)).toBe(text(r));
      }
      // the indexed columns are each variant's own: the list orders and bounds them by their request time
      const from = variants[1]!.request.timestamp;
      const page = await s.store.list({ limit: 10, from, cacheHit: true });
      expect(page.items.map((r) => [r.id, r.durationMs])).toEqual([['hit-3', 21], ['hit-2', 14]]);
      const all = await s.store.list({ limit: 10 });
      expect(all.items.map((r) => r.id)).toEqual(['hit-3', 'hit-2', 'hit-1', 'hit-0']);
      // and retention's clock (received_ms) is each one's own
      const received = await s.rows("SELECT id, received_ms AS ms FROM reports WHERE id LIKE 'hit-%' ORDER BY id");
      expect(received.map((r) => [r.id, Number(r.ms)])).toEqual([base, ...variants].map((r) => [r.id, Date.parse(r.receivedAt)]));
    } finally {
      await s.store.close();
    }
  });

  it('keeps a short message in its skeleton rather than in a blob of its own, and reads it back in place', async () => {
    const s = await openStore(kind, undefined, { blobsOnly: true });
    const blobs = async (): Promise<number> => Number((await s.rows('SELECT count(*) AS n FROM bodies'))[0]!.n);
    try {
      const long = { role: 'user', content: 'A question long enough to be kept once, in a blob of its own.' };
      const body = { model: 'gpt-4o', messages: [{ role: 'user', content: 'ok' }, long, { role: 'assistant', content: 'yes' }] };
      const report = makeReport('short', 0, {
        request: { timestamp: new Date().toISOString(), body },
        response: { timestamp: new Date().toISOString(), body: { id: 'c', choices: [{ index: 0, message: { role: 'assistant', content: 'no' } }] } },
      });
      await s.store.insertMany([report]);
      // The request: its skeleton (with both short messages in it) and the long message; the answer: one
      // blob (its only message is short).
      expect(await blobs()).toBe(3);
      const got = (await s.store.get('short'))!;
      expect(text(got.request.body)).toBe(text(body));
      expect(text(got.response.body)).toBe(text(report.response.body));
    } finally {
      await s.store.close();
    }
  });
});

describe('body store: sqlite keeps a short body in its row', () => {
  const DAY = 24 * 60 * 60 * 1000;

  it('as text in the body column, no blob; a long one as blobs; both read back, and body retention takes both', async () => {
    let clock = Date.parse('2026-11-01T00:00:00.000Z');
    const s = await openStore('sqlite', () => clock);
    try {
      const short = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hi' }] };
      const long = { model: 'gpt-4o-mini', messages: [{ role: 'system', content: 'You answer in one line. '.repeat(12) }, { role: 'user', content: 'Say hi' }] };
      const answer = { id: 'c-1', choices: [{ index: 0, message: { role: 'assistant', content: 'Hi.' }, finish_reason: 'stop' }] };
      // The SQLite store's threshold is 256 characters of JSON: one body each side of it.
      expect(text(short).length).toBeLessThan(256);
      expect(text(long).length).toBeGreaterThanOrEqual(256);
      const at = new Date(clock).toISOString();
      const inline = makeReport('inline', 0, { receivedAt: at, request: { timestamp: at, body: short }, response: { timestamp: at, body: answer } });
      const blobbed = makeReport('blobbed', 1, { receivedAt: at, request: { timestamp: at, body: long }, response: { timestamp: at, body: answer } });
      await s.store.insertMany([inline, blobbed]);

      const rows = await s.rows('SELECT id, typeof(request_blob) AS req, typeof(response_blob) AS res, request_blob AS kept FROM reports ORDER BY id');
      expect(rows.map((r) => [r.id, r.req, r.res])).toEqual([
        ['blobbed', 'blob', 'text'],
        ['inline', 'text', 'text'],
      ]);
      expect(rows[1]!.kept).toBe(text(short));
      // The long request only: its skeleton and its system message (the user's message is short: in the skeleton).
      expect(Number((await s.rows('SELECT count(*) AS n FROM bodies'))[0]!.n)).toBe(2);
      for (const sent of [inline, blobbed]) expect(text(await s.store.get(sent.id))).toBe(text(sent));
      // (the same request time: newest id first)
      expect((await s.store.list({ limit: 10 })).items.map((r) => text(r))).toEqual([text(inline), text(blobbed)]);
      expect(await missingBlobs(s)).toEqual([]);

      // Past body retention a short body goes as a blob does: the report keeps everything else.
      clock += 40 * DAY;
      const pruner = createReportPruner({ store: s.store, reportRetentionMs: 0, bodyRetentionMs: 30 * DAY, maxBytes: 0, measure: async () => 0, now: () => clock });
      while ((await pruner.step()).more);
      const after = await s.rows('SELECT typeof(request_blob) AS req, typeof(response_blob) AS res FROM reports');
      expect(after.map((r) => [r.req, r.res])).toEqual([
        ['null', 'null'],
        ['null', 'null'],
      ]);
      const expired = (await s.store.get('inline'))!;
      expect(expired.bodiesExpired).toBe(true);
      expect('body' in expired.request || 'body' in expired.response).toBe(false);
      expect(expired.requestSha256).toBe(inline.requestSha256);
    } finally {
      await s.store.close();
    }
  });

  it("a cache hit's report of a short exchange keeps the same text in its own row", async () => {
    const s = await openStore('sqlite');
    try {
      const origin = makeReport('origin', 0);
      await s.store.insertMany([origin, variant(origin, { id: 'hit', requestMs: Date.parse(origin.request.timestamp) + 5, durationMs: 1, receivedMs: Date.parse(origin.receivedAt) + 5 })]);
      expect(Number((await s.rows('SELECT count(*) AS n FROM bodies'))[0]!.n)).toBe(0);
      const got = (await s.store.get('hit'))!;
      expect(text(got.request.body)).toBe(text(origin.request.body));
      expect(text(got.response.body)).toBe(text(origin.response.body));
    } finally {
      await s.store.close();
    }
  });
});
