// A hint for the first hour. The Anthropic SDK pointed at the relay's root (`ANTHROPIC_BASE_URL=
// http://127.0.0.1:8787`, the obvious first try) sends `/v1/messages` to the default route, and that route's
// upstream (api.openai.com unless RELAY_UPSTREAM_URL says otherwise) answers 404: the relay forwards that
// answer unchanged, as it must, and the caller sees an OpenAI "Invalid URL" error with nothing saying why.
// The relay says it once, in its log: such a call is one that sends `anthropic-version` (every Anthropic SDK
// does), went to the default route, and got a 404 from an upstream that is not Anthropic's. A default route
// that serves Anthropic's API itself (a gateway that takes both) answers such calls, so it never hears this.
import type { IncomingHttpHeaders } from 'node:http';
import type { Target } from './routing.js';

export interface HintLog {
  warn(obj: object, msg: string): void;
}

/** Looks at an upstream's refusal (a status of 400 or more) of a proxied call; logs the hint at most once. */
export type RouteHint = (headers: IncomingHttpHeaders, target: Target, status: number) => void;

export function createRouteHint(log: HintLog): RouteHint {
  let told = false;
  return (headers, target, status) => {
    if (told || status !== 404 || target.prefix !== '' || headers['anthropic-version'] === undefined) return;
    if (/(^|\.)anthropic\.com$/i.test(new URL(target.origin).hostname)) return;
    told = true;
    log.warn(
      { upstream: target.origin, path: target.path },
      `an Anthropic call (it sends anthropic-version) went to the default route, and ${target.origin} answered 404. ` +
        'Anthropic needs a named route: a config file (--config) with {"routes":[{"prefix":"/anthropic","upstream":"https://api.anthropic.com"}]} ' +
        '(config/example.json has it), and the client pointed at it: ANTHROPIC_BASE_URL=http://HOST:PORT/anthropic (README, "Anthropic")',
    );
  };
}
