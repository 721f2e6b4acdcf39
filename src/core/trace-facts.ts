// An exchange's place in a trace, as plain data. Core never sees OpenTelemetry: with tracing on, the relay
// gives the exchange an ExchangeTracing (src/tracing/exchange-tracer.ts) that reads the client's
// traceparent and names the spans; the exchange only notes times and ids here. The facts travel with the
// exchange's record to the report worker, which builds the spans once the report says what the answer
// held (model, tokens, finish reasons) and exports them there, off the event loop.
import type { IncomingHttpHeaders } from 'node:http';

export interface TraceFacts {
  traceId: string;
  /** the relay's span for the exchange (SERVER) */
  spanId: string;
  /** the client's span, when the call came with a traceparent */
  parentSpanId?: string;
  /** W3C trace flags of the parent (the relay's own spans are sampled, or there are no facts at all) */
  parentFlags?: number;
  /** the client's tracestate, passed on as it came (validated) */
  traceState?: string;
  /** epoch ms (fractional): the request arrived / the exchange ended */
  start: number;
  end?: number;
  /** the cache namespace the exchange used */
  namespace?: string;
  /** the upstream call (a CLIENT child span); absent for hits and calls answered by another */
  upstream?: UpstreamTrace;
  /** epoch ms of the answer's first chunk (streams) */
  firstChunk?: number;
  /** the call whose live answer a coalesced call joined */
  leader?: { traceId: string; spanId: string };
}

export interface UpstreamTrace {
  spanId: string;
  start: number;
  end?: number;
  /** the upstream's answer status, once its head came */
  status?: number;
  /** the relay's error code when the upstream could not be reached */
  error?: string;
}

export interface ExchangeTracing {
  /**
   * The trace facts of an exchange that arrived at `t0` (performance.now()), joining the client's trace
   * when it sent a traceparent; undefined when the sampler leaves it out (then nothing about it is traced).
   */
  begin(headers: IncomingHttpHeaders, method: string, t0: number): TraceFacts | undefined;
  /** Starts the upstream call's span and sets the traceparent (and tracestate) that goes upstream with it. */
  upstream(trace: TraceFacts, headers: Record<string, string | string[]>): void;
}

/** Epoch ms, fractional, on the same clock as performance.now() (no Date call). */
export function epochMs(now: number): number {
  return performance.timeOrigin + now;
}
