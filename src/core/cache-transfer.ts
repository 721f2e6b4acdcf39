// Cache entries as NDJSON, to move them between stores and machines (record in one place, replay in CI
// with RELAY_OFFLINE). Used by `llm-relay cache export|import` and by /api/cache/v1/export|import.
//
// The format: one JSON object per line, UTF-8, lines separated by "\n" ("\r\n" is accepted on import):
//
//   {"key":"<namespace>:<sha256 hex>","createdAt":<epoch ms>,"expiresAt":<epoch ms>,"value":<cached response>}
//
// - key        the stored key, exactly as the relay derives it (README "The cache key and namespaces"):
//              `^[A-Za-z0-9._-]{1,128}:[0-9a-f]{64}$`
// - createdAt  epoch ms when the entry was first written (kept, so `age` and `max-age` stay true)
// - expiresAt  epoch ms after which the entry is dead; createdAt <= expiresAt
// - value      the cached response as a JSON object, not as a string (core/cached-response.ts:
//              {v: 1, status, headers, body, sse?, reportId?, costUsd?})
//
// No other fields. Entries whose expiresAt has passed are skipped on export and on import (counted as
// `skipped` on import). Blank lines are ignored. Lines come in no particular order; when a key appears
// twice, the later line wins.
//
// Import is all-or-nothing: every line is validated before the first one is written, so a file with a bad
// line changes nothing, and the error names the first bad line (`line N: …`). The price is that the
// validated entries are held in memory until they are written (about the size of the input).
import { RELAY_ERR_VALIDATION } from '../errors.js';
import type { CacheRecord, CacheStore } from '../storage/cache-store.js';
import { type CachedResponse, decodeAnswer, encodeAnswer, fromCachedResponse, headerProblem, toCachedResponse } from './cached-response.js';
import { parseJsonStrict } from './json-guard.js';

/**
 * Lines are parsed by the strict JSON rules. Their nesting bound is wider than the API's: an entry holds
 * an upstream answer, which the relay cached without a depth limit, and must survive the round trip.
 */
export const LINE_MAX_DEPTH = 512;

export const NDJSON_CONTENT_TYPE = 'application/x-ndjson';

const KEY_PATTERN = /^[A-Za-z0-9._-]{1,128}:[0-9a-f]{64}$/;
const FIELDS = new Set(['key', 'createdAt', 'expiresAt', 'value']);

export interface ImportResult {
  /** entries written to the store */
  imported: number;
  /** valid entries left out because they had expired */
  skipped: number;
}

/**
 * One NDJSON line (without its "\n") per live entry of the store. An entry whose value no longer parses as
 * a cached response (damaged, or from a future version) is left out, as the relay would never serve it.
 */
export async function* exportEntries(store: CacheStore, now: () => number = Date.now): AsyncIterable<string> {
  for await (const record of store.entries()) {
    if (record.expiresAt <= now()) continue;
    const answer = decodeAnswer(record.value);
    if (!answer) continue;
    const value = toCachedResponse(answer);
    yield JSON.stringify({ key: record.key, createdAt: record.createdAt, expiresAt: record.expiresAt, value });
  }
}

/**
 * Validates every line, then writes the live entries to the store. A bad line rejects with
 * RELAY_ERR_VALIDATION (`line N: …`, N counted from 1) before anything is written. A store failure while
 * writing rejects with the store's error; entries written before it stay.
 */
export async function importEntries(
  store: CacheStore,
  lines: AsyncIterable<string> | Iterable<string>,
  now: () => number = Date.now,
): Promise<ImportResult> {
  const records: CacheRecord[] = [];
  let skipped = 0;
  let lineNo = 0;
  for await (const line of lines) {
    lineNo++;
    if (line.trim() === '') continue;
    const record = parseLine(line, lineNo);
    if (record.expiresAt <= now()) skipped++;
    else records.push(record);
  }
  let imported = 0;
  for (const record of records) {
    // Checked again: a large import may take long enough for an entry to expire meanwhile.
    if (record.expiresAt <= now()) {
      skipped++;
      continue;
    }
    await store.set(record);
    imported++;
  }
  return { imported, skipped };
}

/** Splits a stream of text or bytes (a file, stdin) into lines without their "\n" or "\r\n". */
export async function* ndjsonLines(chunks: AsyncIterable<string | Buffer>): AsyncIterable<string> {
  const decoder = new TextDecoder('utf-8');
  let rest = '';
  for await (const chunk of chunks) {
    rest += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    const parts = rest.split('\n');
    rest = parts.pop() ?? '';
    for (const part of parts) yield stripCr(part);
  }
  rest += decoder.decode();
  if (rest !== '') yield stripCr(rest);
}

/** The lines of an NDJSON text that is already in memory (an HTTP body). */
export function splitNdjson(text: string): string[] {
  const lines = text.split('\n').map(stripCr);
  if (lines.at(-1) === '') lines.pop(); // the final "\n"
  return lines;
}

function stripCr(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}

function invalid(lineNo: number, problem: string): Error {
  return new RELAY_ERR_VALIDATION(`line ${lineNo}: ${problem}`);
}

function parseLine(line: string, lineNo: number): CacheRecord {
  let parsed: unknown;
  try {
    parsed = parseJsonStrict(line, LINE_MAX_DEPTH);
  } catch (err) {
    throw invalid(lineNo, (err as Error).message);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw invalid(lineNo, 'must be a JSON object {key, createdAt, expiresAt, value}');
  }
  const entry = parsed as Record<string, unknown>;
  const unknownField = Object.keys(entry).find((k) => !FIELDS.has(k));
  if (unknownField !== undefined) throw invalid(lineNo, `unknown field "${unknownField}"`);

  const { key, createdAt, expiresAt } = entry;
  if (typeof key !== 'string') throw invalid(lineNo, 'key must be a string');
  if (!KEY_PATTERN.test(key)) throw invalid(lineNo, `key must be <namespace>:<sha256 hex> (${KEY_PATTERN.source})`);
  if (!isEpochMs(createdAt)) throw invalid(lineNo, 'createdAt must be a non-negative whole number (epoch ms)');
  if (!isEpochMs(expiresAt)) throw invalid(lineNo, 'expiresAt must be a non-negative whole number (epoch ms)');
  if (expiresAt < createdAt) throw invalid(lineNo, 'expiresAt must not be before createdAt');

  const value = toStoredValue(entry.value, lineNo);
  return { key, value, createdAt, expiresAt };
}

function isEpochMs(n: unknown): n is number {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
}

/**
 * The value as the store keeps it (cached-response.ts's stored form). Since an imported entry comes from
 * elsewhere, the fields a replay relies on are checked first.
 */
function toStoredValue(value: unknown, lineNo: number): string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid(lineNo, 'value must be a cached response object');
  }
  const shape = value as Partial<CachedResponse>;
  if (shape.v !== 1 || typeof shape.status !== 'number')
    throw invalid(lineNo, 'value is not a cached response (needs v: 1 and a numeric status)');
  // Checked on the value as given: decoding it would quietly drop headers that cannot be replayed.
  const problem = replayProblem(value as CachedResponse);
  if (problem) throw invalid(lineNo, `value.${problem}`);
  let answer;
  try {
    answer = fromCachedResponse(value as CachedResponse);
  } catch (err) {
    throw invalid(lineNo, `value cannot be stored (${(err as Error).message})`);
  }
  if (!answer) throw invalid(lineNo, 'value is not a cached response (needs v: 1 and a numeric status)');
  return encodeAnswer(answer);
}

function replayProblem(r: CachedResponse): string | undefined {
  if (!Number.isInteger(r.status) || r.status < 200 || r.status > 299) return 'status must be a 2xx status code';
  if (typeof r.headers !== 'object' || r.headers === null || Array.isArray(r.headers)) return 'headers must be an object';
  for (const [name, v] of Object.entries(r.headers)) {
    const problem = headerProblem(name, v);
    if (problem) return `headers.${name} ${problem}`;
  }
  if (r.sse !== undefined && typeof r.sse !== 'string') return 'sse must be a string';
  if (r.reportId !== undefined && typeof r.reportId !== 'string') return 'reportId must be a string';
  if (r.costUsd !== undefined && r.costUsd !== null && typeof r.costUsd !== 'number') return 'costUsd must be a number or null';
  return undefined;
}
