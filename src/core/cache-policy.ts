// What a proxied request asks of the cache (DESIGN §3): RFC 9111 request directives in Cache-Control,
// plus the relay's own x-relay-cache-* headers, against the configured default.
export interface CachePolicy {
  /** look the request up */
  read: boolean;
  /** store a cacheable answer */
  write: boolean;
  /** accept only entries at most this many seconds old */
  maxAgeSec?: number;
  /** a miss is a 504, never an upstream call */
  onlyIfCached: boolean;
  /** TTL of the stored entry */
  ttlSec?: number;
  /** why the cache is skipped (for BYPASS) */
  bypassReason?: string;
}

export interface PolicyInput {
  cacheControl: string | undefined;
  ttlHeader: string | undefined;
  /** x-relay-cache: on|off overrides RELAY_CACHE for one request */
  cacheSwitch: string | undefined;
  cacheOnByDefault: boolean;
  offline: boolean;
}

export function parseCacheControl(header: string | undefined): Map<string, string | true> {
  const out = new Map<string, string | true>();
  if (!header) return out;
  for (const part of header.split(',')) {
    const [rawName, ...rest] = part.split('=');
    const name = rawName?.trim().toLowerCase();
    if (!name) continue;
    const value = rest.join('=').trim().replace(/^"(.*)"$/, '$1');
    out.set(name, rest.length > 0 ? value : true);
  }
  return out;
}

function seconds(v: string | true | undefined): number | undefined {
  if (typeof v !== 'string' || !/^\d{1,10}$/.test(v)) return undefined;
  return Number(v);
}

export function cachePolicy(input: PolicyInput): CachePolicy {
  const cc = parseCacheControl(input.cacheControl);
  const onlyIfCached = cc.has('only-if-cached') || input.offline;
  const switchedOn = input.cacheSwitch?.toLowerCase() === 'on';
  const switchedOff = input.cacheSwitch?.toLowerCase() === 'off';
  const enabled = switchedOn || (!switchedOff && input.cacheOnByDefault);
  const ttl = seconds(input.ttlHeader);
  let policy: CachePolicy;
  if (!enabled) policy = { onlyIfCached, read: onlyIfCached, write: false, bypassReason: 'cache off' };
  else if (cc.has('no-store')) policy = { onlyIfCached, read: false, write: false, bypassReason: 'no-store' };
  else {
    policy = { onlyIfCached, read: !cc.has('no-cache'), write: true };
    const maxAge = seconds(cc.get('max-age'));
    if (maxAge !== undefined) policy.maxAgeSec = maxAge;
  }
  if (ttl !== undefined && ttl > 0) policy.ttlSec = ttl;
  return policy;
}
