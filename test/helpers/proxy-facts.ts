// The facts of a plain proxied miss (a JSON chat completion answered 200 by the upstream), as the event loop
// hands them to the report worker; a test overrides what it asserts on.
import type { ProxyFacts } from '../../src/core/exchange-record.js';

export function missFacts(over: Partial<ProxyFacts> = {}): ProxyFacts {
  return {
    id: 'r-1',
    startedAt: 1_700_000_000_000,
    endedAt: 1_700_000_000_001,
    status: 200,
    cacheStatus: 'MISS',
    outcome: 'complete',
    method: 'POST',
    url: '/v1/chat/completions',
    upstream: 'http://up',
    relayHeaders: [],
    cacheEnabled: true,
    cacheKey: null,
    streamed: false,
    requestJson: 'checked',
    ...over,
  };
}
