// Every status and body of DESIGN §2 and §8 for the three seed endpoints, asserted whole.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestRelay, get, post, startRelay } from '../helpers/relay.js';

const REQ_TS = '2024-05-01T12:00:00.000Z';
const RES_TS = '2024-05-01T12:00:01.250Z';

const chatRequest = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello Bob' }] };
const chatResponse = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  model: 'gpt-4o-mini-2024-07-18',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hi!' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 1000, completion_tokens: 500, total_tokens: 1500 },
};

function report(extra: Record<string, unknown> = {}) {
  return {
    metadata: { client: 'test-client', clientVersion: '1.2.3', environment: 'staging', promptId: 'p-1' },
    request: { timestamp: REQ_TS, body: chatRequest },
    response: { timestamp: RES_TS, body: chatResponse, status: 200 },
    properties: { userId: 'u-1', traceId: 't-1' },
    cacheEnabled: true,
    cacheHit: false,
    ...extra,
  };
}

let relay: TestRelay;
let api: string;

beforeAll(async () => {
  relay = await startRelay({ cacheUrl: 'sqlite', maxBodyBytes: 64 * 1024, cacheMaxEntryBytes: 16 * 1024, maxJsonDepth: 32 });
  api = `${relay.url}/api`;
});
afterAll(async () => relay.close());

describe('POST /api/reporting/v2/request', () => {
  it('answers 201 with the stored report and its derived fields', async () => {
    const sent = report({ somethingNew: { kept: true } });
    const res = await post(`${api}/reporting/v2/request`, sent);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      ...sent,
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      receivedAt: expect.any(String),
      durationMs: 1250,
      status: 200,
      model: 'gpt-4o-mini-2024-07-18',
      provider: 'openai',
      usage: { inputTokens: 1000, outputTokens: 500, totalTokens: 1500 },
      // gpt-4o-mini: 0.15 $/M in, 0.6 $/M out
      costUsd: 0.00045,
      requestBytes: Buffer.byteLength(JSON.stringify(chatRequest)),
      responseBytes: Buffer.byteLength(JSON.stringify(chatResponse)),
      requestSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      responseSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const back = await get(`${api}/reporting/v2/requests/${res.body.id}`);
    expect(back).toEqual({ status: 200, body: res.body });
  });

  it('accepts the minimal report, null flags and a response without a body', async () => {
    const minimal = { request: { timestamp: REQ_TS }, response: { timestamp: RES_TS }, cacheEnabled: false, cacheHit: null };
    const res = await post(`${api}/reporting/v2/request`, minimal);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ ...minimal, status: null, model: null, provider: null, usage: null, costUsd: null, requestBytes: 0, responseBytes: 0 });
  });

  it('gives an unknown model a null cost, never an error', async () => {
    const res = await post(`${api}/reporting/v2/request`, report({ response: { timestamp: RES_TS, body: { ...chatResponse, model: 'acme-9' } } }));
    expect(res.status).toBe(201);
    expect(res.body.costUsd).toBeNull();
    expect(res.body.usage).toEqual({ inputTokens: 1000, outputTokens: 500, totalTokens: 1500 });
  });

  it.each([
    ['request missing', { response: { timestamp: RES_TS } }, 'body/request is required'],
    ['response missing', { request: { timestamp: REQ_TS } }, 'body/response is required'],
    ['timestamp missing', { request: {}, response: { timestamp: RES_TS } }, 'body/request/timestamp is required'],
    ['bad timestamp', { request: { timestamp: 'yesterday' }, response: { timestamp: RES_TS } }, 'body/request/timestamp must match format "date-time"'],
    ['timestamp as number', { request: { timestamp: 1714564800000 }, response: { timestamp: RES_TS } }, 'body/request/timestamp must be string'],
    ['cacheHit as string', { ...report(), cacheHit: 'true' }, 'body/cacheHit must be boolean or null'],
    ['cacheEnabled as number', { ...report(), cacheEnabled: 1 }, 'body/cacheEnabled must be boolean or null'],
    ['metadata as array', { ...report(), metadata: [] }, 'body/metadata must be object'],
    ['client as number', { ...report(), metadata: { client: 7 } }, 'body/metadata/client must be string'],
    ['properties as string', { ...report(), properties: 'x' }, 'body/properties must be object'],
    ['body as string', { request: { timestamp: REQ_TS, body: 'hi' }, response: { timestamp: RES_TS } }, 'body/request/body must be object'],
    ['top level array', [report()], 'body must be object'],
  ])('400 naming the field: %s', async (_name, body, message) => {
    const res = await post(`${api}/reporting/v2/request`, body);
    expect(res).toMatchObject({ status: 400 });
    expect(res.body).toEqual({ statusCode: 400, code: 'RELAY_ERR_VALIDATION', error: 'Bad Request', message });
  });
});

describe('malformed bodies on every endpoint', () => {
  const endpoints = ['/reporting/v2/request', '/cache/v1/request/save', '/cache/v1/request/retrieve'];

  it.each(endpoints)('%s: invalid JSON is a 400', async (path) => {
    const res = await post(`${api}${path}`, '{"request": {');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ statusCode: 400, code: 'RELAY_ERR_INVALID_JSON', error: 'Bad Request', message: expect.stringMatching(/^Body is not valid JSON: /) });
  });

  it.each(endpoints)('%s: an empty JSON body is a 400', async (path) => {
    const res = await post(`${api}${path}`, '');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ statusCode: 400, code: 'RELAY_ERR_INVALID_JSON', error: 'Bad Request', message: 'Body is not valid JSON: the body is empty' });
  });

  it.each(endpoints)('%s: a body that is not JSON is a 415', async (path) => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await post(`${api}${path}`, 'request=1', { 'content-type': type });
      expect(res.status).toBe(415);
      expect(res.body).toEqual({
        statusCode: 415,
        code: 'RELAY_ERR_UNSUPPORTED_MEDIA_TYPE',
        error: 'Unsupported Media Type',
        message: 'Unsupported content type: this endpoint takes application/json',
      });
    }
  });

  it.each(endpoints)('%s: an oversized body is a 413', async (path) => {
    const res = await post(`${api}${path}`, { request: { blob: 'x'.repeat(70 * 1024) }, response: {} });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ statusCode: 413, code: 'RELAY_ERR_BODY_TOO_LARGE', error: 'Payload Too Large', message: expect.any(String) });
  });

  it.each(endpoints)('%s: deep nesting is a 400', async (path) => {
    const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`;
    const res = await post(`${api}${path}`, `{"request": {"a": ${deep}}, "response": {}}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ statusCode: 400, code: 'RELAY_ERR_JSON_TOO_DEEP', error: 'Bad Request', message: 'Body nests deeper than 32 levels' });
  });

  it.each(endpoints)('%s: __proto__ and constructor.prototype keys are a 400', async (path) => {
    for (const body of ['{"request": {"__proto__": {"x": 1}}, "response": {}}', '{"request": {"constructor": {"prototype": {"x": 1}}}, "response": {}}']) {
      const res = await post(`${api}${path}`, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ statusCode: 400, code: 'RELAY_ERR_FORBIDDEN_KEY', error: 'Bad Request', message: 'Body contains a forbidden key (__proto__ or constructor.prototype)' });
    }
  });

  it('relay still healthy after all of it', async () => {
    expect(await get(`${relay.url}/healthz`)).toEqual({ status: 200, body: { status: 'ok' } });
  });
});

describe('POST /api/cache/v1/request/save and /retrieve', () => {
  it('saves with 201 {hash, exp} and retrieves with 200 {hit: true, data}', async () => {
    const before = Date.now();
    const vector = { model: 'gpt-3.5-turbo', messages: [{ role: 'user', content: 'Hello Bob' }] };
    const saved = await post(`${api}/cache/v1/request/save`, { request: vector, response: chatResponse });
    expect(saved.status).toBe(201);
    expect(saved.body).toEqual({ hash: 'e5fc45e92c0e3820c2da446b92495bce896cdbb05921e28471e026a0f01b1bd8', exp: expect.any(String) });
    const exp = Date.parse(saved.body.exp);
    expect(exp).toBeGreaterThanOrEqual(before + 604_800_000);
    expect(exp).toBeLessThanOrEqual(Date.now() + 604_800_000);

    // Key order does not matter: RFC 8785 canonical JSON.
    const reordered = { messages: [{ content: 'Hello Bob', role: 'user' }], model: 'gpt-3.5-turbo' };
    const hit = await post(`${api}/cache/v1/request/retrieve`, { request: reordered });
    expect(hit).toMatchObject({ status: 200, body: { hit: true, data: chatResponse } });
    expect(hit.body).toEqual({ hit: true, data: chatResponse });
  });

  it('answers a miss with 404 and the interface body', async () => {
    const res = await post(`${api}/cache/v1/request/retrieve`, { request: { model: 'x', messages: [] } });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      statusCode: 404,
      code: 'RELAY_ERR_CACHE_MISS',
      error: 'Not Found',
      message: `No cached entry for this request (key ${res.body.message.slice(-65, -1)})`,
      hit: false,
      data: null,
    });
    expect(res.body.message).toMatch(/key [0-9a-f]{64}\)$/);
  });

  it('answers a Pezzo client miss with 200 {hit: false, data: null}', async () => {
    const res = await post(`${api}/cache/v1/request/retrieve`, { request: { model: 'never-saved' } }, { 'x-pezzo-api-key': 'pez_key', 'x-pezzo-project-id': 'proj-1' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ hit: false, data: null });
  });

  it('keeps namespaces apart: explicit header, Pezzo project, shared', async () => {
    const request = { model: 'ns-test', messages: [{ role: 'user', content: 'which namespace?' }] };
    const save = (headers: Record<string, string>, answer: string) =>
      post(`${api}/cache/v1/request/save`, { request, response: { answer } }, headers);
    const retrieve = (headers: Record<string, string>) => post(`${api}/cache/v1/request/retrieve`, { request }, headers);

    expect((await save({ 'x-relay-cache-namespace': 'team-a' }, 'a')).status).toBe(201);
    expect((await save({ 'x-pezzo-project-id': 'proj-1' }, 'p1')).status).toBe(201);
    expect((await save({}, 'shared')).status).toBe(201);

    expect((await retrieve({ 'x-relay-cache-namespace': 'team-a' })).body).toEqual({ hit: true, data: { answer: 'a' } });
    expect((await retrieve({ 'x-pezzo-project-id': 'proj-1' })).body).toEqual({ hit: true, data: { answer: 'p1' } });
    expect((await retrieve({ 'x-pezzo-project-id': 'proj-2' })).status).toBe(404);
    expect((await retrieve({})).body).toEqual({ hit: true, data: { answer: 'shared' } });
    // The Pezzo client sends the literal "undefined" when it has no project id: that is the shared space.
    expect((await retrieve({ 'x-pezzo-project-id': 'undefined' })).body).toEqual({ hit: true, data: { answer: 'shared' } });
  });

  it('takes a TTL from x-relay-cache-ttl and reports it in exp', async () => {
    const before = Date.now();
    const res = await post(`${api}/cache/v1/request/save`, { request: { ttl: 1 }, response: { ok: true } }, { 'x-relay-cache-ttl': '60' });
    expect(res.status).toBe(201);
    const exp = Date.parse(res.body.exp);
    expect(exp).toBeGreaterThanOrEqual(before + 60_000);
    expect(exp).toBeLessThanOrEqual(Date.now() + 60_000);
  });

  it('rejects a bad namespace or TTL header with a 400 naming it', async () => {
    const bad = await post(`${api}/cache/v1/request/save`, { request: {}, response: {} }, { 'x-relay-cache-namespace': 'no spaces' });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ statusCode: 400, code: 'RELAY_ERR_VALIDATION', error: 'Bad Request', message: expect.stringMatching(/^headers\/x-relay-cache-namespace /) });
    const ttl = await post(`${api}/cache/v1/request/save`, { request: {}, response: {} }, { 'x-relay-cache-ttl': '-5' });
    expect(ttl.status).toBe(400);
    expect(ttl.body.message).toMatch(/^headers\/x-relay-cache-ttl /);
  });

  it.each([
    ['/cache/v1/request/save', { response: {} }, 'body/request is required'],
    ['/cache/v1/request/save', { request: {} }, 'body/response is required'],
    ['/cache/v1/request/save', { request: [], response: {} }, 'body/request must be object'],
    ['/cache/v1/request/save', { request: {}, response: 'text' }, 'body/response must be object'],
    ['/cache/v1/request/retrieve', {}, 'body/request is required'],
    ['/cache/v1/request/retrieve', { request: null }, 'body/request must be object'],
  ])('%s: 400 for %j', async (path, body, message) => {
    const res = await post(`${api}${path}`, body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ statusCode: 400, code: 'RELAY_ERR_VALIDATION', error: 'Bad Request', message });
  });

  it('refuses an entry over RELAY_CACHE_MAX_ENTRY_BYTES with a 413', async () => {
    const res = await post(`${api}/cache/v1/request/save`, { request: { big: 1 }, response: { text: 'y'.repeat(20 * 1024) } });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({
      statusCode: 413,
      code: 'RELAY_ERR_ENTRY_TOO_LARGE',
      error: 'Payload Too Large',
      message: 'The cache entry is larger than the limit of 16384 bytes (RELAY_CACHE_MAX_ENTRY_BYTES)',
    });
  });
});

describe('reading reports back', () => {
  it('lists with filters and pages with a cursor', async () => {
    const sent = [];
    for (let i = 0; i < 7; i++) {
      const r = report({
        metadata: { client: 'pager', environment: i % 2 ? 'prod' : 'dev', promptId: `p${i}` },
        request: { timestamp: new Date(Date.UTC(2030, 0, 1, 0, 0, i)).toISOString(), body: chatRequest },
        properties: { userId: `user-${i % 3}`, n: i },
        cacheHit: i === 3,
      });
      sent.push((await post(`${api}/reporting/v2/request`, r)).body);
    }
    const all = await get(`${api}/reporting/v2/requests?client=pager&limit=3`);
    expect(all.status).toBe(200);
    expect(all.body.items.map((r: any) => r.id)).toEqual([sent[6].id, sent[5].id, sent[4].id]);
    const page2 = await get(`${api}/reporting/v2/requests?client=pager&limit=3&cursor=${all.body.nextCursor}`);
    expect(page2.body.items.map((r: any) => r.id)).toEqual([sent[3].id, sent[2].id, sent[1].id]);
    const page3 = await get(`${api}/reporting/v2/requests?client=pager&limit=3&cursor=${page2.body.nextCursor}`);
    expect(page3.body).toEqual({ items: [sent[0]], nextCursor: null });

    const prod = await get(`${api}/reporting/v2/requests?client=pager&environment=prod`);
    expect(prod.body.items.map((r: any) => r.metadata.promptId)).toEqual(['p5', 'p3', 'p1']);
    const hits = await get(`${api}/reporting/v2/requests?client=pager&cacheHit=true`);
    expect(hits.body.items.map((r: any) => r.id)).toEqual([sent[3].id]);
    const user = await get(`${api}/reporting/v2/requests?client=pager&property.userId=user-1`);
    expect(user.body.items.map((r: any) => r.id)).toEqual([sent[4].id, sent[1].id]);
    const numeric = await get(`${api}/reporting/v2/requests?client=pager&property.n=2`);
    expect(numeric.body.items.map((r: any) => r.id)).toEqual([sent[2].id]);
    const window = await get(`${api}/reporting/v2/requests?client=pager&from=2030-01-01T00:00:02.000Z&to=2030-01-01T00:00:04.000Z`);
    expect(window.body.items.map((r: any) => r.id)).toEqual([sent[3].id, sent[2].id]);
    const byPrompt = await get(`${api}/reporting/v2/requests?promptId=p4&model=gpt-4o-mini-2024-07-18&status=200`);
    expect(byPrompt.body.items.map((r: any) => r.id)).toEqual([sent[4].id]);
  });

  it('answers bad queries with a 400 and unknown ids with a 404', async () => {
    expect(await get(`${api}/reporting/v2/requests?limit=0`)).toEqual({
      status: 400,
      body: { statusCode: 400, code: 'RELAY_ERR_VALIDATION', error: 'Bad Request', message: 'querystring/limit must be >= 1' },
    });
    const cursor = await get(`${api}/reporting/v2/requests?cursor=garbage`);
    expect(cursor).toEqual({ status: 400, body: { statusCode: 400, code: 'RELAY_ERR_INVALID_CURSOR', error: 'Bad Request', message: 'Invalid cursor: not a cursor returned by this API' } });
    const from = await get(`${api}/reporting/v2/requests?from=last-week`);
    expect(from.status).toBe(400);
    expect(from.body.message).toBe('querystring/from must match format "date-time"');
    const prop = await get(`${api}/reporting/v2/requests?property.bad%20name=1`);
    expect(prop.status).toBe(400);
    expect(prop.body.code).toBe('RELAY_ERR_VALIDATION');
    expect(await get(`${api}/reporting/v2/requests/no-such-id`)).toEqual({
      status: 404,
      body: { statusCode: 404, code: 'RELAY_ERR_NOT_FOUND', error: 'Not Found', message: 'No report with id no-such-id' },
    });
  });

  it('answers unknown routes with a JSON 404', async () => {
    expect(await get(`${api}/nothing-here`)).toEqual({
      status: 404,
      body: { statusCode: 404, code: 'RELAY_ERR_NOT_FOUND', error: 'Not Found', message: 'Route GET /api/nothing-here not found' },
    });
  });
});

describe('operations', () => {
  it('/readyz names both stores', async () => {
    expect(await get(`${relay.url}/readyz`)).toEqual({
      status: 200,
      body: { status: 'ready', cache: { kind: 'sqlite', status: 'ok' }, reports: { kind: 'sqlite', status: 'ok', outboxDepth: 0 } },
    });
  });

  it('/docs/json is the OpenAPI document of every route', async () => {
    const doc = await get(`${relay.url}/docs/json`);
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.body.paths)).toEqual(
      expect.arrayContaining([
        '/api/reporting/v2/request',
        '/api/cache/v1/request/save',
        '/api/cache/v1/request/retrieve',
        '/api/reporting/v2/requests',
        '/api/reporting/v2/requests/{id}',
      ]),
    );
    expect(doc.body.paths['/api/cache/v1/request/retrieve'].post.operationId).toBe('CacheController_retrieveCachedRequest');
    const ui = await fetch(`${relay.url}/docs/`);
    expect(ui.status).toBe(200);
    expect(await ui.text()).toContain('swagger');
  });
});

describe('bytes and numbers', () => {
  it('refuses invalid UTF-8 with a 400', async () => {
    const bad = Buffer.concat([Buffer.from('{"request": {"a": "'), Buffer.from([0xc3, 0x28]), Buffer.from('"}, "response": {}}')]);
    const res = await fetch(`${api}/cache/v1/request/save`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bad });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ statusCode: 400, code: 'RELAY_ERR_INVALID_JSON', error: 'Bad Request', message: 'Body is not valid JSON: the body is not valid UTF-8' });
  });

  it('refuses numbers out of range with a 400', async () => {
    const res = await post(`${api}/cache/v1/request/save`, '{"request": {"n": 1e400}, "response": {}}');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ statusCode: 400, code: 'RELAY_ERR_VALIDATION', error: 'Bad Request', message: 'body has a number out of range' });
    expect((await post(`${api}/cache/v1/request/save`, '{"request": {"n": 1e300, "m": 1e-400}, "response": {}}')).status).toBe(201);
  });

  it('cuts a report body over RELAY_REPORT_MAX_BODY_BYTES, keeping its size and hash', async () => {
    const small = await startRelay({ reportMaxBodyBytes: 1024 });
    try {
      const body = { text: 'z'.repeat(5000) };
      const res = await post(`${small.url}/api/reporting/v2/request`, report({ response: { timestamp: RES_TS, body } }));
      expect(res.status).toBe(201);
      const full = JSON.stringify(body);
      expect(res.body.response).toEqual({ timestamp: RES_TS, body: full.slice(0, 1024), truncated: true });
      expect(res.body.responseBytes).toBe(full.length);
      expect(res.body.responseSha256).toBe(createHash('sha256').update(full).digest('hex'));
      expect(res.body.request.truncated).toBeUndefined();
    } finally {
      await small.close();
    }
  });

  it('answers an oversized request head with a JSON 431', async () => {
    const res = await fetch(`${relay.url}/healthz`, { headers: { 'x-big': 'a'.repeat(20_000) } });
    expect(res.status).toBe(431);
    expect(await res.json()).toEqual({
      statusCode: 431,
      code: 'RELAY_ERR_HEADERS_TOO_LARGE',
      error: 'Request Header Fields Too Large',
      message: 'The request headers are larger than the limit of 16384 bytes (RELAY_MAX_HEADER_BYTES)',
    });
  });
});
