// Relay access tokens (RELAY_API_TOKENS). Tokens are compared as sha256 digests with timingSafeEqual, so
// neither the token nor its length leaks through timing. On the proxy, `authorization` belongs to the
// upstream, so there only `x-relay-token` counts; `Authorization: Bearer` is taken on /api and /metrics
// (what Prometheus sends).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { RELAY_ERR_UNAUTHORIZED } from '../errors.js';
import { BROWSER_PATHS } from './browser-routes.js';
import { DASHBOARD_PATHS } from './dashboard-routes.js';

// The dashboard's files hold no data (every number comes from /api, which needs the token), and a browser
// cannot put a header on a page load; nor do the redirect of / to them and the empty favicon.
const OPEN_ROUTES = new Set<string>(['/healthz', ...DASHBOARD_PATHS, ...BROWSER_PATHS]);

function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

export function createTokenCheck(tokens: readonly string[]): (presented: string | undefined) => boolean {
  const digests = tokens.map(digest);
  return (presented) => {
    if (presented === undefined || presented.length === 0) return false;
    const d = digest(presented);
    let ok = false;
    for (const t of digests) ok = timingSafeEqual(t, d) || ok; // no early exit
    return ok;
  };
}

/** The relay token a request to `url` presents: x-relay-token, or on /api and /metrics Authorization: Bearer. */
export function presentedToken(headers: IncomingHttpHeaders, url: string): string | undefined {
  const relayToken = headers['x-relay-token'];
  if (typeof relayToken === 'string') return relayToken;
  if (!url.startsWith('/api/') && url !== '/metrics') return undefined;
  const auth = headers.authorization;
  const m = typeof auth === 'string' ? /^Bearer\s+(.+)$/i.exec(auth) : null;
  return m?.[1]?.trim();
}

export function requireTokens(app: FastifyInstance, tokens: readonly string[]): void {
  if (tokens.length === 0) return;
  const check = createTokenCheck(tokens);
  app.addHook('onRequest', async (request) => {
    if (OPEN_ROUTES.has(request.url.split('?')[0]!)) return;
    if (!check(presentedToken(request.headers, request.url))) throw new RELAY_ERR_UNAUTHORIZED();
  });
}
