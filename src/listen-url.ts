// The URL of a listening server, as bound and as a client on the same machine opens it: a wildcard
// address (0.0.0.0, ::) accepts connections but is no place to send a browser to.
import type { AddressInfo } from 'node:net';

export interface ListenUrls {
  /** the address as bound, e.g. http://0.0.0.0:8787 */
  bound: string;
  /** one a local client can open, e.g. http://127.0.0.1:8787 */
  local: string;
}

export function listenUrls(address: AddressInfo | string | null): ListenUrls | undefined {
  if (address === null || typeof address === 'string') return undefined; // a pipe, or not listening
  const host = address.address;
  const local = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return { bound: url(host, address.port), local: url(local, address.port) };
}

function url(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
