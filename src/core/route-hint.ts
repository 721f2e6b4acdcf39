// Hints for the first hour: two mistakes that send a call to a path its upstream does not serve, and that the
// upstream's 404 (which the relay forwards unchanged, as it must) does not explain. Each is said once, as a
// warning in the relay's log:
// - The Anthropic SDK pointed at the relay's root (`ANTHROPIC_BASE_URL=http://127.0.0.1:8787`, the obvious
//   first try) sends `/v1/messages` to the default route, whose upstream (api.openai.com unless
//   RELAY_UPSTREAM_URL says otherwise) answers 404 with an OpenAI "Invalid URL" error. Such a call sends
//   `anthropic-version` (every Anthropic SDK does); a default route that is Anthropic's, or a gateway that
//   serves Anthropic's API too, answers it, so it never hears this.
// - An OpenAI client whose base URL lacks `/v1` (`OPENAI_BASE_URL=http://127.0.0.1:8787`) asks for
//   `/chat/completions`, `/embeddings`, …, which no OpenAI-compatible upstream serves without it.
import type { IncomingHttpHeaders } from 'node:http';
import type { Target } from './routing.js';

export interface HintLog {
  warn(obj: object, msg: string): void;
}

/** Looks at an upstream's refusal (a status of 400 or more) of a proxied call; logs each hint at most once. */
export type RouteHint = (req: { url: string; headers: IncomingHttpHeaders }, target: Target, status: number) => void;

/** OpenAI's resources, as a client whose base URL lacks /v1 asks for them. */
const OPENAI_WITHOUT_V1 =
  /^\/(?:chat\/completions|completions|embeddings|responses|models|moderations|images|audio|files|uploads|batches|fine_tuning|vector_stores|assistants|threads|realtime|conversations)(?:[/?]|$)/;

export function createRouteHint(log: HintLog): RouteHint {
  let toldAnthropic = false;
  let toldV1 = false;
  return (req, target, status) => {
    if (status !== 404 || target.prefix !== '') return;
    if (req.headers['anthropic-version'] !== undefined) {
      if (toldAnthropic || /(^|\.)anthropic\.com$/i.test(new URL(target.origin).hostname)) return;
      toldAnthropic = true;
      log.warn(
        { upstream: target.origin, path: target.path },
        `an Anthropic call (it sends anthropic-version) went to the default route, and ${target.origin} answered 404. ` +
          'Anthropic needs a named route: a config file (--config) with {"routes":[{"prefix":"/anthropic","upstream":"https://api.anthropic.com"}]} ' +
          '(config/example.json has it), and the client pointed at it: ANTHROPIC_BASE_URL=http://HOST:PORT/anthropic (README, "Anthropic")',
      );
      return;
    }
    if (toldV1 || !OPENAI_WITHOUT_V1.test(req.url)) return;
    toldV1 = true;
    const path = req.url.split('?')[0];
    log.warn(
      { upstream: target.origin, path: target.path },
      `a call for ${path} got 404 from ${target.origin}: OpenAI's paths start with /v1, so an OpenAI client's base URL ` +
        `ends with /v1: OPENAI_BASE_URL=http://HOST:PORT/v1 (the call would then be /v1${path}; README, "Quick start")`,
    );
  };
}
