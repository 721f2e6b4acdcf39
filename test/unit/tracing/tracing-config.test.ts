// OTEL_* variables → tracing settings, as the OpenTelemetry environment specification reads them.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../src/config.js';
import { TRACING_OFF, tracingFromEnv } from '../../../src/tracing/tracing-config.js';

function read(env: Record<string, string>) {
  const problems: string[] = [];
  return { settings: tracingFromEnv(env, problems), problems };
}

describe('tracing settings', () => {
  it('are off without an endpoint, whatever else is set', () => {
    expect(read({}).settings).toEqual(TRACING_OFF);
    expect(read({ OTEL_SERVICE_NAME: 'x', OTEL_BSP_MAX_QUEUE_SIZE: '10' }).settings.enabled).toBe(false);
    expect(loadConfig({ env: {} }).tracing.enabled).toBe(false);
  });

  it('take the general endpoint with /v1/traces appended, or the signal endpoint as it is', () => {
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).settings).toMatchObject({ enabled: true, url: 'http://collector:4318/v1/traces', protocol: 'http/protobuf' });
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).settings.url).toBe('http://collector:4318/v1/traces');
    expect(
      read({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/custom/path' }).settings.url,
    ).toBe('https://b/custom/path');
  });

  it('read protocol, headers, resource, batch, sampler and content settings', () => {
    const { settings, problems } = read({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'api-key=a%20b,x=1',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x=2',
      OTEL_EXPORTER_OTLP_TIMEOUT: '3000',
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-resource,deployment.environment.name=prod',
      OTEL_BSP_MAX_QUEUE_SIZE: '100',
      OTEL_BSP_SCHEDULE_DELAY: '250',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '500',
      OTEL_BSP_EXPORT_TIMEOUT: '2000',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'TRUE',
    });
    expect(problems).toEqual([]);
    expect(settings).toEqual({
      enabled: true,
      url: 'http://c:4318/v1/traces',
      protocol: 'http/json',
      headers: { 'api-key': 'a b', x: '2' },
      timeoutMs: 3000,
      serviceName: 'from-resource',
      resourceAttributes: { 'deployment.environment.name': 'prod' },
      maxQueueSize: 100,
      scheduleDelayMs: 250,
      // never more than the queue holds
      maxExportBatchSize: 100,
      exportTimeoutMs: 2000,
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.25,
      captureContent: true,
    });
    expect(read({ OTEL_SERVICE_NAME: 'named', OTEL_RESOURCE_ATTRIBUTES: 'service.name=other' }).settings.serviceName).toBe('named');
  });

  it('are off with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none', () => {
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).settings.enabled).toBe(false);
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }).settings.enabled).toBe(false);
  });

  it('refuse what they cannot honour, at start, without echoing a header value', () => {
    let err: unknown;
    try {
      loadConfig({
        env: {
          OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
          OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
          OTEL_EXPORTER_OTLP_HEADERS: 'secret-token-without-key',
          OTEL_BSP_MAX_QUEUE_SIZE: '0',
          OTEL_TRACES_SAMPLER: 'jaeger_remote',
          OTEL_TRACES_EXPORTER: 'zipkin',
        },
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    for (const name of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_BSP_MAX_QUEUE_SIZE', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_EXPORTER'])
      expect(message).toContain(name);
    expect(message).not.toContain('secret-token-without-key');
  });
});
