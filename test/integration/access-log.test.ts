// The access log: one line per answered request at info (with its method, url, status and time), the
// arrival only at debug, and the dashboard's ?token= blanked out of the url.
import { afterEach, describe, expect, it } from 'vitest';
import { type TestRelay, startRelay } from '../helpers/relay.js';

const relays: TestRelay[] = [];
afterEach(async () => {
  for (const r of relays.splice(0)) await r.close();
});

function lines(relay: TestRelay): Array<Record<string, unknown>> {
  return relay.logs.flatMap((chunk) => chunk.split('\n').filter(Boolean)).map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('access log', () => {
  it('writes one line per request at info, when it is answered', async () => {
    const relay = await startRelay();
    relays.push(relay);
    const res = await fetch(`${relay.url}/healthz?token=secret-dash-token&x=1`);
    expect(res.status).toBe(200);
    await fetch(`${relay.url}/api/nothing-here`);
    const access = lines(relay).filter((l) => l.msg === 'request completed' || l.msg === 'incoming request');
    expect(access).toHaveLength(2);
    expect(access[0]).toMatchObject({
      level: 30,
      msg: 'request completed',
      req: { method: 'GET', url: '/healthz?token=[redacted]&x=1' },
      res: { statusCode: 200 },
    });
    expect(typeof access[0]!.responseTime).toBe('number');
    expect(access[0]!.reqId).toEqual(expect.any(String));
    expect(access[1]).toMatchObject({ msg: 'request completed', req: { method: 'GET', url: '/api/nothing-here' }, res: { statusCode: 404 } });
    expect(relay.logs.join('')).not.toContain('secret-dash-token');
  });

  it('logs the arrival too at debug', async () => {
    const relay = await startRelay({ logLevel: 'debug' });
    relays.push(relay);
    await fetch(`${relay.url}/healthz`);
    const access = lines(relay).filter((l) => l.msg === 'request completed' || l.msg === 'incoming request');
    expect(access.map((l) => l.msg)).toEqual(['incoming request', 'request completed']);
    expect(access[0]).toMatchObject({ level: 20, req: { method: 'GET', url: '/healthz' } });
    expect(access[0]!.reqId).toBe(access[1]!.reqId);
  });
});
