import { describe, expect, it } from 'vitest';
import { exportEntries, importEntries, ndjsonLines, splitNdjson } from '../../../src/core/cache-transfer.js';
import { decodeAnswer, encodeAnswer, fromCachedResponse, jsonCachedResponse } from '../../../src/core/cached-response.js';
import type { CacheRecord, CacheStore } from '../../../src/storage/cache-store.js';
import { createMemoryCacheStore } from '../../../src/storage/memory-cache-store.js';

const HASH_A = 'a'.repeat(64);
const HASH_B = 'b'.repeat(64);
const HASH_C = 'c'.repeat(64);
const T0 = 1_700_000_000_000;
const HOUR = 3_600_000;

const jsonValue = jsonCachedResponse({ id: 'chatcmpl-1', choices: [{ message: { role: 'assistant', content: 'hé ✓' } }] });
const sseValue = {
  v: 1,
  status: 200,
  headers: { 'content-type': 'text/event-stream' },
  // what the relay assembles from this stream (it names no chat.completion chunk): null
  body: null,
  sse: 'data: {"id":"chatcmpl-2"}\n\ndata: [DONE]\n\n',
  reportId: 'r-1',
  costUsd: 0.0012,
};

function clock(start = T0) {
  const c = { t: start, now: () => c.t };
  return c;
}

function store(now: () => number): CacheStore {
  return createMemoryCacheStore({ maxBytes: 1024 * 1024, now });
}

async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

async function* asAsync<T>(items: T[]): AsyncIterable<T> {
  yield* items;
}

/** Records by key, their values as the answers they hold (a store keeps them in its own stored form). */
function byKey(records: CacheRecord[]) {
  return [...records].sort((a, b) => a.key.localeCompare(b.key)).map((r) => ({ ...r, value: decodeAnswer(r.value) }));
}

function line(fields: Record<string, unknown>): string {
  return JSON.stringify({ key: `ci:${HASH_A}`, createdAt: T0, expiresAt: T0 + HOUR, value: jsonValue, ...fields });
}

describe('exportEntries / importEntries', () => {
  it('round-trips every entry through NDJSON into another store', async () => {
    const c = clock();
    const from = store(c.now);
    const records: CacheRecord[] = [
      { key: `ci:${HASH_A}`, value: JSON.stringify(jsonValue), createdAt: T0 - 5_000, expiresAt: T0 + HOUR },
      { key: `cred-0123456789abcdef0123456789abcdef:${HASH_B}`, value: JSON.stringify(sseValue), createdAt: T0 - 1, expiresAt: T0 + 2 * HOUR },
      { key: `pezzo-proj_1.x:${HASH_C}`, value: JSON.stringify(jsonCachedResponse(null)), createdAt: T0, expiresAt: T0 + 1 },
    ];
    for (const r of records) await from.set(r);

    const lines = await all(exportEntries(from, c.now));
    expect(lines).toHaveLength(3);
    for (const l of lines) expect(l).not.toContain('\n');
    // The value is the parsed cached response, not a string.
    expect(lines.map((l) => JSON.parse(l)).find((e) => e.key.endsWith(HASH_B))).toEqual({
      key: `cred-0123456789abcdef0123456789abcdef:${HASH_B}`,
      createdAt: T0 - 1,
      expiresAt: T0 + 2 * HOUR,
      value: sseValue,
    });

    const to = store(c.now);
    expect(await importEntries(to, lines, c.now)).toEqual({ imported: 3, skipped: 0 });
    expect(byKey(await all(to.entries()))).toEqual(byKey(records));
    // Straight from one store's export into the other's import, too.
    const third = store(c.now);
    expect(await importEntries(third, exportEntries(from, c.now), c.now)).toEqual({ imported: 3, skipped: 0 });
    expect(byKey(await all(third.entries()))).toEqual(byKey(records));
  });

  it('leaves expired entries out of an export', async () => {
    const c = clock();
    const s = store(c.now);
    await s.set({ key: `ci:${HASH_A}`, value: JSON.stringify(jsonValue), createdAt: T0, expiresAt: T0 + 1_000 });
    await s.set({ key: `ci:${HASH_B}`, value: JSON.stringify(jsonValue), createdAt: T0, expiresAt: T0 + HOUR });
    c.t = T0 + 1_000; // the first one expires exactly now
    expect((await all(exportEntries(s, c.now))).map((l) => JSON.parse(l).key)).toEqual([`ci:${HASH_B}`]);
  });

  it('leaves out an entry whose value no longer parses as a cached response', async () => {
    const c = clock();
    const s = store(c.now);
    await s.set({ key: `ci:${HASH_A}`, value: '{"v":2,"status":200}', createdAt: T0, expiresAt: T0 + HOUR });
    await s.set({ key: `ci:${HASH_B}`, value: JSON.stringify(jsonValue), createdAt: T0, expiresAt: T0 + HOUR });
    expect((await all(exportEntries(s, c.now))).map((l) => JSON.parse(l).key)).toEqual([`ci:${HASH_B}`]);
  });

  it('skips expired entries on import and counts them', async () => {
    const c = clock();
    const s = store(c.now);
    const lines = [
      line({ key: `ci:${HASH_A}`, createdAt: T0 - HOUR, expiresAt: T0 - 1 }),
      line({ key: `ci:${HASH_B}`, expiresAt: T0 }),
      line({ key: `ci:${HASH_C}`, expiresAt: T0 + 1 }),
    ];
    expect(await importEntries(s, asAsync(lines), c.now)).toEqual({ imported: 1, skipped: 2 });
    expect((await all(s.entries())).map((r) => r.key)).toEqual([`ci:${HASH_C}`]);
  });

  it('ignores blank lines, and a later line for the same key wins', async () => {
    const c = clock();
    const s = store(c.now);
    const lines = ['', line({ createdAt: T0 - 10 }), '   ', line({ createdAt: T0 - 5 }), ''];
    expect(await importEntries(s, lines, c.now)).toEqual({ imported: 2, skipped: 0 });
    expect(await s.get(`ci:${HASH_A}`)).toEqual({
      key: `ci:${HASH_A}`,
      value: encodeAnswer(fromCachedResponse(jsonValue)!),
      createdAt: T0 - 5,
      expiresAt: T0 + HOUR,
    });
  });

  const BAD: Array<[string, string, string]> = [
    ['not JSON', '{"key": ', 'not valid JSON'],
    ['an array', '[1,2]', 'must be a JSON object'],
    ['a string', '"x"', 'must be a JSON object'],
    ['a key without namespace', line({ key: HASH_A }), 'key must be <namespace>:<sha256 hex>'],
    ['an upper-case hash', line({ key: `ci:${'A'.repeat(64)}` }), 'key must be <namespace>:<sha256 hex>'],
    ['a namespace with a space', line({ key: `c i:${HASH_A}` }), 'key must be <namespace>:<sha256 hex>'],
    ['a 129-character namespace', line({ key: `${'n'.repeat(129)}:${HASH_A}` }), 'key must be <namespace>:<sha256 hex>'],
    ['a numeric key', line({ key: 1 }), 'key must be a string'],
    ['createdAt as text', line({ createdAt: String(T0) }), 'createdAt must be a non-negative whole number'],
    ['a fractional expiresAt', line({ expiresAt: T0 + 0.5 }), 'expiresAt must be a non-negative whole number'],
    ['a missing expiresAt', line({ expiresAt: undefined }), 'expiresAt must be a non-negative whole number'],
    ['expiresAt before createdAt', line({ createdAt: T0 + 2 * HOUR }), 'expiresAt must not be before createdAt'],
    ['the value as a string', line({ value: JSON.stringify(jsonValue) }), 'value must be a cached response object'],
    ['a value of another version', line({ value: { ...jsonValue, v: 2 } }), 'value is not a cached response'],
    ['a value without status', line({ value: { v: 1, headers: {}, body: null } }), 'value is not a cached response'],
    ['a non-2xx status', line({ value: { ...jsonValue, status: 500 } }), 'value.status must be a 2xx status code'],
    ['a numeric header', line({ value: { ...jsonValue, headers: { 'x-n': 1 } } }), 'value.headers.x-n must be a string'],
    ['sse that is not text', line({ value: { ...sseValue, sse: ['data: x'] } }), 'value.sse must be a string'],
    ['an unknown field', line({ namespace: 'ci' }), 'unknown field "namespace"'],
  ];

  it.each(BAD)('rejects %s, naming the line, and imports nothing', async (_what, bad, problem) => {
    const c = clock();
    const s = store(c.now);
    const lines = [line({ key: `ci:${HASH_B}` }), '', bad, line({ key: `ci:${HASH_C}` })];
    const err = await importEntries(s, asAsync(lines), c.now).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'RELAY_ERR_VALIDATION', statusCode: 400 });
    expect((err as Error).message).toMatch(/^line 3: /);
    expect((err as Error).message).toContain(problem);
    // All or nothing: the valid line before the bad one was not written either.
    expect(await s.stats()).toEqual({ entries: 0, bytes: 0 });
  });
});

describe('ndjsonLines / splitNdjson', () => {
  it('splits chunks into lines, across chunk boundaries and inside multi-byte characters', async () => {
    const text = 'first ✓\r\nsecond\n\nthird';
    const bytes = Buffer.from(text, 'utf8');
    const check = bytes.indexOf(Buffer.from('✓'));
    const chunks = [bytes.subarray(0, check + 1), bytes.subarray(check + 1, check + 5), bytes.subarray(check + 5)];
    expect(await all(ndjsonLines(asAsync(chunks)))).toEqual(['first ✓', 'second', '', 'third']);
    expect(await all(ndjsonLines(asAsync(['a\n', 'b\r', '\n'])))).toEqual(['a', 'b']);
  });

  it('splits an in-memory body, with or without the final newline', () => {
    expect(splitNdjson('a\r\nb\n')).toEqual(['a', 'b']);
    expect(splitNdjson('a\nb')).toEqual(['a', 'b']);
    expect(splitNdjson('')).toEqual([]);
  });
});
