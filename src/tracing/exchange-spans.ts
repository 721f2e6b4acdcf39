// The spans of one exchange, built on the report worker from what the event loop noted (TraceFacts) and
// what the report derived (model, tokens, finish reasons, cost), so that the event loop never parses an
// answer for a span. One SERVER span for the exchange (the relay is the client's server), named as the
// GenAI conventions name an inference span, `{gen_ai.operation.name} {gen_ai.request.model}`; and, when the
// exchange went upstream, one CLIENT child span for that call (the relay is the provider's client), whose
// id went upstream in traceparent. A hit has no child; a coalesced call links to the call it shared.
import { type Attributes, type HrTime, type Link, type SpanContext, SpanKind, type SpanStatus, SpanStatusCode } from '@opentelemetry/api';
import { type InstrumentationScope, hrTimeDuration, millisToHrTime } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace-base';
import type { ProxyFacts } from '../core/exchange-record.js';
import type { StoredReport } from '../storage/report-store.js';
import * as A from './genai-attributes.js';
import { finishReasonsOf, messagesOf } from './genai-messages.js';

const SAMPLED = 1;
const NO_EVENTS: TimedEvent[] = [];
const NO_LINKS: Link[] = [];
const OK: SpanStatus = { code: SpanStatusCode.UNSET };

/** A finished span as the SDK's processors and exporters read it. */
class RelaySpan implements ReadableSpan {
  readonly ended = true;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;
  readonly events = NO_EVENTS;
  readonly startTime: HrTime;
  readonly endTime: HrTime;
  readonly duration: HrTime;
  constructor(
    readonly name: string,
    readonly kind: SpanKind,
    private readonly context: SpanContext,
    readonly parentSpanContext: SpanContext | undefined,
    start: number,
    end: number,
    readonly attributes: Attributes,
    readonly status: SpanStatus,
    readonly links: Link[],
    readonly resource: Resource,
    readonly instrumentationScope: InstrumentationScope,
  ) {
    this.startTime = millisToHrTime(start);
    this.endTime = millisToHrTime(Math.max(start, end));
    this.duration = hrTimeDuration(this.startTime, this.endTime);
  }
  spanContext(): SpanContext {
    return this.context;
  }
}

const obj = (v: unknown): Record<string, unknown> | undefined =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

export interface SpanContextOfRelay {
  resource: Resource;
  scope: InstrumentationScope;
  captureContent: boolean;
}

/** What the span says went wrong, or undefined: the relay's error code, a broken stream, or an error status. */
function errorTypeOf(f: ProxyFacts, outcome: string): string | undefined {
  if (f.trace?.upstream?.error) return f.trace.upstream.error;
  if (outcome === 'stream-error' || outcome === 'cache-only-miss') return outcome;
  return f.status >= 400 ? String(f.status) : undefined;
}

/** The spans of one exchange (its facts carry trace facts), in the order they ended: child first. */
export function exchangeSpans(f: ProxyFacts, report: StoredReport, relay: SpanContextOfRelay): ReadableSpan[] {
  const t = f.trace!;
  const request = obj(report.request.body);
  const response = obj(report.response.body);
  const operation = A.operationOf(f.url);
  const requestModel = str(request?.model) ?? report.model ?? undefined;
  const name = operation ? (requestModel ? `${operation} ${requestModel}` : operation) : f.method;
  const { host, port } = serverOf(f.upstream);

  // What both spans say of the GenAI request.
  const requestAttributes: Attributes = {};
  if (operation) requestAttributes[A.GEN_AI_OPERATION_NAME] = operation;
  const provider = A.providerOf(report.provider, host);
  if (provider) requestAttributes[A.GEN_AI_PROVIDER_NAME] = provider;
  if (requestModel) requestAttributes[A.GEN_AI_REQUEST_MODEL] = requestModel;
  if (request?.stream === true) requestAttributes[A.GEN_AI_REQUEST_STREAM] = true;

  // the report's outcome: a stream that ended cleanly but carried an error event is a stream-error there
  const reported = obj(report.proxy)?.outcome;
  const outcome = typeof reported === 'string' ? reported : f.outcome;
  const error = errorTypeOf(f, outcome);
  const spans: ReadableSpan[] = [];
  const serverContext: SpanContext = { traceId: t.traceId, spanId: t.spanId, traceFlags: SAMPLED };
  const end = t.end ?? t.start;

  const up = t.upstream;
  if (up) {
    // The upstream call: the request's GenAI attributes, the server it reached, its status and first chunk.
    // What the answer held (model, id, finish reasons, tokens) is said once, on the exchange's span: a
    // backend that sums gen_ai.usage.* over a trace must not count a call twice.
    const attributes: Attributes = Object.assign({}, requestAttributes);
    if (host) {
      attributes[A.SERVER_ADDRESS] = host;
      attributes[A.SERVER_PORT] = port;
    }
    if (up.status !== undefined) attributes[A.HTTP_RESPONSE_STATUS_CODE] = up.status;
    if (t.firstChunk !== undefined && up.status !== undefined) attributes[A.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (t.firstChunk - up.start) / 1000;
    const upError = up.error ?? (up.status !== undefined && up.status >= 400 ? String(up.status) : outcome === 'stream-error' ? 'stream-error' : undefined);
    if (upError) attributes[A.ERROR_TYPE] = upError;
    spans.push(
      new RelaySpan(
        name,
        SpanKind.CLIENT,
        { traceId: t.traceId, spanId: up.spanId, traceFlags: SAMPLED },
        serverContext,
        up.start,
        up.end ?? end,
        attributes,
        upError ? { code: SpanStatusCode.ERROR, message: upError } : OK,
        NO_LINKS,
        relay.resource,
        relay.scope,
      ),
    );
  }

  // The exchange: the request's and the answer's GenAI attributes, and the relay's own.
  const attributes: Attributes = requestAttributes;
  const responseModel = str(response?.model);
  if (responseModel) attributes[A.GEN_AI_RESPONSE_MODEL] = responseModel;
  const responseId = str(response?.id);
  if (responseId) attributes[A.GEN_AI_RESPONSE_ID] = responseId;
  const reasons = finishReasonsOf(response);
  if (reasons) attributes[A.GEN_AI_RESPONSE_FINISH_REASONS] = reasons;
  if (report.usage) {
    attributes[A.GEN_AI_USAGE_INPUT_TOKENS] = report.usage.inputTokens;
    attributes[A.GEN_AI_USAGE_OUTPUT_TOKENS] = report.usage.outputTokens;
  }
  if (!operation) {
    // not a GenAI call the relay knows: the span is named by its method, and says its path
    attributes[A.HTTP_REQUEST_METHOD] = f.method;
    attributes[A.URL_PATH] = pathOf(f.url);
  }
  attributes[A.HTTP_RESPONSE_STATUS_CODE] = f.status;
  if (t.firstChunk !== undefined) attributes[A.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (t.firstChunk - t.start) / 1000;
  if (error) attributes[A.ERROR_TYPE] = error;
  attributes[A.RELAY_CACHE_STATUS] = f.cacheStatus;
  if (f.cacheKey) attributes[A.RELAY_CACHE_KEY] = f.cacheKey;
  if (t.namespace) attributes[A.RELAY_CACHE_NAMESPACE] = t.namespace;
  attributes[A.RELAY_REPORT_ID] = f.id;
  if (f.originReportId) attributes[A.RELAY_ORIGIN_REPORT_ID] = f.originReportId;
  if (outcome !== 'complete') attributes[A.RELAY_OUTCOME] = outcome;
  // what the call cost upstream (a hit or coalesced call costs nothing: no attribute)
  if (typeof report.costUsd === 'number' && report.costUsd > 0) attributes[A.RELAY_COST_USD] = report.costUsd;
  if (report.usage?.estimated) attributes[A.RELAY_USAGE_ESTIMATED] = true;
  if (relay.captureContent) addContent(attributes, report.request.body, report.response.body);

  const parent: SpanContext | undefined =
    t.parentSpanId === undefined
      ? undefined
      : { traceId: t.traceId, spanId: t.parentSpanId, traceFlags: t.parentFlags ?? SAMPLED, isRemote: true };
  const links: Link[] = t.leader ? [{ context: { traceId: t.leader.traceId, spanId: t.leader.spanId, traceFlags: SAMPLED }, attributes: { [A.RELAY_LINK_LEADER]: true } }] : NO_LINKS;
  spans.push(
    new RelaySpan(name, SpanKind.SERVER, serverContext, parent, t.start, end, attributes, error ? { code: SpanStatusCode.ERROR, message: error } : OK, links, relay.resource, relay.scope),
  );
  return spans;
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

function addContent(attributes: Attributes, request: unknown, response: unknown): void {
  const m = messagesOf(request, response);
  if (m.system && m.system.length > 0) attributes[A.GEN_AI_SYSTEM_INSTRUCTIONS] = JSON.stringify(m.system);
  if (m.input) attributes[A.GEN_AI_INPUT_MESSAGES] = JSON.stringify(m.input);
  if (m.output) attributes[A.GEN_AI_OUTPUT_MESSAGES] = JSON.stringify(m.output);
}
