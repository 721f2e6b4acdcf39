// The traced hits the span benchmarks write (bench/span-encode.mjs, bench/span-export.mjs): `n` hits of 64
// cache entries, their facts and reports parsed from JSON as the report worker gets them, the hits of one
// entry sharing its kept request and answer (one object each) as they do on the worker. A hit's span comes
// to 14 attributes, ~770 bytes.
const ENTRIES = 64;
const hex = (n, i) => (i.toString(16).padStart(n, '0') + 'ab'.repeat(n)).slice(0, n);
const parsed = (value) => JSON.parse(JSON.stringify(value));

export function hitSpans(n) {
  // a cache entry: what the worker keeps of it (the request and answer, parsed once) and what its hits share
  const entries = Array.from({ length: ENTRIES }, (_, e) =>
    parsed({
      cacheKey: hex(64, e * 7),
      request: { body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] } },
      response: { body: { id: `chatcmpl-${hex(20, e)}`, model: 'gpt-4o-mini-2024-07-18', choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'x' } }] } },
      usage: { inputTokens: 12, outputTokens: 34 + (e % 50) },
    }),
  );
  return Array.from({ length: n }, (_, i) => {
    const e = entries[i % ENTRIES];
    const facts = parsed({
      id: `01a2152e-e44e-7704-97d7-${hex(12, i)}`,
      url: '/v1/chat/completions',
      method: 'POST',
      upstream: 'http://127.0.0.1:18480',
      status: 200,
      outcome: 'complete',
      cacheStatus: 'HIT',
      cacheKey: e.cacheKey,
      originReportId: `01a2152e-e44e-7704-97d7-${hex(12, i % ENTRIES)}`,
      trace: { traceId: hex(32, i), spanId: hex(16, i), start: 1764110000123.456 + i, end: 1764110000125.789 + i, namespace: `cred-${hex(32, 3)}` },
    });
    const report = { request: e.request, response: e.response, model: 'gpt-4o-mini', provider: 'openai', proxy: { outcome: 'complete' }, usage: e.usage, costUsd: 0 };
    return { facts, report };
  });
}
