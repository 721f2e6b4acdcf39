import { describe, expect, it } from 'vitest';
import { cacheHash, proxyKeyObject, storedKey } from '../../../src/core/cache-key.js';
import { apiNamespace, proxyNamespace } from '../../../src/core/namespace.js';

describe('cacheHash', () => {
  it('matches the Pezzo test vector', () => {
    expect(cacheHash({ model: 'gpt-3.5-turbo', messages: [{ role: 'user', content: 'Hello Bob' }] })).toBe(
      'e5fc45e92c0e3820c2da446b92495bce896cdbb05921e28471e026a0f01b1bd8',
    );
  });

  it('ignores key order and whitespace, but not values or array order', () => {
    const a = cacheHash({ b: 1, a: { y: [1, 2], x: 'é' } });
    expect(cacheHash(JSON.parse('{ "a": { "x": "é", "y": [1, 2] }, "b": 1 }'))).toBe(a);
    expect(cacheHash({ b: 1, a: { y: [2, 1], x: 'é' } })).not.toBe(a);
    expect(cacheHash({ b: 1.0, a: { y: [1, 2], x: 'é' } })).toBe(a); // 1.0 and 1 are the same JSON number
    expect(cacheHash({ b: '1', a: { y: [1, 2], x: 'é' } })).not.toBe(a);
  });

  it('prefixes the namespace only in the stored key', () => {
    expect(storedKey('shared', 'abc')).toBe('shared:abc');
  });
});

describe('proxyKeyObject', () => {
  it('keeps only the vary headers that are present', () => {
    expect(
      proxyKeyObject('post', '/v1/messages', { a: 1 }, {
        'anthropic-version': '2023-06-01',
        authorization: 'Bearer secret',
        'x-relay-cache-ttl': '5',
      }),
    ).toEqual({ method: 'POST', path: '/v1/messages', body: { a: 1 }, vary: { 'anthropic-version': '2023-06-01' } });
  });
});

describe('namespaces', () => {
  it('API: explicit, then Pezzo project, then shared', () => {
    expect(apiNamespace('team', 'p1')).toBe('team');
    expect(apiNamespace(undefined, 'p1')).toBe('pezzo-p1');
    expect(apiNamespace(undefined, 'undefined')).toBe('shared');
    expect(apiNamespace(undefined, undefined)).toBe('shared');
  });

  it('proxy: explicit, then shared scope, then a hash of the credential', () => {
    expect(proxyNamespace('team', 'credential', 'sk-1')).toBe('team');
    expect(proxyNamespace(undefined, 'shared', 'sk-1')).toBe('shared');
    const one = proxyNamespace(undefined, 'credential', 'Bearer sk-1');
    expect(one).toMatch(/^cred-[0-9a-f]{32}$/);
    expect(one).not.toContain('sk-1');
    expect(proxyNamespace(undefined, 'credential', 'Bearer sk-2')).not.toBe(one);
    expect(proxyNamespace(undefined, 'credential', undefined)).toBe('anonymous');
  });
});
