// A fast fake OpenAI upstream for the benchmark: plain node:http, no framework, no delays.
//
//   POST …/chat/completions  {"stream": false} → 200 application/json, a ~1 KB chat.completion
//   POST …/chat/completions  {"stream": true}  → 200 text/event-stream, 10 chat.completion.chunk events
//                                                 (+ a usage chunk when stream_options.include_usage)
//                                                 and `data: [DONE]`, all written at once
//   anything else                              → 404 JSON error
//
// Knobs for bench/run.mjs and bench/soak.mjs, chosen per request by a header (without them nothing above changes):
//   x-fake-status: NNN        (400–599) answer that status with an OpenAI-style JSON error, whatever the body
//   x-fake-latency-ms: N      (1–60000) wait N ms before answering, as a model does before its first token:
//                             a JSON answer comes whole after N ms, a streamed one starts after N ms
//   x-fake-event-gap-ms: N    (1–2000) a streamed answer sends one event every N ms instead of all at once, and
//                             stops when the reader goes away (for client aborts in the middle of a stream)
//
// Use it as a module (`startFakeUpstream({port, host})` → {url, port, close()}) or as a process:
//   node bench/fake-upstream.mjs [--port N] [--host H]
// which prints one JSON line {"port":N,"url":"http://H:N"} on stdout once it listens. When started with an
// IPC channel (as bench/run.mjs does), it exits as soon as its parent goes away.
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';

// ~700 characters of answer text: with the envelope the JSON answer is ~1 KB, like a short real answer.
const ANSWER =
  'A cache in front of a language model API pays off when the same prompt is sent more than once: ' +
  'test suites, evaluation runs, retries after a client timeout, and agents that replay a conversation ' +
  'from the start. The key has to cover everything that changes the answer — the model, the messages, ' +
  'the sampling parameters and the headers that select a beta feature — and nothing that does not, such ' +
  'as the order of keys in the JSON body or the whitespace between them. A streamed answer can only be ' +
  'stored once its terminal event arrived; a stream that was cut short must never be replayed as if it ' +
  'were complete. Reports of every call make the savings visible: tokens, cost and latency per model.';

const CREATED = 1_700_000_000;
let seq = 0;

function usageOf(completionTokens) {
  return { prompt_tokens: 24, completion_tokens: completionTokens, total_tokens: 24 + completionTokens };
}

function completionJson(model) {
  return JSON.stringify({
    id: `chatcmpl-bench${(++seq).toString(36)}`,
    object: 'chat.completion',
    created: CREATED,
    model,
    system_fingerprint: 'fp_bench',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: ANSWER, refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: 'stop',
      },
    ],
    usage: {
      ...usageOf(142),
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0 },
    },
  });
}

// The answer split into 8 content deltas: with the role chunk and the finish chunk, 10 data events.
const DELTAS = (() => {
  const words = ANSWER.split(/(?<= )/);
  const per = Math.ceil(words.length / 8);
  const out = [];
  for (let i = 0; i < words.length; i += per) out.push(words.slice(i, i + per).join(''));
  return out;
})();

function sseEvents(model, includeUsage) {
  const id = `chatcmpl-bench${(++seq).toString(36)}`;
  const base = { id, object: 'chat.completion.chunk', created: CREATED, model, system_fingerprint: 'fp_bench' };
  const chunk = (delta, finish) => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
  const events = [
    chunk({ role: 'assistant', content: '', refusal: null }, null),
    ...DELTAS.map((content) => chunk({ content }, null)),
    chunk({}, 'stop'),
  ];
  if (includeUsage) events.push({ ...base, choices: [], usage: usageOf(142) });
  return events.map((e) => `data: ${JSON.stringify(e)}\n\n`);
}

const JSON_HEADERS = { 'content-type': 'application/json', 'x-request-id': 'req_bench', 'openai-processing-ms': '1' };
const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-request-id': 'req_bench',
  'openai-processing-ms': '1',
};

function sendError(res, status, message) {
  const body = JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: null } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function handle(req, res, raw) {
  const latency = Number(req.headers['x-fake-latency-ms']);
  if (Number.isInteger(latency) && latency >= 1 && latency <= 60_000) {
    const timer = setTimeout(() => {
      if (!res.destroyed) answer(req, res, raw);
    }, latency);
    res.once('close', () => clearTimeout(timer));
    return;
  }
  answer(req, res, raw);
}

function answer(req, res, raw) {
  const path = (req.url ?? '').split('?', 1)[0];
  if (req.method !== 'POST' || !path.endsWith('/chat/completions')) {
    sendError(res, 404, `Unknown request URL: ${req.method} ${path}`);
    return;
  }
  const forced = Number(req.headers['x-fake-status']);
  if (Number.isInteger(forced) && forced >= 400 && forced <= 599) {
    sendError(res, forced, `Forced failure ${forced} (x-fake-status).`);
    return;
  }
  let body;
  try {
    body = JSON.parse(raw);
  } catch {
    sendError(res, 400, 'We could not parse the JSON body of your request.');
    return;
  }
  if (body === null || typeof body !== 'object' || typeof body.model !== 'string' || !Array.isArray(body.messages)) {
    sendError(res, 400, "Missing required parameter: 'model' or 'messages'.");
    return;
  }
  if (body.stream === true) {
    res.writeHead(200, SSE_HEADERS);
    const events = sseEvents(body.model, body.stream_options?.include_usage === true);
    const gap = Number(req.headers['x-fake-event-gap-ms']);
    if (Number.isInteger(gap) && gap >= 1 && gap <= 2000) {
      // Paced (x-fake-event-gap-ms): one event per gap until the last, or until the reader goes away.
      let i = 0;
      const next = () => {
        if (res.destroyed) return;
        if (i < events.length) {
          res.write(events[i++]);
          setTimeout(next, gap);
        } else res.end('data: [DONE]\n\n');
      };
      next();
      return;
    }
    // Every event is its own write, all in this tick (node sends them together): no artificial delay.
    for (const e of events) res.write(e);
    res.end('data: [DONE]\n\n');
    return;
  }
  const json = completionJson(body.model);
  res.writeHead(200, { ...JSON_HEADERS, 'content-length': Buffer.byteLength(json) });
  res.end(json);
}

/**
 * Start the fake upstream. Resolves once it listens.
 * @param {{port?: number, host?: string}} [opts]
 * @returns {Promise<{url: string, port: number, server: import('node:http').Server, close: () => Promise<void>}>}
 */
export async function startFakeUpstream({ port = 0, host = '127.0.0.1' } = {}) {
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      try {
        handle(req, res, chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8'));
      } catch (err) {
        res.destroy(err);
      }
    });
  });
  // Keep client connections (the proxies' pools) open well past any idle gap between benchmark runs.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const actual = server.address().port;
  return {
    url: `http://${host}:${actual}`,
    port: actual,
    server,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function flag(argv, name, fallback) {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const argv = process.argv.slice(2);
  const up = await startFakeUpstream({
    port: Number(flag(argv, '--port', process.env.PORT ?? '0')),
    host: flag(argv, '--host', process.env.HOST ?? '127.0.0.1'),
  });
  process.stdout.write(`${JSON.stringify({ port: up.port, url: up.url })}\n`);
  const stop = () => up.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  if (process.send) process.once('disconnect', () => process.exit(0));
}
