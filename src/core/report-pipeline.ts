// From records to stored reports, on the report worker thread: the request and the answer are parsed here
// (never on the event loop), a stream is assembled, usage and cost derived, exactly as the relay always
// described an exchange (proxy-report.ts, report-derive.ts). What repeats is not redone: a hit's report after
// the first of its kind is a variant of that one (storage/report-variant.ts), its bodies the very objects the
// body store has split already. Nothing else is kept: parsed bodies kept for hits that may never come lived
// long enough to be promoted, and cost every miss more in garbage collection than they saved (measured:
// a miss 4% and a streamed miss 10% less CPU without them).
import { hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { StoredReport } from '../storage/report-store.js';
import { canVary, dateMs, variant } from '../storage/report-variant.js';
import { decodeBody } from './content-encoding.js';
import { decodeUtf8Strict, parseJsonStrict } from './json-guard.js';
import { type ApiRecord, KIND_VALUES, type ProxyFacts, type ProxyRecord } from './exchange-record.js';
import type { PriceTable } from './pricing.js';
import { type ExchangeFacts, knownBody, knownFacts, proxyReport } from './proxy-report.js';
import { reportFields } from './proxy-headers.js';
import { type KnownBody, type ReportInput, deriveReport } from './report-derive.js';
import { parseSse, readStream } from './sse.js';

export interface PipelineOptions {
  prices: PriceTable;
  /** the strict JSON rules' nesting bound, for request bodies the event loop did not check */
  maxJsonDepth: number;
  /** bodies above this are cut and marked truncated */
  maxBodyBytes: number;
  defaults: { client: string; clientVersion: string; environment: string };
}

/** An answer read once: its body as the report describes it, and the facts of the bytes it stands for. */
interface ReadAnswer {
  body: unknown;
  known?: KnownBody;
  /** an SSE stream that carries an error event */
  error: boolean;
}

/** The wire bytes of the bases of variants kept (a parsed body takes a few times that in memory). */
const BASES_BYTES = 4 * 1024 * 1024;

export interface ReportPipeline {
  proxy(record: ProxyRecord): StoredReport;
  /** a direct-API report from its JSON text (validated already) */
  api(record: ApiRecord): StoredReport;
}

const utf8 = new TextDecoder();

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * What makes a hit's report the same as an earlier one's but for the variant fields (report-variant.ts): its
 * kind's facts (KIND_VALUES and its relay headers, exchange-record.ts). Undefined for a call that did not get
 * its answer from an origin, or whose request was not hashed on the event loop.
 */
function variantKey(f: ProxyFacts): string | undefined {
  if (f.originReportId === undefined || f.upstreamMs !== undefined) return undefined;
  if (f.requestJson !== 'no' && f.requestSha256 === undefined) return undefined;
  let key = '';
  for (const k of KIND_VALUES) key += `${f[k] as unknown}\n`;
  for (const [name, value] of f.relayHeaders) key += `\n${name}\n${value}`;
  return key;
}

export function createReportPipeline(opts: PipelineOptions): ReportPipeline {
  // The last report of each kind of hit, by variantKey: the next hit like it is a variant of it.
  const hits = new LRUCache<string, StoredReport>({
    maxSize: BASES_BYTES,
    sizeCalculation: (r) => Math.max(1, r.requestBytes + r.responseBytes),
  });

  function readAnswer(bytes: Uint8Array, streamed: boolean, encoding: string | undefined): ReadAnswer {
    let text: string;
    try {
      text = utf8.decode(decodeBody(bytes, encoding));
    } catch {
      return { body: undefined, error: false };
    }
    if (streamed) {
      const stream = readStream(parseSse(text));
      return { body: stream.body, error: stream.error };
    }
    const body = parseJson(text);
    // A JSON answer's facts are those of its wire text; an assembled stream's, of its JSON (deriveReport).
    return body === undefined ? { body, error: false } : { body, known: knownBody(text), error: false };
  }

  /** A body the strict rules refuse is forwarded untouched (the upstream judges it) but not reported. */
  function strict(bytes: Uint8Array): unknown {
    try {
      return parseJsonStrict(decodeUtf8Strict(bytes), opts.maxJsonDepth);
    } catch {
      return undefined;
    }
  }

  function requestBody(record: ProxyRecord): { body: unknown; known?: KnownBody } {
    const { facts, request } = record;
    const state = facts.requestJson;
    if (state === 'no' || state === 'refused' || !request) return { body: undefined };
    const sha = facts.requestSha256 ?? hash('sha256', request, 'hex');
    const known: KnownBody = { bytes: request.length, sha256: sha, text: () => utf8.decode(request) };
    return { body: state === 'checked' ? parseJson(utf8.decode(request)) : strict(request), known };
  }

  // A batch's repeats of a hit (exchange-record.ts, repeatOf) have their first record's key: made once.
  const keys = new WeakMap<ProxyRecord, string | undefined>();
  function keyOf(record: ProxyRecord): string | undefined {
    const first = record.sameAs;
    if (first === undefined) return variantKey(record.facts);
    if (keys.has(first)) return keys.get(first);
    const key = variantKey(first.facts);
    keys.set(first, key);
    return key;
  }

  return {
    proxy(record) {
      const f = record.facts;
      const key = keyOf(record);
      const base = key === undefined ? undefined : hits.get(key);
      if (base) {
        // (deriveReport's duration: the difference of the two timestamps as written, in whole ms)
        const durationMs = dateMs(f.endedAt) - dateMs(f.startedAt);
        return variant(base, { id: f.id, requestMs: f.startedAt, receivedMs: f.endedAt, durationMs });
      }
      const req = requestBody(record);
      const answer = record.response ? readAnswer(record.response, f.streamed, f.encoding) : undefined;
      const fields = reportFields(Object.fromEntries(f.relayHeaders), opts.defaults);
      // A stream that ended cleanly but carries an error event did not complete: its report says so.
      const outcome = f.outcome === 'complete' && answer?.error ? 'stream-error' : f.outcome;
      const facts: ExchangeFacts = {
        method: f.method,
        url: f.url,
        upstream: f.upstream,
        startedAt: f.startedAt,
        endedAt: f.endedAt,
        metadata: fields.metadata,
        properties: fields.properties,
        requestBody: req.body,
        status: f.status,
        responseBody: answer?.body,
        streamed: f.streamed,
        cacheStatus: f.cacheStatus,
        cacheEnabled: f.cacheEnabled,
        cacheKey: f.cacheKey,
        outcome,
      };
      if (req.known && req.body !== undefined) facts.requestRaw = req.known;
      if (answer?.known) facts.responseRaw = answer.known;
      if (f.upstreamMs !== undefined) facts.upstreamMs = f.upstreamMs;
      if (f.originReportId !== undefined) facts.originReportId = f.originReportId;
      if (f.costSavedUsd !== undefined) facts.costSavedUsd = f.costSavedUsd;
      if (f.error !== undefined) facts.error = f.error;
      const ids = { id: f.id, receivedAt: new Date(f.endedAt).toISOString() };
      const report = deriveReport(proxyReport(facts), ids, opts.prices, opts.maxBodyBytes, knownFacts(facts));
      if (key === undefined || !canVary(report)) return report;
      // The base of the next hits' variants as a copy: deriveReport's Object.assign leaves an object of this
      // many keys in V8's dictionary mode, and a spread of one (each variant's) takes microseconds; the copy
      // a spread makes has a fast shape, which V8 clones in a tenth of a microsecond (measured).
      const fast = { ...report };
      hits.set(key, fast);
      return fast;
    },

    api(record) {
      const input = JSON.parse(utf8.decode(record.body)) as ReportInput;
      return deriveReport(input, { id: record.id, receivedAt: new Date(record.receivedAt).toISOString() }, opts.prices, opts.maxBodyBytes);
    },
  };
}
