// The reference writer of the tracing tests: a SpanOut (src/tracing/exchange-spans.ts) that builds span
// objects, as the SDK's processors and the official serializers read them. The relay's own writers — protobuf
// bytes (otlp-proto.ts) and JSON text (otlp-json.ts) — are checked against the official serializers' output
// for the spans this one builds from the same exchanges.
import { type Attributes, type AttributeValue, type HrTime, type Link, type SpanContext, SpanKind, type SpanStatus, SpanStatusCode } from '@opentelemetry/api';
import { type InstrumentationScope, hrTimeDuration, millisToHrTime } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace-base';
import type { TraceFacts } from '../../../src/core/trace-facts.js';
import { LEADER_LINK_ATTRIBUTES, type ParentOfSpan, type SpanKey, type SpanOut } from '../../../src/tracing/exchange-spans.js';

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

/** The SpanOut that builds span objects. */
export class SpanObjects implements SpanOut {
  private attributes: Attributes = {};
  private name = '';
  private kind = SpanKind.INTERNAL;
  private context: SpanContext = { traceId: '', spanId: '', traceFlags: SAMPLED };
  private parent: SpanContext | undefined;
  private start = 0;
  private finish = 0;

  constructor(
    private readonly relay: { resource: Resource; scope: InstrumentationScope },
    private readonly emit: (span: ReadableSpan) => void,
  ) {}

  begin(name: string, kind: SpanKind, traceId: string, spanId: string, parent: ParentOfSpan | undefined, start: number, end: number): void {
    this.name = name;
    this.kind = kind;
    this.context = { traceId, spanId, traceFlags: SAMPLED };
    this.parent = parent && (parent.isRemote === undefined ? { traceId, spanId: parent.spanId, traceFlags: parent.traceFlags } : { traceId, spanId: parent.spanId, traceFlags: parent.traceFlags, isRemote: parent.isRemote });
    this.start = start;
    this.finish = end;
    this.attributes = {};
  }

  attr(key: SpanKey, value: AttributeValue): void {
    this.attributes[key.name] = value;
  }

  repeat(): boolean {
    return false;
  }

  keep(): void {}

  end(error: string | undefined, leader: TraceFacts['leader']): void {
    const links: Link[] = leader ? [{ context: { traceId: leader.traceId, spanId: leader.spanId, traceFlags: SAMPLED }, attributes: LEADER_LINK_ATTRIBUTES }] : NO_LINKS;
    this.emit(
      new RelaySpan(
        this.name,
        this.kind,
        this.context,
        this.parent,
        this.start,
        this.finish,
        this.attributes,
        error ? { code: SpanStatusCode.ERROR, message: error } : OK,
        links,
        this.relay.resource,
        this.relay.scope,
      ),
    );
  }
}
