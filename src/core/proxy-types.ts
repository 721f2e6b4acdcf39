// The plain data that crosses between the http layer and core/exchange on the proxy path.
import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { CachedResponse } from './cached-response.js';
import type { RelayErrorFacts } from './error-answer.js';
import type { LiveAnswer } from './live-answer.js';
import type { CacheStatus, ExchangeFacts } from './proxy-report.js';
import type { SingleFlight } from './single-flight.js';

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
  body: Readable | string;
  /** set when the relay made this answer itself (an error in the provider's shape, see error-answer.ts) */
  relayError?: RelayErrorFacts;
}

/** What every report and answer of one exchange shares. */
export interface Base {
  id: string;
  t0: number;
  /** `default` or the named route's prefix */
  route: string;
  facts: Omit<ExchangeFacts, 'endedAt' | 'status' | 'responseBody' | 'streamed' | 'cacheStatus' | 'outcome'>;
  relayHeaders(status: CacheStatus): Record<string, string>;
}

type OwnFacts = Omit<ExchangeFacts, keyof Base['facts']>;

/**
 * The facts of one outcome: the exchange's shared facts plus the outcome's own. Object.assign rather than
 * a spread with more properties after it, which V8 builds by a slow path (µs per object, on every call).
 */
export function exchangeFacts(base: Base, own: OwnFacts & Partial<ExchangeFacts>): ExchangeFacts {
  return Object.assign({}, base.facts, own);
}

export interface Exchange {
  handle(req: ProxyRequest): Promise<ProxyResponse>;
  readonly inflight: SingleFlight<CachedResponse, LiveAnswer>;
}
