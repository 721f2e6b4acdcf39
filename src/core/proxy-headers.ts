// Header rules of the proxy: what goes upstream, what comes back, which header is the caller's credential,
// and the x-relay-* headers that become report metadata and properties.
import type { IncomingHttpHeaders } from 'node:http';

const HOP_BY_HOP = new Set([
  // Handled by the relay's own server (Node answers 100 Continue); the relay sends the whole body at once,
  // and undici refuses to send the header at all.
  'expect',
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
]);

/** Upstream credentials: forwarded, never stored or logged; the first one present scopes the cache. */
export const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'api-key', 'x-goog-api-key'] as const;

function connectionTokens(headers: IncomingHttpHeaders): Set<string> {
  const c = headers.connection;
  if (!c) return new Set();
  return new Set((Array.isArray(c) ? c.join(',') : c).split(',').map((t) => t.trim().toLowerCase()));
}

/** Request headers for the upstream: no hop-by-hop, no x-relay-*, no host (undici sets it). */
export function upstreamRequestHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const listed = connectionTokens(headers);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || listed.has(name) || name.startsWith('x-relay-')) continue;
    out[name] = value;
  }
  return out;
}

/** Response headers for the client: no hop-by-hop (content-length is kept: the body passes unchanged). */
export function clientResponseHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const listed = connectionTokens(headers);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || listed.has(name) || (HOP_BY_HOP.has(name) && name !== 'content-length')) continue;
    out[name] = value;
  }
  return out;
}

export function credentialOf(headers: IncomingHttpHeaders): string | undefined {
  for (const name of CREDENTIAL_HEADERS) {
    const v = headers[name];
    if (typeof v === 'string' && v.length > 0) return `${name}:${v}`;
  }
  return undefined;
}

/** A header's value, the first one when it came more than once. */
export function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** Whether a content-type is JSON (`application/json`, or any `+json` type), with or without parameters. */
export function isJsonMediaType(contentType: string | undefined): boolean {
  if (contentType === 'application/json') return true; // what SDKs send: no split, no copies
  if (!contentType) return false;
  const mime = contentType.split(';')[0]!.trim().toLowerCase();
  return mime === 'application/json' || mime.endsWith('+json');
}

/** metadata and properties from x-relay-* headers (DESIGN §3). */
export function reportFields(
  headers: IncomingHttpHeaders,
  defaults: { client: string; clientVersion: string; environment: string },
): { metadata: Record<string, string>; properties: Record<string, string> } {
  const metadata: Record<string, string> = {
    client: one(headers['x-relay-client']) ?? defaults.client,
    clientVersion: one(headers['x-relay-client-version']) ?? defaults.clientVersion,
    environment: one(headers['x-relay-environment']) ?? defaults.environment,
  };
  const promptId = one(headers['x-relay-prompt-id']);
  if (promptId) metadata.promptId = promptId;

  const properties: Record<string, string> = {};
  const userId = one(headers['x-relay-user-id']);
  const traceId = one(headers['x-relay-trace-id']);
  if (userId) properties.userId = userId;
  if (traceId) properties.traceId = traceId;
  for (const [name, value] of Object.entries(headers)) {
    if (!name.startsWith('x-relay-property-') || value === undefined) continue;
    const key = name.slice('x-relay-property-'.length);
    if (key) properties[key] = one(value)!;
  }
  return { metadata, properties };
}

/** The request headers a report is built from (metadata and properties), as [name, value] pairs. */
export function relayHeaderPairs(headers: IncomingHttpHeaders): string[][] {
  const out: string[][] = [];
  for (const name in headers) {
    if (name.length < 9 || !name.startsWith('x-relay-')) continue;
    const value = one(headers[name]);
    if (value !== undefined && (REPORT_HEADERS.has(name) || name.startsWith('x-relay-property-'))) out.push([name, value]);
  }
  return out;
}

/** The x-relay-* headers that become report metadata or properties (x-relay-token is never among them). */
const REPORT_HEADERS = new Set([
  'x-relay-client',
  'x-relay-client-version',
  'x-relay-environment',
  'x-relay-prompt-id',
  'x-relay-user-id',
  'x-relay-trace-id',
]);
