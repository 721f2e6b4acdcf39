// The exchange's step into the fleet (storage/fleet-flight.ts), taken by the call that leads a local flight
// (single-flight.ts) once the cache missed: claim the key in the fleet, then lead (make the call and mirror
// its answer to the fleet), or follow another relay's call (fleet-follow.ts), which answers every caller on
// this relay, the first one included, exactly as a local joiner is answered: COALESCED, each with its own
// report.
import type { FleetFlight, FleetLease } from '../storage/fleet-flight.js';
import type { CacheHit } from './cache-service.js';
import type { StoredAnswer } from './cached-response.js';
import { createRemoteFollow } from './fleet-follow.js';
import type { LiveAnswer } from './live-answer.js';
import { ClientGone, type ProxyResponse } from './proxy-types.js';
import type { Flight, Leader } from './single-flight.js';
import type { FleetEvent, Telemetry } from './telemetry.js';

type LocalLeader = Leader<StoredAnswer, LiveAnswer>;
type LocalFlight = Flight<StoredAnswer, LiveAnswer>;

export interface FleetStepArgs {
  key: string;
  /** the local flight this call leads, and the same flight as its joiners see it */
  leader: LocalLeader;
  running: LocalFlight;
  /** whether an entry stored since the lookup answers this call (not when it asks for max-age) */
  entryCheck: boolean;
  lookup(): Promise<CacheHit | undefined>;
  /** answers this call from its local flight as a joiner (live, or the stored result); undefined when it has nothing */
  share(running: LocalFlight): Promise<ProxyResponse | undefined>;
  /** answers this call from an entry */
  hit(hit: CacheHit): ProxyResponse;
}

/** How the call goes on: answered, or upstream itself (holding the fleet's lease, or on this relay alone). */
export type FleetStep =
  | { response: ProxyResponse }
  | { lease?: FleetLease }
  /** the flight it followed had nothing to share: it goes upstream itself, leading a new local flight */
  | { relead: true };

export interface FleetExchange {
  step(args: FleetStepArgs): Promise<FleetStep>;
}

export function createFleetExchange(opts: { flight: FleetFlight; maxBytes: number; telemetry: Telemetry }): FleetExchange {
  const count = (event: FleetEvent): void => opts.telemetry.fleetFlight?.(event);
  return {
    async step(args) {
      const follow = createRemoteFollow({
        leader: args.leader,
        maxBytes: opts.maxBytes,
        readStored: async () => (await args.lookup())?.answer,
      });
      const claim = await opts.flight.claim(args.key, { entryCheck: args.entryCheck, events: follow.events });
      switch (claim.role) {
        case 'lead':
          count('lead');
          return { lease: claim.lease };
        case 'local':
          count('fallback');
          return {};
        case 'stored': {
          // Stored between this call's lookup and its claim: a hit after all.
          count('stored');
          const hit = await args.lookup();
          if (!hit) return {};
          args.leader.settle(hit.answer);
          return { response: args.hit(hit) };
        }
        case 'follow': {
          count('follow');
          follow.attach(claim.follow);
          const next = await follow.outcome;
          if (next.via === 'upstream') {
            count(next.lease ? 'takeover' : 'fallback');
            return next.lease ? { lease: next.lease } : {};
          }
          const shared = await args.share(args.running);
          return shared ? { response: shared } : { relead: true };
        }
      }
    },
  };
}


/**
 * The leader mirrors its streamed answer to the fleet once another relay follows it: the head at once (a
 * follower learns from it that the answer streams), the bytes from the first follower on — the tap hands
 * over the answer so far, then every chunk to the end. Most flights are never followed (a burst of distinct
 * calls): their bytes never go to Redis, where a command for each few chunks of a thousand streams held
 * ~45 MB of the event loop's heap and slowed the Redis connection for every other call. The mirror only
 * watches (a tap): it never keeps the upstream call going by itself. While callers on other relays read the
 * answer, it holds a reader's place in the live answer, so that the call goes on when the callers on this
 * relay leave — as it does for local joiners — and gives that place up once no relay reads any more.
 */
export function mirrorLive(live: LiveAnswer, lease: FleetLease): void {
  lease.head({ status: live.status, headers: live.headers, reportId: live.reportId });
  let tapped = false;
  let held: ClientGone | undefined;
  lease.onRemoteReaders((reading) => {
    if (reading && !tapped) {
      tapped = true;
      live.tap({ chunk: (bytes) => lease.chunk(bytes), end: () => lease.end(), fail: () => lease.fail() });
    }
    if (reading && !held) {
      const gone = new ClientGone();
      const out = live.join(gone, () => {});
      if (!out) return;
      // The bytes go to the fleet through the tap; this reader only keeps its place.
      out.on('error', () => {});
      out.resume();
      held = gone;
    } else if (!reading && held) {
      held.abort();
      held = undefined;
    }
  });
}
