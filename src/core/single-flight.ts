// Concurrent identical cacheable requests make one upstream call: the first (leader) registers a promise
// under the stored key; the others wait for it and are answered from what it got.
export interface SingleFlight<T> {
  /** the in-flight call's result, or undefined when none is running */
  join(key: string): Promise<T | undefined> | undefined;
  /** become the leader for `key`; call `settle` exactly once with the result (undefined: nothing to share) */
  lead(key: string): (result: T | undefined) => void;
  readonly size: number;
}

export function createSingleFlight<T>(): SingleFlight<T> {
  const inflight = new Map<string, Promise<T | undefined>>();
  return {
    join: (key) => inflight.get(key),
    lead(key) {
      let resolve!: (v: T | undefined) => void;
      const p = new Promise<T | undefined>((r) => (resolve = r));
      inflight.set(key, p);
      let settled = false;
      return (result) => {
        if (settled) return;
        settled = true;
        if (inflight.get(key) === p) inflight.delete(key);
        resolve(result);
      };
    },
    get size() {
      return inflight.size;
    },
  };
}
