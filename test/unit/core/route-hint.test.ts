// The first-hour hint for the Anthropic SDK pointed at the relay's root (src/core/route-hint.ts): logged once,
// and only for the case it names.
import { describe, expect, it } from 'vitest';
import { createRouteHint } from '../../../src/core/route-hint.js';
import { createRouter } from '../../../src/core/routing.js';

function hinted(defaultUpstream = 'https://api.openai.com') {
  const said: { obj: object; msg: string }[] = [];
  const hint = createRouteHint({ warn: (obj, msg) => said.push({ obj, msg }) });
  const route = createRouter([{ prefix: '/anthropic', upstream: 'https://api.anthropic.com' }], defaultUpstream);
  return { said, hint, route };
}

const anthropic = { 'anthropic-version': '2023-06-01', 'x-api-key': 'sk-ant-secret' };

describe('the route hint', () => {
  it('is logged once, for a 404 to an Anthropic call on the default route, naming the upstream and never the key', () => {
    const { said, hint, route } = hinted();
    hint(anthropic, route('/v1/messages'), 404);
    hint(anthropic, route('/v1/messages'), 404);
    expect(said).toHaveLength(1);
    expect(said[0]!.obj).toEqual({ upstream: 'https://api.openai.com', path: '/v1/messages' });
    expect(said[0]!.msg).toMatch(/^an Anthropic call \(it sends anthropic-version\) went to the default route, and https:\/\/api\.openai\.com answered 404\./);
    expect(JSON.stringify(said)).not.toContain('sk-ant-secret');
  });

  it('is not logged for other calls, statuses, routes, or when the default route is Anthropic’s', () => {
    const { said, hint, route } = hinted();
    hint({ authorization: 'Bearer sk-x' }, route('/v1/messages'), 404); // not an Anthropic SDK's call
    hint(anthropic, route('/v1/messages'), 400); // answered: the path exists
    hint(anthropic, route('/v1/messages'), 401);
    hint(anthropic, route('/anthropic/v1/nope'), 404); // a named route's own 404
    expect(said).toHaveLength(0);
    for (const upstream of ['https://api.anthropic.com', 'https://eu.api.ANTHROPIC.com/base']) {
      const other = hinted(upstream);
      other.hint(anthropic, other.route('/v1/nope'), 404);
      expect(other.said).toHaveLength(0);
    }
    const gateway = hinted('https://notanthropic.com');
    gateway.hint(anthropic, gateway.route('/v1/messages'), 404);
    expect(gateway.said).toHaveLength(1);
  });
});
