// The miss path: call the upstream, hand its body to the client as it arrives, keep a bounded copy of the
// chunks on the side, and when the body ends decide what to store and record. Nothing is parsed here: the
// copy goes to the cache as the text it is, and to the report worker as bytes. Nothing is stored from an
// aborted, errored or truncated answer, nor from a stream that reports an error.
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { performance } from 'node:perf_hooks';
import type { UpstreamClient } from '../upstream/upstream-client.js';
import { captureBody } from './captured-body.js';
import type { StoredAnswer } from './cached-response.js';
import { decodeBody } from './content-encoding.js';
import { dialectOf, errorAnswer, errorFacts } from './error-answer.js';
import { type LiveAnswer, type LiveFeed, createLiveFeed } from './live-answer.js';
import { type Base, ClientGone, type ProxyRequest, type ProxyResponse } from './proxy-types.js';
import { clientResponseHeaders, isJsonMediaType, one, upstreamRequestHeaders } from './proxy-headers.js';
import type { CacheStatus, Outcome } from './proxy-report.js';
import type { Target } from './routing.js';
import { mayReportError, parseSse, sseOutcome } from './sse.js';
import type { RouteHint } from './route-hint.js';
import type { Telemetry } from './telemetry.js';
import { type ExchangeTracing, epochMs } from './trace-facts.js';

export interface ForwardArgs {
  req: ProxyRequest;
  target: Target;
  base: Base;
  status: CacheStatus;
  upstream: UpstreamClient;
  cacheMaxEntryBytes: number;
  /** called once when the body ends: the answer to cache, or undefined when it must not be cached */
  onStored(cached: StoredAnswer | undefined): void;
  /** called when no answer came at all */
  onFailed(): void;
  /** for the leader of a single flight: share a streamed answer with identical calls while it runs */
  publish?: (live: LiveAnswer) => void;
  telemetry: Telemetry;
  tracing?: ExchangeTracing;
  /** told of every upstream answer of 400 or more (route-hint.ts) */
  hint?: RouteHint;
}

/** Provider headers worth replaying with a cached answer; everything else describes the original call. */
function replayHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== 'string') continue;
    if (name === 'content-type' || name.startsWith('openai-') || name.startsWith('anthropic-') || name === 'x-request-id' || name === 'request-id')
      out[name] = value;
  }
  out['content-type'] ??= 'application/json';
  return out;
}

/**
 * Whether a complete stream reports an error (then it is not stored). Most streams hold no sign of one (an
 * answer that talks about errors holds the word, not the signs): only those that do are parsed to find out.
 */
function streamReportsError(text: string): boolean {
  return mayReportError(text) && sseOutcome(parseSse(text)).error;
}

const NO_BODY_METHODS = new Set(['GET', 'HEAD']);

export async function forward(a: ForwardArgs): Promise<ProxyResponse> {
  const { req, base } = a;
  const upstreamStart = performance.now();
  // Who reads the upstream answer: the client, and when it is shared (see live-answer.ts) every joiner.
  // The upstream call is aborted when the last of them leaves; unshared, that is when the client leaves.
  let readers = 1;
  let clientLeft = false;
  let upstreamBody: Readable | undefined;
  let signal: ClientGone = req.signal;
  let leave = (): void => {};
  if (a.publish) {
    const shared = new ClientGone();
    leave = () => {
      if (--readers === 0) shared.abort();
    };
    const clientGone = (): void => {
      clientLeft = true;
      leave();
      // Joiners still read: the client's pipe paused the body as it let go of it, so it flows on for them.
      if (readers > 0) process.nextTick(() => upstreamBody?.resume());
    };
    if (signal.aborted) clientGone();
    else signal.once('abort', clientGone);
    signal = shared;
  }
  const headers = upstreamRequestHeaders(req.headers);
  const trace = base.trace;
  // The upstream call is a child span of the exchange's; its context goes upstream in traceparent.
  if (trace && a.tracing) a.tracing.upstream(trace, headers);
  let res;
  try {
    res = await a.upstream.request({
      origin: a.target.origin,
      path: a.target.path,
      method: req.method,
      headers,
      body: req.body && req.body.length > 0 && !NO_BODY_METHODS.has(req.method) ? req.body : undefined,
      signal,
    });
  } catch (err) {
    a.onFailed();
    const endedAt = Date.now();
    if (req.signal.aborted) {
      if (trace?.upstream) trace.upstream.end = epochMs(performance.now());
      // The client left before the answer: nobody to answer; the report says so.
      base.record({ endedAt, status: 499, cacheStatus: a.status, outcome: 'client-abort', streamed: false, error: (err as Error).message });
      throw err;
    }
    // An upstream that could not be reached: the client gets the relay's error in its provider's shape,
    // and the report keeps that very body.
    const facts = errorFacts(err);
    if (trace?.upstream) {
      trace.upstream.end = epochMs(performance.now());
      trace.upstream.error = facts.code;
    }
    const { response } = errorAnswer(dialectOf(req.headers, a.target.origin), facts, base.relayHeaders(a.status));
    base.record(
      { endedAt, status: facts.statusCode, cacheStatus: a.status, outcome: 'upstream-error', streamed: false, error: facts.message },
      Buffer.from(response.body as string),
    );
    a.telemetry.exchange({ route: base.route, cacheStatus: a.status, status: facts.statusCode, overheadMs: performance.now() - base.t0 });
    return response;
  }

  const headersAt = performance.now();
  const contentType = String(res.headers['content-type'] ?? '');
  const isSse = contentType.startsWith('text/event-stream');
  const ok = res.status >= 200 && res.status < 300;
  if (res.status >= 400) a.hint?.(a.req, a.target, res.status);
  const encoding = one(res.headers['content-encoding']);
  const identity = encoding === undefined || encoding === 'identity';
  // (an SSE stream kept as its events' differences: see captured-body.ts)
  const captured = captureBody(a.cacheMaxEntryBytes, { events: isSse && identity });
  let finished = false;
  upstreamBody = res.body;

  // A streamed answer that may be stored can be joined by identical calls while it runs (encoded ones
  // wait for the stored answer instead: a joiner may not accept that encoding).
  let live: LiveFeed | undefined;
  if (a.publish && ok && isSse && identity) {
    live = createLiveFeed({
      status: res.status,
      headers: replayHeaders(res.headers),
      reportId: base.id,
      trace: trace && { traceId: trace.traceId, spanId: trace.spanId },
      copy: () => captured.bytes(),
      maxLagBytes: a.cacheMaxEntryBytes,
      enter: () => void readers++,
      leave,
      reading: () => readers > 0,
    });
    a.publish(live);
  }

  const finish = (outcome: Outcome): void => {
    if (finished) return;
    finished = true;
    const endedAt = Date.now();
    if (trace?.upstream) trace.upstream.end = epochMs(performance.now());
    // The copy as it is: the report's batch copies its blocks in (or rebuilds an SSE stream's copy there), the
    // cache entry reads it as text.
    const wire = captured.wire();
    // The upstream answer may have ended for the joiners after this call's own client left.
    const own: Outcome = clientLeft && outcome === 'complete' ? 'client-abort' : outcome;
    const facts: Parameters<Base['record']>[0] = {
      endedAt,
      status: res.status,
      cacheStatus: a.status,
      outcome: own,
      streamed: isSse,
      upstreamMs: Math.round((headersAt - base.t0) * 1000) / 1000,
    };
    if (!identity) facts.encoding = encoding;
    base.record(facts, wire);
    let cached: StoredAnswer | undefined;
    if (outcome === 'complete' && ok && wire !== undefined && a.status !== 'BYPASS' && (isSse || isJsonMediaType(contentType))) {
      // Stored decoded: a hit's client may not accept the upstream's encoding.
      let payload: string | undefined;
      try {
        payload = identity ? captured.text() : Buffer.from(decodeBody(captured.bytes()!, encoding)).toString('utf8');
      } catch {
        payload = undefined; // an answer that does not decode is served, not stored
      }
      if (payload !== undefined && !(isSse && streamReportsError(payload)))
        cached = { status: res.status, headers: replayHeaders(res.headers), payload, sse: isSse, reportId: base.id };
    }
    a.onStored(cached);
  };

  if (trace?.upstream) trace.upstream.status = res.status;
  if (trace && isSse) res.body.once('data', () => (trace.firstChunk = epochMs(performance.now())));
  // Paused first, so the copy starts with the first byte only once the client's pipe is attached.
  res.body.pause();
  res.body.on(
    'data',
    live
      ? (chunk: Buffer) => {
          captured.add(chunk);
          live.write(chunk);
        }
      : (chunk: Buffer) => captured.add(chunk),
  );
  // The bookkeeping of a clean end waits a turn, so the client's end is written first (the pipe to the
  // client listens to 'end' after this). An identical request read meanwhile still finds this call in
  // flight and shares its answer; the client's next request is read only after the entry is stored.
  let ended = false;
  res.body.once('end', () => {
    ended = true;
    live?.end();
    setImmediate(finish, 'complete');
  });
  const broken = (): void => {
    if (ended) return;
    live?.fail();
    finish(req.signal.aborted ? 'client-abort' : 'stream-error');
  };
  res.body.once('error', broken);
  res.body.once('close', broken);

  const answerHeaders: Record<string, string | string[]> = Object.assign(clientResponseHeaders(res.headers), base.relayHeaders(a.status));
  const overheadMs = upstreamStart - base.t0 + (performance.now() - headersAt);
  answerHeaders['server-timing'] = `relay;dur=${overheadMs.toFixed(3)}`;
  a.telemetry.exchange({ route: base.route, cacheStatus: a.status, status: res.status, overheadMs, upstreamMs: headersAt - upstreamStart });
  return { status: res.status, headers: answerHeaders, body: res.body };
}
