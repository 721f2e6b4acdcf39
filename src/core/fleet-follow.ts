// A relay that follows another relay's call (storage/fleet-flight.ts) feeds what it hears into its own
// local flight (single-flight.ts): a streamed answer becomes a live answer on this relay (live-answer.ts)
// that its callers join, a stored answer the flight's result. So the callers here are answered as local
// joiners are, and the relay reads the other's answer once, however many callers it has.
import type { FleetFollow, FleetLease, FollowEvents, LiveHead } from '../storage/fleet-flight.js';
import { type StoredAnswer, answerBytes } from './cached-response.js';
import { type CapturedBody, captureBody } from './captured-body.js';
import { type LiveAnswer, type LiveFeed, createLiveFeed } from './live-answer.js';
import type { Leader } from './single-flight.js';

export type FollowOutcome = { via: 'shared' } | { via: 'upstream'; lease?: FleetLease };

export interface RemoteFollow {
  events: FollowEvents;
  attach(follow: FleetFollow): void;
  /** 'shared' once the local flight has something for its callers (a live answer, or its result) */
  outcome: Promise<FollowOutcome>;
}

export interface RemoteFollowOptions {
  /** the local flight the callers on this relay wait on */
  leader: Leader<StoredAnswer, LiveAnswer>;
  /** bound of the copy kept for callers that join late, and of how far a caller may fall behind */
  maxBytes: number;
  /** the flight's answer, read from the cache once it is stored */
  readStored(): Promise<StoredAnswer | undefined>;
}

/** Feeds another relay's flight into the local one. */
export function createRemoteFollow(opts: RemoteFollowOptions): RemoteFollow {
  let state: 'waiting' | 'live' | 'upstream' | 'settled' = 'waiting';
  let decide!: (o: FollowOutcome) => void;
  const outcome = new Promise<FollowOutcome>((resolve) => (decide = resolve));
  let follow: FleetFollow | undefined;
  let head: LiveHead | undefined;
  let feed: LiveFeed | undefined;
  let copy: CapturedBody | undefined;
  let ended = false;
  let readers = 0;

  function settle(answer: StoredAnswer | undefined): void {
    if (state === 'settled' || state === 'upstream') return;
    state = 'settled';
    opts.leader.settle(answer);
    decide({ via: 'shared' });
  }

  /** The stream the leader stored is the one heard here, byte for byte. */
  function heardAnswer(): StoredAnswer | undefined {
    // the copy read as text (no copy of its bytes of its own, as in forward.ts)
    const payload = copy?.text();
    if (!head || !ended || payload === undefined) return undefined;
    return { status: head.status, headers: head.headers, payload, sse: true, reportId: head.reportId };
  }

  function breakLive(): void {
    feed?.fail();
    settle(undefined);
  }

  /**
   * Parts of a streamed answer were not heard (trimmed from the backlog before they were read, or the
   * mirror stopped): the stored answer makes up the rest, when it continues what the callers already have.
   */
  function catchUp(stored: StoredAnswer | undefined): void {
    if (state !== 'live' || ended) return;
    const have = copy!.bytes();
    const all = stored?.sse ? answerBytes(stored) : undefined;
    if (!stored || !all || !have || all.length < have.length || !all.subarray(0, have.length).equals(have)) return breakLive();
    const rest = all.subarray(have.length);
    if (rest.length > 0) {
      copy!.add(rest);
      feed!.write(rest);
    }
    ended = true;
    feed!.end();
    settle(stored);
  }

  const events: FollowEvents = {
    head(h) {
      if (state !== 'waiting') return;
      state = 'live';
      head = h;
      // (what another relay mirrors is an SSE answer as it came: kept as the leader keeps it, see captured-body.ts)
      copy = captureBody(opts.maxBytes, { events: true });
      feed = createLiveFeed({
        status: h.status,
        headers: h.headers,
        reportId: h.reportId,
        copy: () => copy!.bytes(),
        maxLagBytes: opts.maxBytes,
        enter: () => {
          if (readers++ === 0) follow?.reading(true);
        },
        leave: () => {
          if (--readers === 0) follow?.reading(false);
        },
        // The call runs on another relay: it goes on whoever reads it here.
        reading: () => true,
      });
      opts.leader.publish(feed);
      decide({ via: 'shared' });
    },
    chunk(bytes) {
      if (state !== 'live' || ended) return;
      copy!.add(bytes);
      feed!.write(bytes);
    },
    end() {
      if (state !== 'live' || ended) return;
      ended = true;
      feed!.end();
    },
    fail() {
      // (before the head there is nothing to break: the end of the flight tells the waiters)
      if (state === 'live') breakLive();
    },
    done(stored) {
      if (state !== 'live' && state !== 'waiting') return;
      if (!stored) return breakLive(); // (an answer that ended is not cut: its callers have it all)
      if (state === 'live' && !ended) {
        opts.readStored().then(catchUp, breakLive);
        return;
      }
      const heard = heardAnswer();
      if (heard) return settle(heard);
      opts.readStored().then(settle, () => settle(undefined));
    },
    takeover(lease) {
      if (state === 'waiting') {
        // This relay makes the call now; the local flight is settled by it, as by any local leader.
        state = 'upstream';
        decide({ via: 'upstream', lease });
        return;
      }
      // A streamed answer that started elsewhere cannot go on from another call: its callers are cut off,
      // as local joiners are when the upstream answer breaks, and the lease is given back.
      if (state === 'live') breakLive();
      lease.finish(false);
    },
    lost() {
      if (state === 'waiting') {
        state = 'upstream';
        decide({ via: 'upstream' });
      } else if (state === 'live') breakLive();
    },
  };

  return {
    events,
    outcome,
    attach(f) {
      follow = f;
    },
  };
}
