// How the dashboard writes numbers, money, times and a report's state. One zone for every time on the page:
// UTC, the zone of the API's day groups (`groupBy=day`) and of the stored timestamps, so two people in
// different places read the same numbers for the same day. The page says so next to every time it shows.
export const ZONE = 'UTC';

export const int = (n) => (n ?? 0).toLocaleString('en-US');
export const pct = (r) => (r == null ? '—' : `${(r * 100).toFixed(1)}%`);
export const ms = (v) => (v == null ? '—' : v < 1000 ? `${Math.round(v)} ms` : `${(v / 1000).toFixed(2)} s`);

/**
 * US dollars: cents from a dollar up ($1.23, $1,234.56); below a dollar three significant digits, so a
 * call that cost a fraction of a cent stays readable ($0.0123, $0.00045, $0.0000258) instead of $0.00.
 */
export function usd(v) {
  if (v == null || !Number.isFinite(v)) return '—';
  const a = Math.abs(v);
  const digits = a >= 1 || a === 0 ? 2 : Math.min(20, Math.max(2, 2 - Math.floor(Math.log10(a))));
  return `$${v.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: digits })}`;
}

const pad = (n, w = 2) => String(n).padStart(w, '0');
const at = (iso) => {
  const d = iso instanceof Date ? iso : new Date(iso);
  return Number.isNaN(d.getTime()) ? null : d;
};

/** `2025-01-03 09:00:00` in UTC, for the table. */
export function time(iso) {
  const d = at(iso);
  if (!d) return '—';
  return `${day(d.getTime())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

/** `2025-01-03 09:00:00.250 UTC`, for one report in full. */
export function instant(iso) {
  const d = at(iso);
  return d ? `${time(d)}.${pad(d.getUTCMilliseconds(), 3)} ${ZONE}` : '—';
}

/** `YYYY-MM-DD` of the UTC day holding the epoch milliseconds `t`, the key of `groupBy=day`. */
export const day = (t) => new Date(t).toISOString().slice(0, 10);

/**
 * Tokens in / out. Counts the relay estimated (a streamed answer that carried no usage) are marked `~`.
 * Returns the text and, when estimated, a tooltip saying so.
 */
export function tokens(usage, withTotal = false) {
  if (!usage) return { text: '—' };
  const mark = usage.estimated === true ? '~' : '';
  const counts = [usage.inputTokens, usage.outputTokens, ...(withTotal ? [usage.totalTokens] : [])];
  const text = counts.map((n) => `${mark}${int(n)}`).join(' / ');
  return mark ? { text, title: 'estimated: the answer carried no token counts, so the relay counted them itself' } : { text };
}

// a Map, not an object: the outcome comes from the report, and `constructor` must not find anything
const OUTCOMES = new Map([
  ['stream-error', 'stream broke'],
  ['client-abort', 'client left'],
  ['upstream-error', 'upstream failed'],
  ['cache-only-miss', 'not in cache'],
]);

/** The status as a row shows it: the code, and how a proxied exchange ended when it did not complete. */
export function statusText(r) {
  const note = OUTCOMES.get(r.proxy?.outcome);
  const code = r.status ?? '—';
  return note ? `${code} · ${note}` : String(code);
}

/**
 * Whether a report counts among the errors, by the rule of the stats' `errors` (src/storage/
 * report-stats-sql.ts): a status of 400 or more, or a proxied stream that broke after its 2xx start.
 */
export const isError = (r) => r.status >= 400 || r.proxy?.outcome === 'stream-error';

/** Where the call went: `POST /v1/chat/completions` for a proxied one, `direct API` for a posted report. */
export function endpoint(r) {
  const p = r.proxy;
  if (!p || typeof p !== 'object') return { method: '', path: 'direct API' };
  return { method: typeof p.method === 'string' ? p.method : '', path: typeof p.path === 'string' ? p.path : '—' };
}

/** hit, miss, bypass, refresh, coalesced (the proxy's answer header), or off / hit / miss for a posted one. */
export function cacheText(r) {
  if (typeof r.proxy?.cacheStatus === 'string') return r.proxy.cacheStatus.toLowerCase();
  if (r.cacheEnabled === false) return 'off';
  return r.cacheHit === true ? 'hit' : r.cacheHit === false ? 'miss' : '—';
}
