// Which cache namespace a call belongs to (DESIGN §4). Entries in different namespaces never meet.
import { hash } from 'node:crypto';

export const SHARED_NAMESPACE = 'shared';
export const NAMESPACE_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

/** Direct API: explicit namespace, else the Pezzo project id, else `shared`. */
export function apiNamespace(explicit: string | undefined, pezzoProjectId: string | undefined): string {
  if (explicit) return explicit;
  if (pezzoProjectId && pezzoProjectId !== 'undefined') return `pezzo-${pezzoProjectId}`;
  return SHARED_NAMESPACE;
}

/**
 * Proxy: explicit namespace, else `shared`, else a hash of the caller's upstream credential. Only the hash
 * is kept, never the credential; callers without a credential share the `anonymous` space.
 */
export function proxyNamespace(
  explicit: string | undefined,
  scope: 'credential' | 'shared',
  credential: string | undefined,
): string {
  if (explicit) return explicit;
  if (scope === 'shared') return SHARED_NAMESPACE;
  if (!credential) return 'anonymous';
  return `cred-${hash('sha256', credential, 'hex').slice(0, 32)}`;
}
