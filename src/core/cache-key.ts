// One key function for both paths (DESIGN §4): sha256 over RFC 8785 canonical JSON. For the direct API
// the key object is the `request` as sent, which equals Pezzo's own hash; for the proxy it is
// {method, path, body, vary}. The stored key is `<namespace>:<hash>`.
import { hash } from 'node:crypto';
import { canonicalize } from 'json-canonicalize';

/** Headers whose value changes an upstream answer, so they are part of a proxy key. */
export const VARY_HEADERS = [
  'anthropic-beta',
  'anthropic-version',
  'openai-beta',
  'openai-organization',
  'openai-project',
] as const;

export interface ProxyKeyObject {
  method: string;
  path: string;
  body: unknown;
  vary: Record<string, string>;
}

export function cacheHash(keyObject: unknown): string {
  return hash('sha256', canonicalize(keyObject), 'hex');
}

export function storedKey(namespace: string, hash: string): string {
  return `${namespace}:${hash}`;
}

/** The proxy's key object: only the vary headers that are present, lower-cased names. */
export function proxyKeyObject(
  method: string,
  path: string,
  body: unknown,
  headers: Record<string, string | string[] | undefined>,
): ProxyKeyObject {
  const vary: Record<string, string> = {};
  for (const name of VARY_HEADERS) {
    const v = headers[name];
    if (v !== undefined) vary[name] = Array.isArray(v) ? v.join(', ') : v;
  }
  return { method: method.toUpperCase(), path, body, vary };
}

/** The vary headers a call carries, as one string (part of the memo key of a request's raw bytes). */
export function varyOf(headers: Record<string, string | string[] | undefined>): string {
  let out = '';
  for (const name of VARY_HEADERS) {
    const v = headers[name];
    if (v !== undefined) out += `${name}:${Array.isArray(v) ? v.join(', ') : v}\n`;
  }
  return out;
}
