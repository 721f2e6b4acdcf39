// The fleet flight port (DESIGN §10): identical cacheable calls on any relay that shares one Redis make one
// upstream call. core/fleet-exchange.ts uses it; redis-flight.ts implements it on Redis (a lease per key,
// the leader's streamed answer mirrored into a Redis Stream, followers told through that stream when the
// answer is stored). Within one relay, core/single-flight.ts still does the work: a relay claims a key in
// the fleet once per local flight, never once per caller. Plain data only: no driver types cross here.

/** What a follower needs to answer a streamed answer's callers as a local joiner would be answered. */
export interface LiveHead {
  status: number;
  headers: Record<string, string>;
  /** the leader's report, which every follower's report names as its origin */
  reportId: string;
}

/** The leader's side: this relay holds the key's lease and makes the upstream call. */
export interface FleetLease {
  /** the answer streams and can be joined: followers join it from here */
  head(head: LiveHead): void;
  chunk(bytes: Buffer): void;
  /** the streamed answer ended cleanly */
  end(): void;
  /** the streamed answer broke */
  fail(): void;
  /**
   * The flight is over (exactly once): `stored` resolves to whether its answer is now in the cache. Followers
   * are told, and the lease is given back.
   */
  finish(stored: Promise<boolean> | boolean): void;
  /** told, at the head and at each renewal, whether callers on other relays still read the mirrored answer */
  onRemoteReaders(listener: (reading: boolean) => void): void;
}

/** What a follower is told about the flight it follows, in order. */
export interface FollowEvents {
  head(head: LiveHead): void;
  chunk(bytes: Buffer): void;
  end(): void;
  /** the streamed answer cannot be followed to its end: it broke, outgrew the backlog, or the leader changed */
  fail(why: string): void;
  /** the flight is over: `stored` when its answer is in the cache */
  done(stored: boolean): void;
  /** the leader's lease ran out and this relay holds it now: make the call */
  takeover(lease: FleetLease): void;
  /** Redis failed while following: this relay goes on alone */
  lost(err: unknown): void;
}

export interface FleetFollow {
  /** whether a caller on this relay still reads the followed answer (the leader keeps its call going for it) */
  reading(on: boolean): void;
}

export type FleetClaim =
  /** this relay holds the lease: make the call */
  | { role: 'lead'; lease: FleetLease }
  /** another relay makes the call: the events tell what becomes of it */
  | { role: 'follow'; follow: FleetFollow }
  /** the answer was stored since the lookup missed: read it */
  | { role: 'stored' }
  /** Redis is failing (or this relay is closing): single flight on this relay only */
  | { role: 'local' };

export interface ClaimOptions {
  /** whether an entry stored meanwhile answers the call (false when the call asks for a fresh one, max-age) */
  entryCheck: boolean;
  /** where a follower hears about the flight (unused unless the claim is a follow) */
  events: FollowEvents;
}

export interface FleetFlight {
  /** Never rejects: a Redis that fails or stalls is a `local` claim. */
  claim(key: string, opts: ClaimOptions): Promise<FleetClaim>;
  close(): Promise<void>;
}
