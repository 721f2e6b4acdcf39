// /dashboard: one static page (HTML, three ES modules, a stylesheet, all in dashboard/ at the package root)
// that reads only the public reporting API from the browser. The files are read once, at registration,
// and served with a strict content-security-policy: no inline script or style, nothing from elsewhere.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync } from 'fastify';

/** Same from src/http/ and dist/http/: the package root is two levels up. */
const PACKAGE_ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

export interface DashboardRoutesOptions {
  /** where index.html, the modules and style.css live (default <package root>/dashboard) */
  dir?: string;
}

const FILES = [
  { urls: ['/dashboard', '/dashboard/'], file: 'index.html', type: 'text/html; charset=utf-8' },
  { urls: ['/dashboard/app.js'], file: 'app.js', type: 'text/javascript; charset=utf-8' },
  { urls: ['/dashboard/chart.js'], file: 'chart.js', type: 'text/javascript; charset=utf-8' },
  { urls: ['/dashboard/format.js'], file: 'format.js', type: 'text/javascript; charset=utf-8' },
  { urls: ['/dashboard/style.css'], file: 'style.css', type: 'text/css; charset=utf-8' },
] as const;

/**
 * The page's own files. They hold no data (every number comes from /api with the caller's token), so the
 * token check may leave them open: a browser cannot put a header on a navigation or a <script src>.
 */
export const DASHBOARD_PATHS: readonly string[] = FILES.flatMap((f) => f.urls);

export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const dashboardRoutes: FastifyPluginAsync<DashboardRoutesOptions> = async (app, opts) => {
  const dir = opts.dir ?? join(PACKAGE_ROOT, 'dashboard');
  for (const { urls, file, type } of FILES) {
    const body = readFileSync(join(dir, file));
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    const headers = {
      'content-type': type,
      // no-cache: revalidate every time (cheap, thanks to the etag), so an upgrade is seen at once
      'cache-control': 'no-cache',
      etag,
      'content-security-policy': DASHBOARD_CSP,
      'x-content-type-options': 'nosniff',
      // the page URL may carry ?token=…; never hand it on in a Referer
      'referrer-policy': 'no-referrer',
    };
    for (const url of urls) {
      app.get(url, { schema: { hide: true } }, async (request, reply) => {
        reply.headers(headers);
        if (request.headers['if-none-match'] === etag) return reply.code(304).send();
        return reply.send(body);
      });
    }
  }
};
