// The Redis side of the fleet flight (redis-flight.ts), shared by its leader and follower halves: the key
// names, the Lua scripts (each one atomic step), and the link: every command with the store's deadline,
// and the relay's view of whether Redis works (after a failure, calls skip the fleet for a moment).
import { createHash } from 'node:crypto';
import { withDeadline } from './redis-cache-store.js';
import type { RedisCommandClient } from './redis-cache-store.js';

/** Entries a flight's stream keeps (about): with maxBytes, the bound of its backlog. */
export const STREAM_MAXLEN = 4096;
/** How long a finished flight's stream stays, for a follower still reading its tail. */
export const LINGER_MS = 5_000;
/** The reader's longest block; it is woken at once when it has one more stream to read. */
export const BLOCK_MS = 30_000;
/** After Redis failed, calls skip the fleet this long (single flight per relay meanwhile). */
const PAUSE_MS = 1_000;

/** The keys of one relay's flights, under the cache store's prefix (see redis-flight.ts). */
export function flightKeys(prefix: string, instance: string) {
  const wakePrefix = `${prefix}flight-wake:`;
  return {
    lease: (key: string): string => `${prefix}flight:${key}`,
    stream: (key: string, token: string): string => `${prefix}flight-stream:${key}:${token}`,
    readersPrefix: (key: string): string => `${prefix}flight-readers:${key}:`,
    readers: (key: string, token: string): string => `${prefix}flight-readers:${key}:${token}`,
    wakePrefix,
    /** a relay's wake stream; a token's relay is the part before its dot */
    wake: (relay: string = instance): string => `${wakePrefix}${relay}`,
  };
}

export type FlightKeys = ReturnType<typeof flightKeys>;

export interface Script {
  text: string;
  sha: string;
}

function script(text: string): Script {
  return { text, sha: createHash('sha1').update(text).digest('hex') };
}

// KEYS: lease, entry. ARGV: token, lease ms, instance, readers-key prefix, check the entry (1/0), wake-key
// prefix, wake ms. → {'stored'} | {'won'} | {'held', holder token, ms left}. A follower joins the holder's
// reader set and wakes the holder's relay, which then keeps a streamed call going for it (redis-flight-lease.ts).
export const CLAIM = script(`
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then return {'stored'} end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {'won'} end
local holder = redis.call('GET', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if not holder then return {'held', '', 0} end
local readers = ARGV[4] .. holder
redis.call('SADD', readers, ARGV[3])
redis.call('PEXPIRE', readers, ARGV[2] * 2)
local relay = string.match(holder, '^([^.]+)%.')
if relay then
  redis.call('XADD', ARGV[6] .. relay, 'MAXLEN', '~', 16, '*', 'r', holder)
  redis.call('PEXPIRE', ARGV[6] .. relay, ARGV[7])
end
return {'held', holder, ttl}
`);

// KEYS: lease, stream, readers. ARGV: token, lease ms. → -1 when the lease is no longer ours, else the
// number of relays following.
export const RENEW = script(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2] * 2)
redis.call('PEXPIRE', KEYS[3], ARGV[2] * 2)
return redis.call('SCARD', KEYS[3])
`);

// KEYS: lease, stream, readers. ARGV: token, stored (1/0), seq, linger ms, maxlen. The outcome, then the
// lease given back, in one step: a follower that finds the lease gone finds the outcome (or the entry).
export const FINISH = script(`
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 't', 'd', 'n', ARGV[3], 's', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`);

// KEYS: lease. ARGV: token. Gives back a lease only while it is ours.
export const RELEASE = script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`);

export function describe(err: unknown): string {
  return err instanceof Error ? err.message || err.name : String(err);
}

export interface RedisLink {
  command(args: ReadonlyArray<string | Buffer>): Promise<unknown>;
  /** a script by its sha (loaded on first use) */
  run(s: Script, keys: string[], args: Array<string | number>): Promise<unknown>;
  ok(): void;
  failed(err: unknown): void;
  /** true for a moment after a failure: calls keep to single flight per relay meanwhile */
  paused(): boolean;
  closing(): void;
}

export function createRedisLink(
  client: RedisCommandClient,
  timeoutMs: number,
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void },
): RedisLink {
  let healthy = true;
  let closed = false;
  let pausedUntil = 0;
  const command = (args: ReadonlyArray<string | Buffer>): Promise<unknown> =>
    withDeadline(client.sendCommand(args), timeoutMs, `Redis ${String(args[0])}`);
  return {
    command,
    async run(s, keys, args) {
      const tail = [String(keys.length), ...keys, ...args.map(String)];
      try {
        return await command(['EVALSHA', s.sha, ...tail]);
      } catch (err) {
        if (!describe(err).startsWith('NOSCRIPT')) throw err;
        return command(['EVAL', s.text, ...tail]);
      }
    },
    ok() {
      if (healthy) return;
      healthy = true;
      log.info({}, 'Redis answers again: single flight across relays resumes');
    },
    failed(err) {
      pausedUntil = Date.now() + PAUSE_MS;
      if (!healthy || closed) return;
      healthy = false;
      log.warn({ err: describe(err) }, 'Redis failed: single flight per relay until it answers again');
    },
    paused: () => Date.now() < pausedUntil,
    closing() {
      closed = true;
    },
  };
}
