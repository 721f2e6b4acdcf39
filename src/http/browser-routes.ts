// What a browser asks the relay's root for. Someone who opens http://127.0.0.1:8787 (the address the
// start-up banner shows) means the relay's own page, not the upstream: a page load of `/` (its Accept names
// text/html) is redirected to the dashboard, and /favicon.ico is answered here. Neither goes upstream or
// becomes a report. An API client's GET / (curl, an SDK: no text/html in Accept) is forwarded like any
// other path: the relay cannot know that the upstream has nothing there.
import type { FastifyPluginAsync } from 'fastify';

/** Open without a token (RELAY_API_TOKENS): neither answer holds data, and a browser sends no header. */
export const BROWSER_PATHS = ['/', '/favicon.ico'] as const;

/** Whether fastify answers this request here rather than the proxy (read per proxied request: kept cheap). */
export function isBrowserRequest(method: string | undefined, url: string, accept: string | string[] | undefined): boolean {
  if (method !== 'GET' && method !== 'HEAD') return false;
  // `/`, `/?…`, `/favicon.ico`, `/favicon.ico?…`; anything else returns at the first comparison or two.
  if (url.length > 1 && url.charCodeAt(1) !== 0x3f /* ? */) return url === '/favicon.ico' || url.startsWith('/favicon.ico?');
  return typeof accept === 'string' && accept.toLowerCase().includes('text/html');
}

export const browserRoutes: FastifyPluginAsync = async (app) => {
  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/dashboard/', 302));
  // No icon: 204, cached for a day, so the browser stops asking.
  app.get('/favicon.ico', { schema: { hide: true } }, async (_request, reply) =>
    reply.code(204).header('cache-control', 'public, max-age=86400').send(),
  );
};
