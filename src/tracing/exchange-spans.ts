// The spans of one exchange, built on the report worker from what the event loop noted (TraceFacts) and
// what the report derived (model, tokens, finish reasons, cost), so that the event loop never parses an
// answer for a span. One SERVER span for the exchange (the relay is the client's server), named as the
// GenAI conventions name an inference span, `{gen_ai.operation.name} {gen_ai.request.model}`; and, when the
// exchange went upstream, one CLIENT child span for that call (the relay is the provider's client), whose
// id went upstream in traceparent. A hit has no child; a coalesced call links to the call it shared. What
// the spans say is written here once, field by field, to a SpanOut: protobuf bytes (otlp-proto.ts) or JSON
// text (otlp-json.ts), as the configured protocol wants; no span object is built.
import { type Attributes, type AttributeValue, type SpanContext, SpanKind } from '@opentelemetry/api';
import type { ProxyFacts } from '../core/exchange-record.js';
import type { TraceFacts } from '../core/trace-facts.js';
import type { StoredReport } from '../storage/report-store.js';
import * as A from './genai-attributes.js';
import { finishReasonsOf, messagesOf } from './genai-messages.js';

const SAMPLED = 1;

const obj = (v: unknown): Record<string, unknown> | undefined =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** What the span says went wrong, or undefined: the relay's error code, a broken stream, or an error status. */
function errorTypeOf(f: ProxyFacts, outcome: string): string | undefined {
  if (f.trace?.upstream?.error) return f.trace.upstream.error;
  if (outcome === 'stream-error' || outcome === 'cache-only-miss') return outcome;
  return f.status >= 400 ? String(f.status) : undefined;
}

/**
 * Where exchangeSpans writes a span, field by field, in the order OTLP lays a span out: its identity and
 * times, then its attributes, then its end (status, the link of a coalesced call). Two writers: protobuf bytes
 * straight into the export buffer (otlp-proto.ts: http/protobuf) and JSON text (otlp-json.ts: http/json), so
 * that a traced hit builds no span object at all. (The tests add a third, span objects for the official
 * serializers, and compare what each writes: test/unit/tracing/span-objects.ts.)
 */
export interface SpanOut {
  begin(name: string, kind: SpanKind, traceId: string, spanId: string, parent: ParentOfSpan | undefined, start: number, end: number): void;
  attr(key: SpanKey, value: AttributeValue): void;
  /**
   * Attributes that depend on `inputs` alone, for an `owner` that lives as long as those inputs may come
   * again (a kept answer): true when the writer kept the ones it wrote for this owner and every input is the
   * same (===) as then, and wrote them again; false when the caller is to write them (attr), then `keep`.
   */
  repeat(owner: object, inputs: readonly unknown[]): boolean;
  /** Keeps the attributes written since `repeat` answered false, for the owner and inputs it was given. */
  keep(owner: object, inputs: readonly unknown[]): void;
  end(error: string | undefined, leader: TraceFacts['leader']): void;
}

/**
 * An attribute's key as the writers want it: its name (genai-attributes.ts), and what stands for it in a
 * KeyValue — its protobuf bytes (ProtoSpans), its JSON text (JsonSpans) — made on first use and kept here:
 * no lookup per span.
 */
export class SpanKey {
  bytes: Uint8Array | undefined;
  json: string | undefined;
  constructor(readonly name: string) {}
}

/** The keys of the relay's span attributes. */
const K = {
  ERROR_TYPE: new SpanKey(A.ERROR_TYPE),
  GEN_AI_INPUT_MESSAGES: new SpanKey(A.GEN_AI_INPUT_MESSAGES),
  GEN_AI_OPERATION_NAME: new SpanKey(A.GEN_AI_OPERATION_NAME),
  GEN_AI_OUTPUT_MESSAGES: new SpanKey(A.GEN_AI_OUTPUT_MESSAGES),
  GEN_AI_PROVIDER_NAME: new SpanKey(A.GEN_AI_PROVIDER_NAME),
  GEN_AI_REQUEST_MODEL: new SpanKey(A.GEN_AI_REQUEST_MODEL),
  GEN_AI_REQUEST_STREAM: new SpanKey(A.GEN_AI_REQUEST_STREAM),
  GEN_AI_RESPONSE_FINISH_REASONS: new SpanKey(A.GEN_AI_RESPONSE_FINISH_REASONS),
  GEN_AI_RESPONSE_ID: new SpanKey(A.GEN_AI_RESPONSE_ID),
  GEN_AI_RESPONSE_MODEL: new SpanKey(A.GEN_AI_RESPONSE_MODEL),
  GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: new SpanKey(A.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK),
  GEN_AI_SYSTEM_INSTRUCTIONS: new SpanKey(A.GEN_AI_SYSTEM_INSTRUCTIONS),
  GEN_AI_USAGE_INPUT_TOKENS: new SpanKey(A.GEN_AI_USAGE_INPUT_TOKENS),
  GEN_AI_USAGE_OUTPUT_TOKENS: new SpanKey(A.GEN_AI_USAGE_OUTPUT_TOKENS),
  HTTP_REQUEST_METHOD: new SpanKey(A.HTTP_REQUEST_METHOD),
  HTTP_RESPONSE_STATUS_CODE: new SpanKey(A.HTTP_RESPONSE_STATUS_CODE),
  RELAY_CACHE_KEY: new SpanKey(A.RELAY_CACHE_KEY),
  RELAY_CACHE_NAMESPACE: new SpanKey(A.RELAY_CACHE_NAMESPACE),
  RELAY_CACHE_STATUS: new SpanKey(A.RELAY_CACHE_STATUS),
  RELAY_COST_USD: new SpanKey(A.RELAY_COST_USD),
  RELAY_ORIGIN_REPORT_ID: new SpanKey(A.RELAY_ORIGIN_REPORT_ID),
  RELAY_OUTCOME: new SpanKey(A.RELAY_OUTCOME),
  RELAY_REPORT_ID: new SpanKey(A.RELAY_REPORT_ID),
  RELAY_USAGE_ESTIMATED: new SpanKey(A.RELAY_USAGE_ESTIMATED),
  SERVER_ADDRESS: new SpanKey(A.SERVER_ADDRESS),
  SERVER_PORT: new SpanKey(A.SERVER_PORT),
  URL_PATH: new SpanKey(A.URL_PATH),
} as const;

/** A span's parent: the client's span (remote, with its flags), or the relay's exchange span. */
export interface ParentOfSpan {
  spanId: string;
  traceFlags: number;
  isRemote: boolean | undefined;
}

/** The attributes of the link from a coalesced call to the call it shared. */
export const LEADER_LINK_ATTRIBUTES: Attributes = Object.freeze({ [A.RELAY_LINK_LEADER]: true });

// What both writers share (otlp-proto.ts, otlp-json.ts):

/** OTLP's span flags: the W3C trace flags in the low byte, then "has is_remote" and "is_remote". */
export const spanFlags = (traceFlags: number, remote: boolean | undefined): number => (traceFlags & 0xff) | 0x100 | (remote ? 0x200 : 0);

/** What the processor reads of a written span that stands in for a span object: it is sampled. */
export const SAMPLED_CONTEXT: SpanContext = Object.freeze({ traceId: '', spanId: '', traceFlags: SAMPLED });

/** Attributes kept per owner (SpanOut.repeat) up to this size (bytes or characters): a hit's come to ~400
 * bytes; captured content can make them much larger, and is then written each time. */
export const KEPT_ATTRIBUTES_MAX = 4096;

/** SpanOut.repeat's comparison: every input the same (===) as when the attributes were kept. */
export function sameInputs(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Writes the spans of one exchange (its facts carry trace facts) to `out`, in the order they ended: child first. */
export function exchangeSpans(f: ProxyFacts, report: StoredReport, out: SpanOut, captureContent: boolean): void {
  const t = f.trace!;
  const request = obj(report.request.body);
  const response = obj(report.response.body);
  const operation = A.operationOf(f.url);
  const requestModel = str(request?.model) ?? report.model ?? undefined;
  const name = operation ? (requestModel ? spanName(operation, requestModel) : operation) : f.method;
  const { host, port } = serverOf(f.upstream);
  const provider = A.providerOf(report.provider, host);
  const stream = request?.stream === true;

  // the report's outcome: a stream that ended cleanly but carried an error event is a stream-error there
  const reported = obj(report.proxy)?.outcome;
  const outcome = typeof reported === 'string' ? reported : f.outcome;
  const error = errorTypeOf(f, outcome);
  const end = t.end ?? t.start;

  const up = t.upstream;
  if (up) {
    // The upstream call: the request's GenAI attributes, the server it reached, its status and first chunk.
    // What the answer held (model, id, finish reasons, tokens) is said once, on the exchange's span: a
    // backend that sums gen_ai.usage.* over a trace must not count a call twice.
    out.begin(name, SpanKind.CLIENT, t.traceId, up.spanId, { spanId: t.spanId, traceFlags: SAMPLED, isRemote: undefined }, up.start, up.end ?? end);
    requestAttributes(out, operation, provider, requestModel, stream);
    if (host) {
      out.attr(K.SERVER_ADDRESS, host);
      out.attr(K.SERVER_PORT, port);
    }
    if (up.status !== undefined) out.attr(K.HTTP_RESPONSE_STATUS_CODE, up.status);
    if (t.firstChunk !== undefined && up.status !== undefined) out.attr(K.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, (t.firstChunk - up.start) / 1000);
    const upError = up.error ?? (up.status !== undefined && up.status >= 400 ? String(up.status) : outcome === 'stream-error' ? 'stream-error' : undefined);
    if (upError) out.attr(K.ERROR_TYPE, upError);
    out.end(upError, undefined);
  }

  // The exchange: the request's and the answer's GenAI attributes, and the relay's own. All but two of them
  // are the same for every hit of one cache entry (same kept request and answer, same key, same origin):
  // written once per entry (SpanOut.repeat); the time to first chunk and the report id follow.
  const parent: ParentOfSpan | undefined = t.parentSpanId === undefined ? undefined : { spanId: t.parentSpanId, traceFlags: t.parentFlags ?? SAMPLED, isRemote: true };
  out.begin(name, SpanKind.SERVER, t.traceId, t.spanId, parent, t.start, end);
  const owner = f.cacheStatus === 'HIT' ? response : undefined;
  if (owner === undefined) sharedAttributes(out, f, report, response, operation, provider, requestModel, stream, error, outcome, captureContent);
  else {
    // (the inputs in an array kept for the purpose: a hit allocates none)
    const inputs = INPUTS;
    inputs[0] = report.request.body;
    inputs[1] = provider;
    inputs[2] = requestModel;
    inputs[3] = stream;
    inputs[4] = report.usage?.inputTokens;
    inputs[5] = report.usage?.outputTokens;
    inputs[6] = report.usage?.estimated;
    inputs[7] = report.costUsd;
    inputs[8] = f.method;
    inputs[9] = f.url;
    inputs[10] = f.status;
    inputs[11] = error;
    inputs[12] = f.cacheStatus;
    inputs[13] = f.cacheKey;
    inputs[14] = t.namespace;
    inputs[15] = f.originReportId;
    inputs[16] = outcome;
    inputs[17] = captureContent;
    if (!out.repeat(owner, inputs)) {
      sharedAttributes(out, f, report, response, operation, provider, requestModel, stream, error, outcome, captureContent);
      out.keep(owner, inputs);
    }
  }
  if (t.firstChunk !== undefined) out.attr(K.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, (t.firstChunk - t.start) / 1000);
  out.attr(K.RELAY_REPORT_ID, f.id);
  out.end(error, t.leader);
}

/**
 * What SpanOut.repeat compares for a hit: everything sharedAttributes reads but the answer, which is the owner
 * itself (kept here, refilled per hit).
 */
const INPUTS: unknown[] = new Array(18);

/**
 * The exchange span's attributes but its own two (time to first chunk, report id): for hits of one cache
 * entry these are all the same, so a writer may keep them (SpanOut.repeat). Everything they depend on is
 * the answer (the owner) or in INPUTS.
 */
function sharedAttributes(
  out: SpanOut,
  f: ProxyFacts,
  report: StoredReport,
  response: Record<string, unknown> | undefined,
  operation: string | undefined,
  provider: string | undefined,
  requestModel: string | undefined,
  stream: boolean,
  error: string | undefined,
  outcome: string,
  captureContent: boolean,
): void {
  requestAttributes(out, operation, provider, requestModel, stream);
  const responseModel = str(response?.model);
  if (responseModel) out.attr(K.GEN_AI_RESPONSE_MODEL, responseModel);
  const responseId = str(response?.id);
  if (responseId) out.attr(K.GEN_AI_RESPONSE_ID, responseId);
  const reasons = finishReasonsOf(response);
  if (reasons) out.attr(K.GEN_AI_RESPONSE_FINISH_REASONS, reasons);
  const usage = report.usage;
  if (usage) {
    out.attr(K.GEN_AI_USAGE_INPUT_TOKENS, usage.inputTokens);
    out.attr(K.GEN_AI_USAGE_OUTPUT_TOKENS, usage.outputTokens);
  }
  if (!operation) {
    // not a GenAI call the relay knows: the span is named by its method, and says its path
    out.attr(K.HTTP_REQUEST_METHOD, f.method);
    out.attr(K.URL_PATH, pathOf(f.url));
  }
  out.attr(K.HTTP_RESPONSE_STATUS_CODE, f.status);
  if (error) out.attr(K.ERROR_TYPE, error);
  out.attr(K.RELAY_CACHE_STATUS, f.cacheStatus);
  if (f.cacheKey) out.attr(K.RELAY_CACHE_KEY, f.cacheKey);
  if (f.trace?.namespace) out.attr(K.RELAY_CACHE_NAMESPACE, f.trace.namespace);
  if (f.originReportId) out.attr(K.RELAY_ORIGIN_REPORT_ID, f.originReportId);
  if (outcome !== 'complete') out.attr(K.RELAY_OUTCOME, outcome);
  // what the call cost upstream (a hit or coalesced call costs nothing: no attribute)
  if (typeof report.costUsd === 'number' && report.costUsd > 0) out.attr(K.RELAY_COST_USD, report.costUsd);
  if (usage?.estimated) out.attr(K.RELAY_USAGE_ESTIMATED, true);
  if (captureContent) addContent(out, report.request.body, report.response.body);
}

/** What both spans say of the GenAI request. */
function requestAttributes(out: SpanOut, operation: string | undefined, provider: string | undefined, model: string | undefined, stream: boolean): void {
  if (operation) out.attr(K.GEN_AI_OPERATION_NAME, operation);
  if (provider) out.attr(K.GEN_AI_PROVIDER_NAME, provider);
  if (model) out.attr(K.GEN_AI_REQUEST_MODEL, model);
  if (stream) out.attr(K.GEN_AI_REQUEST_STREAM, true);
}

/** `{operation} {model}`: a relay sees a few of each, so the names are kept rather than built per span. */
const names = new Map<string, Map<string, string>>();
let namesKept = 0;
function spanName(operation: string, model: string): string {
  let of = names.get(operation);
  if (of === undefined) names.set(operation, (of = new Map()));
  let name = of.get(model);
  if (name === undefined) {
    name = `${operation} ${model}`;
    if (namesKept++ < 1000) of.set(model, name);
  }
  return name;
}

/** server.address and server.port of an upstream origin (a relay has a few: parsed once each) */
const servers = new Map<string, { host: string; port: number }>();
function serverOf(origin: string | null): { host: string; port: number } {
  if (!origin) return { host: '', port: 0 };
  let s = servers.get(origin);
  if (!s) {
    const u = new URL(origin);
    s = { host: u.hostname, port: u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80 };
    if (servers.size < 1000) servers.set(origin, s);
  }
  return s;
}

function pathOf(url: string): string {
  const q = url.indexOf('?');
  // the query is left out: some providers take their key there (?key=…)
  return q < 0 ? url : url.slice(0, q);
}

function addContent(out: SpanOut, request: unknown, response: unknown): void {
  const m = messagesOf(request, response);
  if (m.system && m.system.length > 0) out.attr(K.GEN_AI_SYSTEM_INSTRUCTIONS, JSON.stringify(m.system));
  if (m.input) out.attr(K.GEN_AI_INPUT_MESSAGES, JSON.stringify(m.input));
  if (m.output) out.attr(K.GEN_AI_OUTPUT_MESSAGES, JSON.stringify(m.output));
}
