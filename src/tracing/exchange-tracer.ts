// The event loop's share of tracing, loaded only when tracing is on: read the client's traceparent (the W3C
// propagator of @opentelemetry/core), ask the sampler, and hand out span ids. No span object lives here:
// the exchange notes times in its TraceFacts, and the report worker builds and exports the spans from them
// (exchange-spans.ts, span-export.ts), once the report says what the answer held. Per exchange this is two
// random ids, one sampler call, and a header parse when the client sent one.
import type { IncomingHttpHeaders } from 'node:http';
import { type Context, ROOT_CONTEXT, SpanKind, type TextMapGetter, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  RandomIdGenerator,
  type Sampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import { type ExchangeTracing, type TraceFacts, epochMs } from '../core/trace-facts.js';
import type { TracingSettings } from './tracing-config.js';

const SAMPLED = 1;
const NO_ATTRIBUTES = Object.freeze({});
const NO_LINKS: never[] = [];

/** The sampler OTEL_TRACES_SAMPLER (and _ARG) name, as the SDK's own env configuration builds it. */
export function samplerOf(settings: Pick<TracingSettings, 'sampler' | 'samplerRatio'>): Sampler {
  switch (settings.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(settings.samplerRatio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.samplerRatio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** Node's lower-cased request headers as the propagator's carrier. */
const headerGetter: TextMapGetter<IncomingHttpHeaders> = {
  get: (carrier, key) => carrier[key],
  keys: (carrier) => Object.keys(carrier),
};

export function createExchangeTracer(settings: TracingSettings): ExchangeTracing {
  const propagator = new W3CTraceContextPropagator();
  const ids = new RandomIdGenerator();
  const sampler = samplerOf(settings);
  // Without a client parent, always_on and parentbased_always_on (the default) sample every exchange: no
  // sampler call needed.
  const rootAlwaysOn = settings.sampler === 'always_on' || settings.sampler === 'parentbased_always_on';

  return {
    begin(headers: IncomingHttpHeaders, method: string, t0: number): TraceFacts | undefined {
      let ctx: Context = ROOT_CONTEXT;
      const parent = headers.traceparent === undefined ? undefined : trace.getSpanContext((ctx = propagator.extract(ROOT_CONTEXT, headers, headerGetter)));
      const traceId = parent?.traceId ?? ids.generateTraceId();
      if (parent || !rootAlwaysOn) {
        const decision = sampler.shouldSample(ctx, traceId, method, SpanKind.SERVER, NO_ATTRIBUTES, NO_LINKS).decision;
        if (decision !== SamplingDecision.RECORD_AND_SAMPLED) return undefined;
      }
      const facts: TraceFacts = { traceId, spanId: ids.generateSpanId(), start: epochMs(t0) };
      if (parent) {
        facts.parentSpanId = parent.spanId;
        facts.parentFlags = parent.traceFlags;
        const state = parent.traceState?.serialize();
        if (state) facts.traceState = state;
      }
      return facts;
    },

    upstream(facts: TraceFacts, headers: Record<string, string | string[]>): void {
      const spanId = ids.generateSpanId();
      facts.upstream = { spanId, start: epochMs(performance.now()) };
      // W3C Trace Context, version 00: the upstream call's span is the upstream's parent.
      headers.traceparent = `00-${facts.traceId}-${spanId}-0${SAMPLED}`;
      if (facts.traceState) headers.tracestate = facts.traceState;
      else delete headers.tracestate;
    },
  };
}
