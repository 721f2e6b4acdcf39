// Single flight across the relays on one Redis (the port: fleet-flight.ts; how and why: docs/internals.md).
// This file: claims, and the follower side with its reader; the leader is redis-flight-lease.ts, the key
// names and Lua scripts are in redis-flight-scripts.ts.
//
// Keys, under the cache store's prefix P (`llm-relay:`; its entries are `llm-relay::<ns>:<hash>`, so none
// of these is ever taken for an entry):
//   P flight:<ns>:<hash>                   the lease: the token of the flight that holds it (SET NX PX),
//                                          renewed while the call runs, deleted when it is over
//   P flight-stream:<ns>:<hash>:<token>    the flight's Redis Stream: a streamed answer's head, its bytes and
//                                          its end, then the flight's outcome (`done`, stored or not);
//                                          trimmed (MAXLEN ~), expiring shortly after the outcome
//   P flight-readers:<ns>:<hash>:<token>   the relays following the flight (a set): its leader keeps a
//                                          streamed call going for them when its own callers have left
//   P flight-wake:<instance>               wakes this relay's reader: it follows one more flight, or a
//                                          flight it leads has gained or lost a following relay
//
// Connections: commands go on the cache store's connection; one more, the reader, blocks in XREAD on every
// stream this relay follows at once. A follower is told (it does not poll) and reads everything said
// since the flight began, so no message can be missed between "the lease is held" and "listening": the
// stream keeps it. A follower checks the lease once when it should run out (a timer per followed flight,
// never per caller): when its relay died, one follower claims it and makes the call.
import { randomBytes } from 'node:crypto';
import { RESP_TYPES } from '@redis/client';
import type { FleetClaim, FleetFlight, FollowEvents, LiveHead } from './fleet-flight.js';
import { type RedisConnection, withDeadline } from './redis-cache-store.js';
import { createLease } from './redis-flight-lease.js';
import { BLOCK_MS, CLAIM, RELEASE, createRedisLink, describe, flightKeys } from './redis-flight-scripts.js';

export interface RedisFlightOptions extends RedisConnection {
  /** lease length (RELAY_FLEET_LEASE_MS); renewed every third of it while the call runs */
  leaseMs: number;
  /** deadline of each command (RELAY_STORE_TIMEOUT_MS): a slower Redis counts as failing */
  timeoutMs: number;
  /** most bytes of one answer mirrored into its stream (RELAY_CACHE_MAX_ENTRY_BYTES) */
  maxBytes: number;
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
  /** names this relay in leases and reader sets (random by default) */
  instanceId?: string;
}

/** A follower checks the lease this long after it should have run out. */
const EXPIRY_MARGIN_MS = 25;

const BUFFERS = { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } };

/** One flight this relay follows (at most one per flight: its callers share it through the local flight). */
interface Following {
  key: string;
  token: string;
  stream: string;
  /** the last stream entry read */
  lastId: string;
  /** the sequence number the next entry must carry */
  seq: number;
  /** a part of the stream was trimmed before it was read: only the outcome still counts */
  skipping: boolean;
  events: FollowEvents;
  timer?: NodeJS.Timeout;
}

type XReadReply = Array<[Buffer, Array<[Buffer, Buffer[]]>]>;

const LOCAL: FleetClaim = { role: 'local' };

export async function createRedisFlight(opts: RedisFlightOptions): Promise<FleetFlight> {
  const { client, leaseMs, timeoutMs, log } = opts;
  const instance = opts.instanceId ?? randomBytes(6).toString('hex');
  const keys = flightKeys(opts.keyPrefix, instance);
  const link = createRedisLink(client, timeoutMs, log);
  const wakeKey = keys.wake();
  let tokens = 0;
  const newToken = (): string => `${instance}.${(++tokens).toString(36)}`;
  const claimArgs = (token: string, key: string, entryCheck: boolean) => [
    token,
    leaseMs,
    instance,
    keys.readersPrefix(key),
    entryCheck ? 1 : 0,
    keys.wakePrefix,
    BLOCK_MS * 2,
  ];

  let closed = false;
  const follows = new Map<string, Following>();
  /** streamed flights this relay leads, by token: told when a relay starts or stops following one */
  const listening = new Map<string, () => void>();
  const leases = new Set<{ stop(): void }>();

  // ── the reader: one connection, one XREAD for every followed stream ──
  const reader = client.duplicate();
  reader.on('error', () => {}); // connection problems surface as the blocked read failing
  try {
    await withDeadline(reader.connect(), timeoutMs * 4, 'Redis');
  } catch (err) {
    // It keeps reconnecting by itself; until it is ready, calls keep to single flight per relay.
    link.failed(err);
  }
  let reading = false;
  let blocked = false;
  let wakeId = '0-0';

  /** Wakes a relay's reader (this one's by default), naming a flight it leads when there is one. */
  function wake(relay = instance, token?: string): void {
    if (relay === instance && (!blocked || token !== undefined)) return;
    const key = keys.wake(relay);
    link.command(['XADD', key, 'MAXLEN', '~', '16', '*', ...(token ? ['r', token] : ['w', '1'])]).catch(() => {});
    link.command(['PEXPIRE', key, String(BLOCK_MS * 2)]).catch(() => {});
  }

  const busy = (): boolean => (follows.size > 0 || listening.size > 0) && !closed;

  /** Runs the reader while there is something to read; a blocked read is woken for a stream it lacks. */
  function read(): void {
    if (reading) return wake();
    reading = true;
    void (async () => {
      try {
        while (busy()) {
          const list = [...follows.values()];
          const args = ['XREAD', 'BLOCK', String(BLOCK_MS), 'STREAMS', wakeKey, ...list.map((f) => f.stream), wakeId, ...list.map((f) => f.lastId)];
          let reply: unknown;
          blocked = true;
          try {
            reply = await reader.sendCommand(args, BUFFERS);
          } catch (err) {
            blocked = false;
            link.failed(err);
            for (const f of [...follows.values()]) lose(f, err);
            break;
          }
          blocked = false;
          if (reply) dispatch(reply as XReadReply);
        }
      } finally {
        reading = false;
        if (busy()) read();
      }
    })();
  }

  function dispatch(reply: XReadReply): void {
    for (const [name, entries] of reply) {
      const stream = name.toString();
      if (stream === wakeKey) {
        for (const [id, fields] of entries) {
          wakeId = id.toString();
          // A relay started or stopped following a flight this one leads.
          if (fields[0]?.toString() === 'r' && fields[1]) listening.get(fields[1].toString())?.();
        }
        continue;
      }
      for (const [id, fields] of entries) {
        const f = follows.get(stream);
        if (!f) break;
        f.lastId = id.toString();
        const field = (name: string): Buffer | undefined => {
          for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i]!.toString() === name) return fields[i + 1];
          return undefined;
        };
        try {
          heard(f, field('t')?.toString() ?? '', Number(field('n')?.toString()), field('b'), field('s')?.toString() === '1');
        } catch (err) {
          log.warn({ err: describe(err) }, 'fleet flight: a follower failed on what it heard');
        }
      }
    }
  }

  function heard(f: Following, t: string, n: number, b: Buffer | undefined, stored: boolean): void {
    if (t === 'd') {
      drop(f);
      return f.events.done(stored);
    }
    if (f.skipping) return;
    if (n !== f.seq) {
      // Trimmed before it was read (a very long answer, or a slow reader): the rest is not joined; the
      // outcome still comes, and the stored answer makes up what was missed.
      f.skipping = true;
      return;
    }
    f.seq++;
    if (t === 'h') {
      let head: LiveHead;
      try {
        head = JSON.parse(b!.toString()) as LiveHead;
      } catch {
        f.skipping = true;
        return;
      }
      f.events.head(head);
    } else if (t === 'c' && b) f.events.chunk(b);
    else if (t === 'e') f.events.end();
    else if (t === 'f') f.events.fail('the answer broke on the relay making the call');
    else if (t === 'x') f.events.fail('the answer outgrew RELAY_CACHE_MAX_ENTRY_BYTES');
  }

  function drop(f: Following): void {
    clearTimeout(f.timer);
    if (follows.get(f.stream) === f) follows.delete(f.stream);
  }

  function lose(f: Following, err: unknown): void {
    drop(f);
    f.events.lost(err);
  }

  /** Checks the lease once when it should have run out (the leader renews it long before, while alive). */
  function arm(f: Following, ttl: number): void {
    clearTimeout(f.timer);
    // (a lease without an expiry is not one of ours: look again after a lease, never in a tight loop)
    f.timer = setTimeout(() => void check(f), (ttl > 0 ? ttl : leaseMs) + EXPIRY_MARGIN_MS);
    f.timer.unref();
  }

  async function check(f: Following): Promise<void> {
    if (follows.get(f.stream) !== f || closed) return;
    const token = newToken();
    let reply: unknown;
    try {
      reply = await link.run(CLAIM, [keys.lease(f.key), opts.entryKey(f.key)], claimArgs(token, f.key, true));
      link.ok();
    } catch (err) {
      link.failed(err);
      if (follows.get(f.stream) === f) lose(f, err);
      return;
    }
    const [what, holder, ttl] = reply as [string, string, number];
    if (follows.get(f.stream) !== f) {
      // It ended while the claim was on its way.
      if (what === 'won') link.run(RELEASE, [keys.lease(f.key)], [token]).catch(() => {});
      return;
    }
    if (what === 'stored') {
      drop(f);
      return f.events.done(true);
    }
    if (what === 'won') {
      drop(f);
      return f.events.takeover(lead(f.key, token));
    }
    if (holder === f.token || holder === '') return arm(f, Number(ttl));
    // Another relay took over from the one that is gone.
    if (f.seq > 0) {
      drop(f);
      return f.events.fail('the relay making the call is gone');
    }
    follows.delete(f.stream);
    Object.assign(f, { token: holder, stream: keys.stream(f.key, holder), lastId: '0-0', seq: 0, skipping: false });
    if (follows.has(f.stream)) return lose(f, new Error('already following the new leader'));
    follows.set(f.stream, f);
    arm(f, Number(ttl));
    read();
  }

  // ── the leader (redis-flight-lease.ts) ──
  function lead(key: string, token: string) {
    const lease = createLease(
      {
        link,
        keys,
        leaseMs,
        maxBytes: opts.maxBytes,
        listen(t, recheck) {
          if (!recheck) {
            listening.delete(t);
            leases.delete(lease);
            return;
          }
          listening.set(t, recheck);
          if (!reading) read();
        },
      },
      key,
      token,
    );
    leases.add(lease);
    return lease;
  }

  return {
    async claim(key, { entryCheck, events }) {
      if (closed || link.paused() || !reader.isReady) return LOCAL;
      const token = newToken();
      let reply: unknown;
      try {
        reply = await link.run(CLAIM, [keys.lease(key), opts.entryKey(key)], claimArgs(token, key, entryCheck));
        link.ok();
      } catch (err) {
        link.failed(err);
        return LOCAL;
      }
      const [what, holder, ttl] = reply as [string, string, number];
      if (what === 'stored') return { role: 'stored' };
      if (what === 'won') return { role: 'lead', lease: lead(key, token) };
      const stream = keys.stream(key, holder);
      // (one follower per flight on a relay: its callers share it through their local flight)
      if (holder === '' || follows.has(stream)) return LOCAL;
      const f: Following = { key, token: holder, stream, lastId: '0-0', seq: 0, skipping: false, events };
      follows.set(stream, f);
      arm(f, Number(ttl));
      read();
      const readersKey = keys.readers(key, holder);
      return {
        role: 'follow',
        follow: {
          reading(on) {
            if (f.token !== holder) return;
            link.command([on ? 'SADD' : 'SREM', readersKey, instance]).catch(() => {});
            if (on) link.command(['PEXPIRE', readersKey, String(leaseMs * 2)]).catch(() => {});
            wake(holder.slice(0, holder.indexOf('.')), holder);
          },
        },
      };
    },

    async close() {
      if (closed) return;
      closed = true;
      link.closing();
      for (const f of [...follows.values()]) lose(f, new Error('the relay is closing'));
      for (const l of leases) l.stop();
      leases.clear();
      // A blocked read would hold the connection for BLOCK_MS: closed at once instead.
      try {
        reader.destroy();
      } catch {
        // (already closed)
      }
    },
  };
}
