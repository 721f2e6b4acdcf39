// Tracing is configured only through the standard OpenTelemetry variables (OTEL_*), read here from the
// environment config.ts hands over (it is the one file that reads process.env). Off unless an OTLP
// endpoint is set, and then nothing of OpenTelemetry is even loaded. Plain data: it also crosses to the
// report worker, where the spans are built and exported.
import { SERVICE_NAME } from './genai-attributes.js';

export type OtlpProtocol = 'http/protobuf' | 'http/json';
export type SamplerName =
  | 'always_on'
  | 'always_off'
  | 'traceidratio'
  | 'parentbased_always_on'
  | 'parentbased_always_off'
  | 'parentbased_traceidratio';

export interface TracingSettings {
  enabled: boolean;
  /** the traces URL (…/v1/traces) */
  url: string;
  protocol: OtlpProtocol;
  /** sent with every export (OTEL_EXPORTER_OTLP_HEADERS): values are never logged or put in spans */
  headers: Record<string, string>;
  timeoutMs: number;
  serviceName: string;
  resourceAttributes: Record<string, string>;
  maxQueueSize: number;
  scheduleDelayMs: number;
  maxExportBatchSize: number;
  exportTimeoutMs: number;
  sampler: SamplerName;
  /** the ratio of the traceidratio samplers, 0..1 */
  samplerRatio: number;
  /** put prompts and answers in spans (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT) */
  captureContent: boolean;
}

export const TRACING_OFF: TracingSettings = Object.freeze({
  enabled: false,
  url: '',
  protocol: 'http/protobuf',
  headers: {},
  timeoutMs: 10_000,
  serviceName: 'llm-relay',
  resourceAttributes: {},
  maxQueueSize: 2048,
  scheduleDelayMs: 5000,
  maxExportBatchSize: 512,
  exportTimeoutMs: 30_000,
  sampler: 'parentbased_always_on',
  samplerRatio: 1,
  captureContent: false,
}) as TracingSettings;

/**
 * How long a worker's last export may take when it stops (the relay's stop, or an idle stop): the export's
 * own timeout, at most 5 s — an endpoint that hangs must not hold a stop. What is not delivered by then is
 * counted failed.
 */
export function lastExportBoundMs(t: Pick<TracingSettings, 'timeoutMs'>): number {
  return Math.min(t.timeoutMs, 5000);
}

const SAMPLERS: readonly SamplerName[] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];

type Env = Record<string, string | undefined>;

function value(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v === undefined || v === '' ? undefined : v;
}

/** `k1=v1,k2=v2` with percent-encoded values (W3C baggage form), as OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES take it. */
export function parseKeyValues(text: string | undefined, name: string, problems: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  if (!text) return out;
  for (const part of text.split(',')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    const key = eq < 0 ? '' : part.slice(0, eq).trim();
    if (!key) {
      // the part may hold a secret: the message names the variable, never the value
      problems.push(`${name}: each entry must be key=value`);
      continue;
    }
    try {
      out[key] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      problems.push(`${name}: the value of "${key}" is not valid percent-encoding`);
    }
  }
  return out;
}

function int(env: Env, name: string, fallback: number, min: number, problems: string[]): number {
  const v = value(env, name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min) {
    problems.push(`${name}: must be a whole number of at least ${min}`);
    return fallback;
  }
  return n;
}

/** The traces URL: the signal's own endpoint as it is, or the general one with /v1/traces appended. */
function tracesUrl(env: Env, problems: string[]): string {
  const own = value(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const general = value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const url = own ?? (general === undefined ? '' : `${general.replace(/\/+$/, '')}/v1/traces`);
  if (url === '') return '';
  try {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('not http');
  } catch {
    problems.push(`${own === undefined ? 'OTEL_EXPORTER_OTLP_ENDPOINT' : 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'}: must be an http:// or https:// URL`);
    return '';
  }
  return url;
}

export function tracingFromEnv(env: Env, problems: string[]): TracingSettings {
  const url = tracesUrl(env, problems);
  const disabled = value(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true';
  const exporter = value(env, 'OTEL_TRACES_EXPORTER')?.toLowerCase();
  if (exporter !== undefined && exporter !== 'otlp' && exporter !== 'none')
    problems.push(`OTEL_TRACES_EXPORTER: the relay exports traces over OTLP only ("otlp" or "none"), not "${exporter}"`);

  const protocolName = value(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = value(env, protocolName) ?? 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json')
    problems.push(`${protocolName}: must be http/protobuf or http/json (grpc is not supported), not "${protocol}"`);

  const resourceAttributes = parseKeyValues(value(env, 'OTEL_RESOURCE_ATTRIBUTES'), 'OTEL_RESOURCE_ATTRIBUTES', problems);
  const serviceName = value(env, 'OTEL_SERVICE_NAME') ?? resourceAttributes[SERVICE_NAME] ?? 'llm-relay';
  delete resourceAttributes[SERVICE_NAME];
  const headers = Object.assign(
    parseKeyValues(value(env, 'OTEL_EXPORTER_OTLP_HEADERS'), 'OTEL_EXPORTER_OTLP_HEADERS', problems),
    parseKeyValues(value(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'), 'OTEL_EXPORTER_OTLP_TRACES_HEADERS', problems),
  );

  const samplerText = value(env, 'OTEL_TRACES_SAMPLER')?.toLowerCase() ?? 'parentbased_always_on';
  let sampler: SamplerName = 'parentbased_always_on';
  if ((SAMPLERS as readonly string[]).includes(samplerText)) sampler = samplerText as SamplerName;
  else problems.push(`OTEL_TRACES_SAMPLER: must be one of ${SAMPLERS.join(', ')}, not "${samplerText}"`);
  let samplerRatio = 1;
  const arg = value(env, 'OTEL_TRACES_SAMPLER_ARG');
  if (sampler.endsWith('traceidratio') && arg !== undefined) {
    const r = Number(arg);
    if (!Number.isFinite(r) || r < 0 || r > 1) problems.push('OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1');
    else samplerRatio = r;
  }

  const maxQueueSize = int(env, 'OTEL_BSP_MAX_QUEUE_SIZE', TRACING_OFF.maxQueueSize, 1, problems);
  const maxExportBatchSize = Math.min(maxQueueSize, int(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', TRACING_OFF.maxExportBatchSize, 1, problems));
  const timeoutName = value(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT') ? 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TIMEOUT';
  return {
    enabled: url !== '' && !disabled && exporter !== 'none',
    url,
    protocol: protocol === 'http/json' ? 'http/json' : 'http/protobuf',
    headers,
    timeoutMs: int(env, timeoutName, TRACING_OFF.timeoutMs, 1, problems),
    serviceName,
    resourceAttributes,
    maxQueueSize,
    scheduleDelayMs: int(env, 'OTEL_BSP_SCHEDULE_DELAY', TRACING_OFF.scheduleDelayMs, 0, problems),
    maxExportBatchSize,
    exportTimeoutMs: int(env, 'OTEL_BSP_EXPORT_TIMEOUT', TRACING_OFF.exportTimeoutMs, 1, problems),
    sampler,
    samplerRatio,
    captureContent: value(env, 'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT')?.toLowerCase() === 'true',
  };
}
