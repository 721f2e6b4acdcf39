// A stored report with the least a store needs beside its bodies (no usage, no cost, sizes of 1), for tests that
// write straight into a store: plain JavaScript, so a process of its own (blob-writer.mjs) can use it too.

/**
 * @param {string} id
 * @param {string} at the request's, the response's and the receiving time (ISO 8601)
 * @param {Record<string, unknown>} metadata
 * @param {unknown} request the request body
 * @param {unknown} response the response body
 */
export function storedReport(id, at, metadata, request, response) {
  return {
    id,
    receivedAt: at,
    metadata,
    request: { timestamp: at, body: request },
    response: { timestamp: at, body: response },
    durationMs: 1,
    status: 200,
    model: 'gpt-4o-mini',
    provider: 'openai',
    usage: null,
    costUsd: null,
    requestBytes: 1,
    responseBytes: 1,
  };
}
