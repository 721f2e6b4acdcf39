// The export side of tracing, on the report worker thread (loaded there only when tracing is on): each
// exchange's spans go to the SDK's BatchSpanProcessor and from there to the official OTLP exporter
// (http/protobuf or http/json). For http/protobuf a span reaches the processor already encoded (ProtoSpans
// of otlp-proto.ts: bytes in a shared buffer, no span object); for http/json as a span object
// (SpanObjects), for the official JSON serializer. Nothing here runs on the event loop, so an endpoint
// that is slow or down cannot delay an answer; the processor's queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE),
// and what does not fit is dropped and counted. The SDK drops silently, so the counting is done around it:
// spans handed to the processor, spans it handed to the exporter (it takes them off its queue in the same
// step), and the exporter's outcome for each.
import { hostname } from 'node:os';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { ProxyFacts } from '../core/exchange-record.js';
import type { StoredReport } from '../storage/report-store.js';
import { SpanObjects, type SpanOut, exchangeSpans } from './exchange-spans.js';
import { HOST_NAME, SCHEMA_URL, SERVICE_NAME, SERVICE_VERSION } from './genai-attributes.js';
import type { EncodedSpan } from './otlp-proto.js';
import { lastExportBoundMs, type TracingSettings } from './tracing-config.js';

export interface SpanCounters {
  /** spans the exporter delivered */
  exported: number;
  /** spans in exports that failed (endpoint down, refused, timed out) */
  failed: number;
  /** spans dropped because the processor's queue was full */
  dropped: number;
}

export interface SpanExport {
  /** the spans of one traced exchange, once its report is built */
  submit(facts: ProxyFacts, report: StoredReport): void;
  readonly counters: SpanCounters;
  /** exports what is queued (shutdown) */
  shutdown(): Promise<void>;
}

export interface SpanExportOptions {
  version: string;
  /** the counters changed (an export ended, or spans were dropped) */
  onCounters(): void;
  /** an export failed (called at most once a minute): for one log line, never with a header value */
  onFailure(err: Error | undefined): void;
}

async function otlpExporter(settings: TracingSettings): Promise<SpanExporter> {
  const config = { url: settings.url, headers: settings.headers, timeoutMillis: settings.timeoutMs };
  if (settings.protocol === 'http/json') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    return new OTLPTraceExporter(config);
  }
  // http/protobuf: the official exporter's parts (its delegate: transport, retries, timeouts, headers,
  // compression, OTEL_EXPORTER_OTLP_* settings), assembled as its OTLPTraceExporter assembles them, with the
  // relay's single-pass encoder in place of the official serializer (otlp-proto.ts says why; same bytes).
  const [{ OTLPExporterBase }, { createOtlpHttpExportDelegate, convertLegacyHttpOptions }, { ProtobufTraceSerializer, TraceExporterMetricsHelper }, { encodeTraceExport }] =
    await Promise.all([
      import('@opentelemetry/otlp-exporter-base'),
      import('@opentelemetry/otlp-exporter-base/node-http'),
      import('@opentelemetry/otlp-transformer'),
      import('./otlp-proto.js'),
    ]);
  const serializer = { serializeRequest: encodeTraceExport, deserializeResponse: ProtobufTraceSerializer.deserializeResponse };
  return new OTLPExporterBase(
    createOtlpHttpExportDelegate(
      convertLegacyHttpOptions(config, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' }),
      serializer,
      'otlp_http_span_exporter',
      TraceExporterMetricsHelper,
      undefined,
    ),
  );
}

export async function createSpanExport(settings: TracingSettings, opts: SpanExportOptions): Promise<SpanExport> {
  const inner = await otlpExporter(settings);
  const counters: SpanCounters = { exported: 0, failed: 0, dropped: 0 };
  let handed = 0;
  let taken = 0;
  let lastFailure = -Infinity;
  /** set when shutdown stopped waiting: what had not been delivered by then is counted failed, once */
  let gaveUp = false;

  const counting: SpanExporter = {
    export(spans: ReadableSpan[], done: (result: ExportResult) => void) {
      const n = spans.length;
      taken += n;
      inner.export(spans, (result) => {
        if (gaveUp) return done(result);
        if (result.code === ExportResultCode.SUCCESS) counters.exported += n;
        else {
          counters.failed += n;
          const now = Date.now();
          if (now - lastFailure >= 60_000) {
            lastFailure = now;
            opts.onFailure(result.error);
          }
        }
        opts.onCounters();
        done(result);
      });
    },
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
  const processor = new BatchSpanProcessor(counting, {
    maxQueueSize: settings.maxQueueSize,
    maxExportBatchSize: settings.maxExportBatchSize,
    scheduledDelayMillis: settings.scheduleDelayMs,
    exportTimeoutMillis: settings.exportTimeoutMs,
  });

  const resource = defaultResource().merge(
    resourceFromAttributes(
      Object.assign({ [HOST_NAME]: hostname() }, settings.resourceAttributes, { [SERVICE_NAME]: settings.serviceName, [SERVICE_VERSION]: opts.version }),
    ),
  );
  const scope = { name: 'llm-relay', version: opts.version, schemaUrl: SCHEMA_URL };
  let dropped = 0;
  const hand = (span: ReadableSpan | EncodedSpan): void => {
    // The processor's queue holds what it was handed and has not yet passed to the exporter: when that is
    // full, it drops the span without a word. Counted here, and not handed to it at all.
    if (handed - taken >= settings.maxQueueSize) {
      dropped++;
      return;
    }
    handed++;
    // (an EncodedSpan stands in for a span object: it has what the processor reads, see otlp-proto.ts)
    processor.onEnd(span as ReadableSpan);
  };
  // http/protobuf: each span is written as bytes as it ends (otlp-proto.ts), and the processor queues those;
  // http/json: span objects, for the official JSON serializer.
  const out: SpanOut =
    settings.protocol === 'http/protobuf'
      ? new (await import('./otlp-proto.js')).ProtoSpans(resource, scope, hand)
      : new SpanObjects({ resource, scope }, hand);

  return {
    counters,
    submit(facts, report) {
      exchangeSpans(facts, report, out, settings.captureContent);
      if (dropped > 0) {
        counters.dropped += dropped;
        dropped = 0;
        opts.onCounters();
      }
    },
    async shutdown() {
      // What is queued gets one last try, bounded: an endpoint that hangs must not hold the relay's stop.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        processor.shutdown().catch(() => undefined),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, lastExportBoundMs(settings)))),
      ]);
      clearTimeout(timer);
      // Spans still queued, or in an export that has not ended, are not delivered now: failed, for the
      // counters the thread hands on (the worker ends next).
      gaveUp = true;
      const unsettled = handed - counters.exported - counters.failed;
      if (unsettled > 0) {
        counters.failed += unsettled;
        opts.onCounters();
      }
    },
  };
}
