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

export function createSingleFlight<T, L = never>(): SingleFlight<T, L> {
  const flights = new Map<string, Flight<T, L>>();
  return {
    join: (key) => flights.get(key),
    lead(key) {
      let start!: (live: L | undefined) => void;
      let resolve!: (result: T | undefined) => void;
      const flight: Flight<T, L> = {
        started: new Promise<L | undefined>((r) => (start = r)),
        result: new Promise<T | undefined>((r) => (resolve = r)),
      };
      flights.set(key, flight);
      let settled = false;
      return {
        publish: (live) => start(live),
        settle(result) {
          if (settled) return;
          settled = true;
          if (flights.get(key) === flight) flights.delete(key);
          start(undefined); // no effect after publish: a promise settles once
          resolve(result);
        },
      };
    },
    get size() {
      return flights.size;
    },
  };
}
