// The export side of tracing, on the report worker thread (loaded there only when tracing is on): each
// exchange's spans go to the SDK's BatchSpanProcessor and from there to the official OTLP/HTTP export
// delegate (http/protobuf or http/json). A span reaches the processor already written in the protocol's form
// — protobuf bytes in a shared buffer (ProtoSpans of otlp-proto.ts) or JSON text (JsonSpans of
// otlp-json.ts) — with no span object, and the export joins them (the official serializers' bytes). Nothing
// here runs on the event loop, so an endpoint that is slow or down cannot delay an answer; the processor's
// queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE), and what does not fit is dropped and counted. The SDK drops
// silently, so the counting is done around it: spans handed to the processor, spans it handed to the
// exporter (it takes them off its queue in the same step), and the exporter's outcome for each.
import type { Agent, ClientRequest } from 'node:http';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { type PeerCertificate, checkServerIdentity } from 'node:tls';
import { ExportResultCode, type ExportResult, type InstrumentationScope } from '@opentelemetry/core';
import { type Resource, defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { HttpsProxyAgent } from 'https-proxy-agent';
import type { ProxyFacts } from '../core/exchange-record.js';
import type { StoredReport } from '../storage/report-store.js';
import { type SpanOut, exchangeSpans } from './exchange-spans.js';
import { HOST_NAME, SCHEMA_URL, SERVICE_NAME, SERVICE_VERSION } from './genai-attributes.js';
import type { JsonSpan } from './otlp-json.js';
import type { EncodedSpan } from './otlp-proto.js';
import { lastExportBoundMs, type TracingSettings } from './tracing-config.js';
import { type UpstreamProxy, proxyForUrl } from '../upstream/upstream-proxy.js';

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
  /** HTTPS_PROXY / HTTP_PROXY / NO_PROXY as the calls upstream read them: the endpoint is reached the same way */
  proxy?: UpstreamProxy;
}

/** A protocol's writer: the SpanOut that writes each span as it ends, and the export of what it wrote. */
interface SpanWriter {
  contentType: string;
  out(resource: Resource, scope: InstrumentationScope, hand: (span: EncodedSpan | JsonSpan) => void): SpanOut;
  /** (the delegate hands it what the processor was handed: the writer's spans, standing in for span objects) */
  encode(spans: ReadableSpan[]): Uint8Array;
}

/** Only the configured protocol's writer is loaded. */
async function spanWriter(protocol: TracingSettings['protocol']): Promise<SpanWriter> {
  if (protocol === 'http/json') {
    const { JsonSpans, encodeTraceJson } = await import('./otlp-json.js');
    return { contentType: 'application/json', out: (r, s, hand) => new JsonSpans(r, s, hand), encode: encodeTraceJson as unknown as SpanWriter['encode'] };
  }
  const { ProtoSpans, encodeTraceExport } = await import('./otlp-proto.js');
  return { contentType: 'application/x-protobuf', out: (r, s, hand) => new ProtoSpans(r, s, hand), encode: encodeTraceExport };
}

/**
 * The official OTLP/HTTP exporter's parts (its delegate: transport, retries, timeouts, headers, compression,
 * OTEL_EXPORTER_OTLP_* settings), assembled as its own OTLPTraceExporter classes assemble them, with the
 * relay's writer in place of the official serializer (otlp-proto.ts, otlp-json.ts say why; same bytes).
 */
async function otlpExporter(settings: TracingSettings, writer: SpanWriter, proxy: UpstreamProxy | undefined): Promise<SpanExporter> {
  const config = { url: settings.url, headers: settings.headers, timeoutMillis: settings.timeoutMs };
  const [{ OTLPExporterBase }, { createOtlpHttpExportDelegate, convertLegacyHttpOptions }, { JsonTraceSerializer, ProtobufTraceSerializer, TraceExporterMetricsHelper }] = await Promise.all([
    import('@opentelemetry/otlp-exporter-base'),
    import('@opentelemetry/otlp-exporter-base/node-http'),
    import('@opentelemetry/otlp-transformer'),
  ]);
  const { deserializeResponse } = settings.protocol === 'http/json' ? JsonTraceSerializer : ProtobufTraceSerializer;
  const http = convertLegacyHttpOptions(config, 'TRACES', 'v1/traces', { 'Content-Type': writer.contentType });
  const via = proxyForUrl(proxy, http.url);
  if (via !== undefined) http.agentFactory = await throughProxy(via, http.agentFactory);
  return new OTLPExporterBase(
    createOtlpHttpExportDelegate(
      http,
      { serializeRequest: writer.encode, deserializeResponse },
      'otlp_http_span_exporter',
      TraceExporterMetricsHelper,
      undefined,
    ),
  );
}

type AgentFactory = (protocol: string) => Promise<Agent> | Agent;
type AgentConnectOpts = Parameters<HttpsProxyAgent<string>['connect']>[1];

/**
 * The exporter's connections through the proxy, in a CONNECT tunnel (https-proxy-agent; TLS to the endpoint
 * inside it for an https one), as undici makes the calls upstream: the proxy sees the endpoint's host and
 * port, never the spans or OTLP's headers. The TLS to the endpoint takes the certificates the exporter's own
 * agent was made with (OTEL_EXPORTER_OTLP_CERTIFICATE, _CLIENT_CERTIFICATE, _CLIENT_KEY); the proxy agent
 * keeps no agent options of its own for them, so they are handed to each tunnel's TLS.
 */
async function throughProxy(proxyUrl: string, own: AgentFactory): Promise<AgentFactory> {
  const { HttpsProxyAgent: ProxyAgent } = await import('https-proxy-agent');
  class TunnelAgent extends ProxyAgent<string> {
    constructor(private readonly endpointTls: Record<string, unknown>) {
      super(proxyUrl, { keepAlive: true });
    }
    override connect(req: ClientRequest, opts: AgentConnectOpts) {
      // (its TLS inside the tunnel is told no host, so an endpoint given by IP is checked as that IP here)
      const host = opts.host;
      const byIp = host !== undefined && isIP(host) !== 0 ? { checkServerIdentity: (_: string, cert: PeerCertificate) => checkServerIdentity(host, cert) } : {};
      return super.connect(req, { ...opts, ...this.endpointTls, ...byIp } as AgentConnectOpts);
    }
  }
  return async (protocol) => {
    const agent = await own(protocol);
    const { ca, cert, key } = (agent as unknown as { options: { ca?: unknown; cert?: unknown; key?: unknown } }).options;
    agent.destroy();
    return new TunnelAgent({ ...(ca ? { ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}) });
  };
}

export async function createSpanExport(settings: TracingSettings, opts: SpanExportOptions): Promise<SpanExport> {
  const writer = await spanWriter(settings.protocol);
  const inner = await otlpExporter(settings, writer, opts.proxy);
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
  const hand = (span: EncodedSpan | JsonSpan): void => {
    // The processor's queue holds what it was handed and has not yet passed to the exporter: when that is
    // full, it drops the span without a word. Counted here, and not handed to it at all.
    if (handed - taken >= settings.maxQueueSize) {
      dropped++;
      return;
    }
    handed++;
    // (an EncodedSpan or JsonSpan stands in for a span object: it has what the processor reads)
    processor.onEnd(span as unknown as ReadableSpan);
  };
  // each span is written in the protocol's form as it ends, and the processor queues that
  const out = writer.out(resource, scope, hand);

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
