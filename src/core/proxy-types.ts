// The plain data that crosses between the http layer and core/exchange on the proxy path.
import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { RelayErrorFacts } from './error-answer.js';
import type { ProxyFacts, WireBytes } from './exchange-record.js';
import type { CacheStatus } from './proxy-report.js';
import type { TraceFacts } from './trace-facts.js';

export interface ProxyRequest {
  method: string;
  /** path and query as received */
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer | undefined;
  /** aborted when the client goes away */
  signal: ClientGone;
}

/**
 * Tells the upstream call that its client went away: `aborted`, and one 'abort' event. undici takes an
 * EventEmitter as a request's signal; an AbortController costs about 8 µs more per call (EventTarget).
 */
export class ClientGone extends EventEmitter {
  aborted = false;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.emit('abort');
  }
}

export interface ProxyResponse {
  status: number;
  headers: Record<string, string | string[]>;
  body: Readable | string | Buffer;
  /** set when the relay made this answer itself (an error in the provider's shape, see error-answer.ts) */
  relayError?: RelayErrorFacts;
}

/** What every report and answer of one exchange shares. */
export interface Base {
  id: string;
  /** performance.now() at arrival */
  t0: number;
  /** `default` or the named route's prefix */
  route: string;
  relayHeaders(status: CacheStatus): Record<string, string>;
  /** with tracing on, and the exchange sampled */
  trace?: TraceFacts;
  /** hands the exchange's one record to the report service (its report is built on the report worker) */
  record(own: OwnFacts, response?: WireBytes): void;
}

/** The facts of one outcome; the rest of a record's facts are the exchange's own. */
export type OwnFacts = Pick<ProxyFacts, 'endedAt' | 'status' | 'cacheStatus' | 'outcome' | 'streamed'> &
  Partial<Pick<ProxyFacts, 'originReportId' | 'costSavedUsd' | 'upstreamMs' | 'error' | 'encoding'>>;

export interface Exchange {
  handle(req: ProxyRequest): Promise<ProxyResponse>;
  /**
   * Upstream calls whose answers have not ended (those the cache is off for too): how the report service
   * tells a burst of streams from steady traffic (report-service.ts, BURST_OPEN).
   */
  readonly openCalls: number;
}
