// Concurrent identical cacheable requests make one upstream call: the first (leader) registers a flight
// under the stored key; the others join it. A flight may publish a live answer (a stream the joiners read
// from its first event) as soon as the leader has one, and settles once with its result.
export interface Flight<T, L> {
  /** the live answer when the leader published one; undefined when the flight settled without one */
  started: Promise<L | undefined>;
  /** the flight's result; undefined when it has nothing to share */
  result: Promise<T | undefined>;
}

export interface Leader<T, L> {
  /** the answer can be joined while it streams (at most once, before settle) */
  publish(live: L): void;
  /** exactly once: the result to share, or undefined */
  settle(result: T | undefined): void;
}

export interface SingleFlight<T, L = never> {
  /** the flight running for `key`, or undefined when none is */
  join(key: string): Flight<T, L> | undefined;
  /** become the leader for `key` */
  lead(key: string): Leader<T, L>;
  readonly size: number;
}

/**
 * One flight. Its result is kept only when someone joined it: a flight lives as long as its upstream call
 * (a stream: seconds), long enough for V8 to move it out of its young generation, and an old object that
 * points to a young one keeps it alive through every young collection. A result set on every flight would
 * keep each stored answer's text (15 KB for a streamed one) until a full collection, though nobody reads it.
 */
class RunningFlight<T, L> implements Flight<T, L> {
  readonly started: Promise<L | undefined>;
  start!: (live: L | undefined) => void;
  joined = false;
  private settled: { value: T | undefined } | undefined;
  private resolve: ((result: T | undefined) => void) | undefined;
  private promise: Promise<T | undefined> | undefined;

  constructor() {
    this.started = new Promise<L | undefined>((r) => (this.start = r));
  }

  get result(): Promise<T | undefined> {
    this.promise ??= this.settled ? Promise.resolve(this.settled.value) : new Promise<T | undefined>((r) => (this.resolve = r));
    return this.promise;
  }

  settle(result: T | undefined): void {
    this.start(undefined); // no effect after publish: a promise settles once
    if (!this.joined) return;
    this.settled = { value: result };
    this.resolve?.(result);
  }
}

/**
 * What the map of flights holds: the flight until it settles, then nothing. A Map that takes and lets go of an
 * entry per call leaves its earlier hash tables behind as it grows and shrinks, each still pointing at the
 * entries it had (V8 keeps them for iterators); once such a table is in V8's old generation, what it points
 * at lives until a full collection. A flight points at its live answer, and that at the whole exchange (its
 * closures, request, response and copy): ~16 KB a streamed miss moved to the old generation, measured
 * (docs/benchmarks.md). Through a slot emptied at settle, a table left behind holds a few bytes.
 */
interface Slot<T, L> {
  flight: RunningFlight<T, L> | undefined;
}

export function createSingleFlight<T, L = never>(): SingleFlight<T, L> {
  const flights = new Map<string, Slot<T, L>>();
  return {
    join(key) {
      const flight = flights.get(key)?.flight;
      if (flight) flight.joined = true;
      return flight;
    },
    lead(key) {
      const flight = new RunningFlight<T, L>();
      const slot: Slot<T, L> = { flight };
      flights.set(key, slot);
      let settled = false;
      return {
        publish: (live) => flight.start(live),
        settle(result) {
          if (settled) return;
          settled = true;
          if (flights.get(key) === slot) flights.delete(key);
          slot.flight = undefined;
          flight.settle(result);
        },
      };
    },
    get size() {
      return flights.size;
    },
  };
}
