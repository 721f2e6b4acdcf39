// The first-hour hints (src/core/route-hint.ts): an Anthropic client pointed at the relay's root, an OpenAI
// client whose base URL lacks /v1. Each is logged once, and only for the case it names.
import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createRouteHint } from '../../../src/core/route-hint.js';
import { createRouter } from '../../../src/core/routing.js';

function hinted(defaultUpstream = 'https://api.openai.com') {
  const said: { obj: object; msg: string }[] = [];
  const hint = createRouteHint({ warn: (obj, msg) => said.push({ obj, msg }) });
  const route = createRouter([{ prefix: '/anthropic', upstream: 'https://api.anthropic.com' }], defaultUpstream);
  const call = (url: string, headers: IncomingHttpHeaders, status: number) => hint({ url, headers }, route(url), status);
  return { said, call };
}

const anthropic = { 'anthropic-version': '2023-06-01', 'x-api-key': 'sk-ant-secret' };
const openai = { authorization: 'Bearer sk-secret' };

describe('the route hints', () => {
  it('an Anthropic call on the default route refused with 404: logged once, naming the upstream, never the key', () => {
    const { said, call } = hinted();
    call('/v1/messages', anthropic, 404);
    call('/v1/messages', anthropic, 404);
    expect(said).toHaveLength(1);
    expect(said[0]!.obj).toEqual({ upstream: 'https://api.openai.com', path: '/v1/messages' });
    expect(said[0]!.msg).toMatch(/^an Anthropic call \(it sends anthropic-version\) went to the default route, and https:\/\/api\.openai\.com answered 404\./);
    expect(JSON.stringify(said)).not.toContain('sk-ant-secret');
  });

  it('an OpenAI path without /v1 refused with 404: logged once, with the base URL to use', () => {
    const { said, call } = hinted();
    call('/chat/completions', openai, 404);
    call('/embeddings?x=1', openai, 404);
    expect(said).toHaveLength(1);
    expect(said[0]!.obj).toEqual({ upstream: 'https://api.openai.com', path: '/chat/completions' });
    expect(said[0]!.msg).toBe(
      'a call for /chat/completions got 404 from https://api.openai.com: OpenAI\'s paths start with /v1, so an OpenAI client\'s base URL ends with /v1: ' +
        'OPENAI_BASE_URL=http://HOST:PORT/v1 (the call would then be /v1/chat/completions; README, "Quick start")',
    );
    // the other hint is told on its own
    call('/v1/messages', anthropic, 404);
    expect(said).toHaveLength(2);
  });

  it('is not logged for other calls, statuses, routes, or when the default route is Anthropic’s', () => {
    const { said, call } = hinted();
    call('/v1/messages', openai, 404); // neither case
    call('/v1/chat/completions', openai, 404); // a /v1 path: the upstream's own 404 (a model, a file)
    call('/chat/completionsx', openai, 404);
    call('/openai/deployments/d/chat/completions', openai, 404); // Azure's paths
    call('/v1/messages', anthropic, 400); // answered: the path exists
    call('/chat/completions', openai, 401);
    call('/anthropic/v1/nope', anthropic, 404); // a named route's own 404
    call('/anthropic/chat/completions', openai, 404);
    expect(said).toHaveLength(0);
    for (const upstream of ['https://api.anthropic.com', 'https://eu.api.ANTHROPIC.com/base']) {
      const other = hinted(upstream);
      other.call('/v1/nope', anthropic, 404);
      expect(other.said).toHaveLength(0);
    }
    const lookalike = hinted('https://notanthropic.com');
    lookalike.call('/v1/messages', anthropic, 404);
    expect(lookalike.said).toHaveLength(1);
  });
});
