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
  /**
   * A repeat (a cache hit of the same kind as an earlier record of its batch, see `repeatOf`): that record.
   * Its facts are the earlier one's with its own id and times, its bodies the very same bytes.
   */
  sameAs?: ProxyRecord;
}

/**
 * Bytes made only as the batch is encoded, straight into its buffer: an SSE stream's copy kept as its events'
 * differences (captured-body.ts), rebuilt there instead of into a copy of its own first.
 */
export interface DeferredBytes {
  readonly size: number;
  /** writes the `size` bytes into `target`, which is exactly that long */
  writeInto(target: Uint8Array): void;
}

/**
 * A body on the event loop: one buffer, the blocks a streamed answer was copied into (captured-body.ts), in
 * order, or a copy that is rebuilt into the batch. Blocks are joined only by the batch they are copied into,
 * never into a copy of their own.
 */
export type WireBytes = Uint8Array | readonly Uint8Array[] | DeferredBytes;

/** A proxied exchange as the event loop hands it over: its answer may still be in blocks. */
export type OutgoingProxyRecord = Omit<ProxyRecord, 'response'> & { response?: WireBytes };

/** How many bytes a body holds, whole or in blocks. */
export function wireLength(bytes: WireBytes | undefined): number {
  if (bytes === undefined) return 0;
  if (bytes instanceof Uint8Array) return bytes.length;
  if (!isBlocks(bytes)) return bytes.size;
  let n = 0;
  for (const b of bytes) n += b.length;
  return n;
}

function isBlocks(bytes: readonly Uint8Array[] | DeferredBytes): bytes is readonly Uint8Array[] {
  return Array.isArray(bytes);
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

/**
 * What makes a hit's kind: the facts its report is derived from, all but its id and times. Named here for
 * every field of ProxyFacts, so a field added there must be placed here too. A repeat (repeatOf) and the
 * report pipeline's variant key both compare these.
 */
const KIND_FIELDS = {
  status: true,
  cacheStatus: true,
  outcome: true,
  method: true,
  url: true,
  upstream: true,
  relayHeaders: true,
  cacheEnabled: true,
  cacheKey: true,
  originReportId: true,
  costSavedUsd: true,
  upstreamMs: true,
  error: true,
  streamed: true,
  encoding: true,
  requestJson: true,
  requestSha256: true,
  trace: true,
  id: false,
  startedAt: false,
  endedAt: false,
} as const satisfies Record<keyof ProxyFacts, boolean>;
/** The kind's facts that are plain values (relayHeaders and trace are compared on their own). */
export const KIND_VALUES = (Object.keys(KIND_FIELDS) as (keyof ProxyFacts)[]).filter((k) => KIND_FIELDS[k] && k !== 'relayHeaders' && k !== 'trace');

function sameBytes(a: WireBytes | undefined, b: WireBytes | undefined): boolean {
  if (a === b) return true;
  if (!(a instanceof Uint8Array) || !(b instanceof Uint8Array) || a.length !== b.length) return false;
  return Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);
}

/**
 * Whether `r` can cross as a repeat of `first`: both cache hits answered from the same origin, untraced, with
 * the same facts but for id and times, and the same request and answer bytes. (A hit's answer is its entry's
 * bytes, the same buffer for every hit of one entry; a request's, compared byte for byte.) Then the worker
 * makes the same report of it as of the whole record, with its own id and times.
 */
export function repeatOf(first: OutgoingProxyRecord, r: OutgoingProxyRecord): boolean {
  const a = first.facts;
  const b = r.facts;
  if (b.cacheStatus !== 'HIT' || b.originReportId === undefined || a.trace !== undefined || b.trace !== undefined) return false;
  for (const k of KIND_VALUES) if (a[k] !== b[k]) return false;
  const ha = a.relayHeaders;
  const hb = b.relayHeaders;
  if (ha.length !== hb.length) return false;
  for (let i = 0; i < ha.length; i++) {
    const x = ha[i]!;
    const y = hb[i]!;
    if (x.length !== y.length || x.some((v, j) => v !== y[j])) return false;
  }
  return sameBytes(first.request, r.request) && sameBytes(first.response, r.response);
}

/**
 * Packs records into one JSON text and one transferable buffer holding every body. A cache hit of the same kind
 * as the batch's first hit from the same origin (repeatOf) crosses as `[that record's index, id, startedAt,
 * endedAt]`: no facts written again, no bodies copied again. (Hits of one origin in another kind, rarer, cross
 * whole.)
 */
export function encodeBatch(proxy: readonly OutgoingProxyRecord[], api: readonly ApiRecord[]): RecordBatch {
  // the first record of each origin's hits in this batch, by its index in p
  const firsts = new Map<string, number>();
  const repeats: (number | undefined)[] = new Array(proxy.length);
  let size = 0;
  for (let i = 0; i < proxy.length; i++) {
    const r = proxy[i]!;
    const origin = r.facts.cacheStatus === 'HIT' ? r.facts.originReportId : undefined;
    if (origin !== undefined) {
      const first = firsts.get(origin);
      if (first !== undefined && repeatOf(proxy[first]!, r)) {
        repeats[i] = first;
        continue;
      }
      if (first === undefined) firsts.set(origin, i);
    }
    size += (r.request?.length ?? 0) + wireLength(r.response);
  }
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
    } else if (isBlocks(b)) {
      for (const block of b) {
        view.set(block, at);
        at += block.length;
      }
    } else {
      b.writeInto(view.subarray(at, at + b.size));
      at += b.size;
    }
    return [from, at - from];
  };
  const p = proxy.map((r, i) => {
    const first = repeats[i];
    return first === undefined ? ([r.facts, put(r.request), put(r.response)] as const) : ([first, r.facts.id, r.facts.startedAt, r.facts.endedAt] as const);
  });
  const a = api.map((r) => [r.id, r.receivedAt, put(r.body)] as const);
  return { meta: JSON.stringify({ p, a }), bytes };
}

export function decodeBatch(batch: RecordBatch): { proxy: ProxyRecord[]; api: ApiRecord[] } {
  const { p, a } = JSON.parse(batch.meta) as {
    p: Array<[ProxyFacts, Span, Span] | [number, string, number, number]>;
    a: Array<[string, number, Span]>;
  };
  const slice = (span: Span): Uint8Array | undefined =>
    span === 0 ? undefined : new Uint8Array(batch.bytes, span[0], span[1]);
  const proxy: ProxyRecord[] = [];
  for (const entry of p) {
    if (typeof entry[0] === 'number') {
      const [first, id, startedAt, endedAt] = entry as [number, string, number, number];
      const same = proxy[first]!;
      const record: ProxyRecord = { facts: { ...same.facts, id, startedAt, endedAt }, sameAs: same };
      if (same.request) record.request = same.request;
      if (same.response) record.response = same.response;
      proxy.push(record);
      continue;
    }
    const [facts, request, response] = entry as [ProxyFacts, Span, Span];
    const record: ProxyRecord = { facts };
    const req = slice(request);
    const res = slice(response);
    if (req) record.request = req;
    if (res) record.response = res;
    proxy.push(record);
  }
  const api = a.map(([id, receivedAt, body]) => ({ id, receivedAt, body: slice(body) ?? new Uint8Array(0) }));
  return { proxy, api };
}
