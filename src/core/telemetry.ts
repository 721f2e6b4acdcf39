// What core tells the outside about its work, as plain calls: the http layer turns them into Prometheus
// metrics. Core never imports a metrics library.
import type { CacheStatus } from './proxy-report.js';

export interface ExchangeObservation {
  /** `default` or a named route's prefix */
  route: string;
  cacheStatus: CacheStatus;
  status: number;
  /** ms the relay itself added before the answer's head went out */
  overheadMs: number;
  /** ms from the upstream request to its response head (misses only) */
  upstreamMs?: number;
}

/**
 * A local flight's step into the fleet (fleet-follow.ts): it led, followed another relay, took over from a
 * relay whose lease ran out, found the answer stored meanwhile, or fell back to this relay alone (Redis failing).
 */
export type FleetEvent = 'lead' | 'follow' | 'takeover' | 'stored' | 'fallback';

export interface Telemetry {
  exchange(o: ExchangeObservation): void;
  cacheFailure(op: 'lookup' | 'save'): void;
  fleetFlight?(event: FleetEvent): void;
}

export const noTelemetry: Telemetry = {
  exchange() {},
  cacheFailure() {},
};
