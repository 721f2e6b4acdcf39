// The leader's side of a fleet flight (redis-flight.ts): the relay that holds a key's lease renews it while
// its call runs, mirrors a streamed answer into the flight's Redis Stream, says how the flight ended, and
// gives the lease back — the outcome and the release in one step (FINISH), so a follower that finds the
// lease gone finds the outcome too.
import type { FleetLease, LiveHead } from './fleet-flight.js';
import { FINISH, type FlightKeys, LINGER_MS, RENEW, type RedisLink, STREAM_MAXLEN } from './redis-flight-scripts.js';

export interface LeaseContext {
  link: RedisLink;
  keys: FlightKeys;
  leaseMs: number;
  /** most bytes of one answer mirrored (RELAY_CACHE_MAX_ENTRY_BYTES): the backlog's bound */
  maxBytes: number;
  /**
   * While the answer streams, the relay's reader tells this flight when a relay starts or stops following
   * it (a follower's claim wakes it); undefined stops that.
   */
  listen(token: string, recheck: (() => void) | undefined): void;
}

/** What goes into the stream, in order: head, chunks, end | fail | cut (x), done. */
type Item = { t: 'h'; head: LiveHead } | { t: 'c'; parts: Buffer[] } | { t: 'e' | 'f' | 'x' } | { t: 'd'; stored: boolean };

export function createLease(ctx: LeaseContext, key: string, token: string): FleetLease & { stop(): void } {
  const { link, keys, leaseMs } = ctx;
  const lease = keys.lease(key);
  const stream = keys.stream(key, token);
  const readers = keys.readers(key, token);
  let seq = 0;
  let bytes = 0;
  let mirroring = true;
  let headSent = false;
  let finished = false;
  let listener: ((reading: boolean) => void) | undefined;
  const queue: Item[] = [];
  let busy = false;

  const renewal = setInterval(() => {
    link.run(RENEW, [lease, stream, readers], [token, leaseMs]).then(
      (n) => {
        link.ok();
        if (Number(n) === -1) {
          // Another relay holds it now (this one stalled past the lease): it makes the call for the
          // followers; this one still answers its own callers, and stops mirroring.
          mirroring = false;
          clearInterval(renewal);
        } else if (headSent) listener?.(Number(n) > 0);
      },
      // The next renewal tries again; if the lease runs out meanwhile, a follower takes over.
      (err: unknown) => link.failed(err),
    );
  }, Math.max(30, Math.floor(leaseMs / 3)));
  renewal.unref();

  /** Whether any relay still follows: asked at the head, when a follower comes or goes, and at each renewal. */
  const recheck = (): void => {
    link.command(['SCARD', readers]).then(
      (count) => listener?.(Number(count) > 0),
      (err: unknown) => link.failed(err),
    );
  };

  function push(item: Item): void {
    if (!mirroring && item.t !== 'd') return;
    const last = queue[queue.length - 1];
    if (item.t === 'c' && last?.t === 'c') last.parts.push(...item.parts);
    else queue.push(item);
    void pump();
  }

  // One batch on its way at a time: what arrives meanwhile goes as one entry with the next, so a fast
  // stream costs one XADD per round trip, not one per chunk, and the first chunk goes at once.
  async function pump(): Promise<void> {
    if (busy || queue.length === 0) return;
    busy = true;
    const items = queue.splice(0);
    try {
      await Promise.all(items.map(send));
      link.ok();
    } catch (err) {
      link.failed(err);
      mirroring = false;
    }
    busy = false;
    void pump();
  }

  function send(item: Item): Promise<unknown> {
    const n = String(seq++);
    if (item.t === 'd') return link.run(FINISH, [lease, stream, readers], [token, item.stored ? 1 : 0, n, LINGER_MS, STREAM_MAXLEN]);
    const args: Array<string | Buffer> = ['XADD', stream, 'MAXLEN', '~', String(STREAM_MAXLEN), '*', 't', item.t, 'n', n];
    if (item.t === 'c') args.push('b', item.parts.length === 1 ? item.parts[0]! : Buffer.concat(item.parts));
    if (item.t !== 'h') return link.command(args);
    args.push('b', Buffer.from(JSON.stringify(item.head)));
    return Promise.all([
      link.command(args),
      link.command(['PEXPIRE', stream, String(leaseMs * 2)]),
      link.command(['SCARD', readers]).then((count) => listener?.(Number(count) > 0)),
    ]);
  }

  return {
    head(head) {
      headSent = true;
      push({ t: 'h', head });
      // Followers that come later wake this relay's reader (see CLAIM): it listens while the answer streams.
      ctx.listen(token, recheck);
    },
    chunk(chunk) {
      if (!mirroring) return;
      bytes += chunk.length;
      if (bytes > ctx.maxBytes) {
        push({ t: 'x' });
        mirroring = false;
        return;
      }
      push({ t: 'c', parts: [chunk] });
    },
    end: () => push({ t: 'e' }),
    fail: () => push({ t: 'f' }),
    finish(stored) {
      if (finished) return;
      finished = true;
      clearInterval(renewal);
      ctx.listen(token, undefined);
      Promise.resolve(stored).then(
        (s) => push({ t: 'd', stored: s }),
        () => push({ t: 'd', stored: false }),
      );
    },
    onRemoteReaders(l) {
      listener = l;
    },
    stop() {
      clearInterval(renewal);
      ctx.listen(token, undefined);
    },
  };
}
