// Which upstream a proxied path goes to: the longest matching named route (prefix removed), else the
// default route. An upstream URL may carry a base path, which is kept in front.
export interface Route {
  prefix: string;
  upstream: string;
}

export interface Target {
  origin: string;
  /** path and query to send upstream */
  path: string;
  /** the named route's prefix, or '' for the default route */
  prefix: string;
}

export function createRouter(routes: readonly Route[], defaultUpstream: string): (url: string) => Target {
  const table = [...routes]
    .sort((a, b) => b.prefix.length - a.prefix.length)
    .map((r) => ({ prefix: r.prefix, ...split(r.upstream) }));
  const fallback = split(defaultUpstream);

  return (url) => {
    for (const r of table) {
      if (url.startsWith(r.prefix)) {
        const rest = url.slice(r.prefix.length);
        if (rest === '' || rest[0] === '/' || rest[0] === '?') {
          const path = rest === '' || rest[0] === '?' ? `/${rest}` : rest;
          return { origin: r.origin, path: r.base + path, prefix: r.prefix };
        }
      }
    }
    return { origin: fallback.origin, path: fallback.base + url, prefix: '' };
  };
}

function split(upstream: string): { origin: string; base: string } {
  const u = new URL(upstream);
  return { origin: u.origin, base: u.pathname.replace(/\/+$/, '') };
}
