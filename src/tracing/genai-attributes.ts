// Every span attribute name the relay writes, in one place, pinned to the OpenTelemetry semantic
// conventions v1.41.0 (the last release that held the GenAI conventions before they moved to their own
// repository). GenAI names are "development" status there: when a later version renames one, this file is
// the one to change, and SEMCONV_VERSION with it (the spans carry its schema URL).

export const SEMCONV_VERSION = '1.41.0';
export const SCHEMA_URL = `https://opentelemetry.io/schemas/${SEMCONV_VERSION}`;

// ── GenAI (docs/gen-ai/gen-ai-spans.md, registry gen_ai.*) ──
export const GEN_AI_OPERATION_NAME = 'gen_ai.operation.name';
export const GEN_AI_PROVIDER_NAME = 'gen_ai.provider.name';
export const GEN_AI_REQUEST_MODEL = 'gen_ai.request.model';
export const GEN_AI_REQUEST_STREAM = 'gen_ai.request.stream';
export const GEN_AI_RESPONSE_MODEL = 'gen_ai.response.model';
export const GEN_AI_RESPONSE_ID = 'gen_ai.response.id';
export const GEN_AI_RESPONSE_FINISH_REASONS = 'gen_ai.response.finish_reasons';
/** seconds from the request to the first chunk of a streamed answer (double) */
export const GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = 'gen_ai.response.time_to_first_chunk';
export const GEN_AI_USAGE_INPUT_TOKENS = 'gen_ai.usage.input_tokens';
export const GEN_AI_USAGE_OUTPUT_TOKENS = 'gen_ai.usage.output_tokens';
/** opt-in content (JSON text, following gen-ai-input-messages.json / gen-ai-output-messages.json) */
export const GEN_AI_INPUT_MESSAGES = 'gen_ai.input.messages';
export const GEN_AI_OUTPUT_MESSAGES = 'gen_ai.output.messages';
export const GEN_AI_SYSTEM_INSTRUCTIONS = 'gen_ai.system_instructions';

// ── General and HTTP (stable) ──
export const SERVER_ADDRESS = 'server.address';
export const SERVER_PORT = 'server.port';
export const HTTP_REQUEST_METHOD = 'http.request.method';
export const HTTP_RESPONSE_STATUS_CODE = 'http.response.status_code';
export const URL_PATH = 'url.path';
export const ERROR_TYPE = 'error.type';

// ── Resource ──
export const SERVICE_NAME = 'service.name';
export const SERVICE_VERSION = 'service.version';
export const HOST_NAME = 'host.name';

// ── The relay's own (namespaced, not in any convention) ──
/** HIT, MISS, BYPASS, REFRESH, COALESCED: the x-relay-cache answer */
export const RELAY_CACHE_STATUS = 'llm_relay.cache.status';
/** the cache key's hash (x-relay-cache-key) */
export const RELAY_CACHE_KEY = 'llm_relay.cache.key';
/** the cache namespace the exchange looked in (never the credential itself: a hash of it at most) */
export const RELAY_CACHE_NAMESPACE = 'llm_relay.cache.namespace';
/** the exchange's report (x-relay-report-id) */
export const RELAY_REPORT_ID = 'llm_relay.report.id';
/** for hits and coalesced calls: the report of the call whose answer this one got */
export const RELAY_ORIGIN_REPORT_ID = 'llm_relay.origin_report.id';
/** complete, upstream-error, stream-error, client-abort, cache-only-miss */
export const RELAY_OUTCOME = 'llm_relay.outcome';
/** `default` or the named route's prefix */
export const RELAY_ROUTE = 'llm_relay.route';
/** cost in USD derived from the price table (absent when the model is not priced) */
export const RELAY_COST_USD = 'llm_relay.cost_usd';
/** the token counts were estimated by the relay (a stream without usage) */
export const RELAY_USAGE_ESTIMATED = 'llm_relay.usage.estimated';
/** a link's attribute: the linked span is the call that answered this coalesced one */
export const RELAY_LINK_LEADER = 'llm_relay.link.leader';

// ── Well-known values ──
export type OperationName = 'chat' | 'text_completion' | 'embeddings' | 'generate_content';

/** The GenAI operation of a proxied path, or undefined for a path that is not one the relay knows. */
export function operationOf(path: string): OperationName | undefined {
  const q = path.indexOf('?');
  const p = q < 0 ? path : path.slice(0, q);
  if (p.endsWith('/chat/completions') || p.endsWith('/messages') || p.endsWith('/responses')) return 'chat';
  if (p.endsWith('/completions') || p.endsWith('/complete')) return 'text_completion';
  if (p.endsWith('/embeddings')) return 'embeddings';
  if (p.includes(':generateContent') || p.includes(':streamGenerateContent')) return 'generate_content';
  return undefined;
}

/** gen_ai.provider.name from what the report recognised, else from the upstream's host. */
export function providerOf(reported: string | null | undefined, host: string): string | undefined {
  if (reported) return reported;
  if (host.endsWith('openai.azure.com')) return 'azure.ai.openai';
  if (host.endsWith('openai.com')) return 'openai';
  if (host.endsWith('anthropic.com')) return 'anthropic';
  if (host.endsWith('generativelanguage.googleapis.com')) return 'gcp.gemini';
  if (host.endsWith('groq.com')) return 'groq';
  if (host.endsWith('mistral.ai')) return 'mistral_ai';
  if (host.endsWith('deepseek.com')) return 'deepseek';
  return undefined;
}
