// What the event loop hands over about one exchange, so that everything else about it (parsing the answer,
// assembling a stream, usage, cost, the body store, the insert) happens on the report worker thread: plain
// facts and the bodies' raw bytes, nothing parsed. Records travel in batches: one JSON text with every
// record's facts, and one buffer with every body, transferred to the worker (moved, not copied or cloned).
import type { CacheStatus, Outcome } from './proxy-report.js';
import type { TraceFacts } from './trace-facts.js';

/** One proxied exchange, as the event loop saw it: its facts, and the bodies' wire bytes beside them. */
export interface ProxyRecord {
  facts: ProxyFacts;
  request?: Uint8Array;
  response?: Uint8Array;
}

/**
 * A body on the event loop: one buffer, or the blocks a streamed answer was copied into (captured-body.ts),
 * in order. Blocks are joined only by the batch they are copied into, never into a copy of their own.
 */
export type WireBytes = Uint8Array | readonly Uint8Array[];

/** A proxied exchange as the event loop hands it over: its answer may still be in blocks. */
export type OutgoingProxyRecord = Omit<ProxyRecord, 'response'> & { response?: WireBytes };

/** How many bytes a body holds, whole or in blocks. */
export function wireLength(bytes: WireBytes | undefined): number {
  if (bytes === undefined) return 0;
  if (bytes instanceof Uint8Array) return bytes.length;
  let n = 0;
  for (const b of bytes) n += b.length;
  return n;
}

export interface ProxyFacts {
  id: string;
  /** epoch ms: the request arrived / the exchange ended */
  startedAt: number;
  endedAt: number;
  status: number;
  cacheStatus: CacheStatus;
  outcome: Outcome;
  method: string;
  url: string;
  upstream: string | null;
  /** the request's x-relay-* headers (metadata, properties), as [name, value] */
  relayHeaders: string[][];
  cacheEnabled: boolean;
  cacheKey: string | null;
  /** the report of the call whose answer this one got (hits, coalesced calls) */
  originReportId?: string;
  /** what the origin cost, from cache entries of older versions */
  costSavedUsd?: number | null;
  upstreamMs?: number;
  error?: string;
  /** the answer is an SSE stream */
  streamed: boolean;
  /** the answer's content-encoding, decoded on the worker */
  encoding?: string;
  /**
   * Whether the request body is JSON for the report: `no` (not a POST with a JSON body), `checked` (the
   * event loop parsed it by the strict rules, for the cache key), `refused` (they refused it: the report
   * keeps no request body), `unchecked` (the worker applies the strict rules itself).
   */
  requestJson: 'no' | 'checked' | 'unchecked' | 'refused';
  /** sha256 hex of the request's wire bytes, when the event loop already computed it */
  requestSha256?: string;
  /** with tracing on: the exchange's spans, built on the report worker (src/tracing/exchange-spans.ts) */
  trace?: TraceFacts;
}

/** A direct-API report: its raw JSON text (already validated on the event loop) and when it arrived. */
export interface ApiRecord {
  id: string;
  receivedAt: number;
  body: Uint8Array;
}

export type RecordBatch = { meta: string; bytes: ArrayBuffer };

type Span = [offset: number, length: number] | 0;

/** Packs records into one JSON text and one transferable buffer holding every body. */
export function encodeBatch(proxy: readonly OutgoingProxyRecord[], api: readonly ApiRecord[]): RecordBatch {
  let size = 0;
  for (const r of proxy) size += (r.request?.length ?? 0) + wireLength(r.response);
  for (const r of api) size += r.body.length;
  // A buffer of its own (never a slice of Node's shared pool), so that it can be transferred.
  const bytes = new ArrayBuffer(size);
  const view = new Uint8Array(bytes);
  let at = 0;
  const put = (b: WireBytes | undefined): Span => {
    if (b === undefined) return 0;
    const from = at;
    if (b instanceof Uint8Array) {
      view.set(b, at);
      at += b.length;
    } else {
      for (const block of b) {
        view.set(block, at);
        at += block.length;
      }
    }
    return [from, at - from];
  };
  const p = proxy.map((r) => [r.facts, put(r.request), put(r.response)] as const);
  const a = api.map((r) => [r.id, r.receivedAt, put(r.body)] as const);
  return { meta: JSON.stringify({ p, a }), bytes };
}

export function decodeBatch(batch: RecordBatch): { proxy: ProxyRecord[]; api: ApiRecord[] } {
  const { p, a } = JSON.parse(batch.meta) as {
    p: Array<[ProxyFacts, Span, Span]>;
    a: Array<[string, number, Span]>;
  };
  const slice = (span: Span): Uint8Array | undefined =>
    span === 0 ? undefined : new Uint8Array(batch.bytes, span[0], span[1]);
  const proxy = p.map(([facts, request, response]) => {
    const record: ProxyRecord = { facts };
    const req = slice(request);
    const res = slice(response);
    if (req) record.request = req;
    if (res) record.response = res;
    return record;
  });
  const api = a.map(([id, receivedAt, body]) => ({ id, receivedAt, body: slice(body) ?? new Uint8Array(0) }));
  return { proxy, api };
}
