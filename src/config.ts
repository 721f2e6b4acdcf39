// Settings, lowest precedence first: DEFAULTS → JSON file (--config / RELAY_CONFIG) → environment → flags.
// One table (SETTINGS) drives parsing, validation, `--help` and the README; every problem is collected and
// reported at once. This is the only file that reads process.env.
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TRACING_OFF, type TracingSettings, tracingFromEnv } from './tracing/tracing-config.js';
import { type LlhttpBuild, upstreamParserFromEnv } from './upstream/parser-warmup.js';
import { type UpstreamProxy, proxyFromEnv } from './upstream/upstream-proxy.js';

export interface RouteConfig {
  prefix: string;
  upstream: string;
}

export interface RelayConfig {
  port: number;
  host: string;
  upstreamUrl: string;
  routes: RouteConfig[];
  dataDir: string;
  cacheUrl: string;
  reportsUrl: string;
  cache: boolean;
  cacheTtl: number;
  cacheMaxBytes: number;
  cacheMaxEntryBytes: number;
  cacheScope: 'credential' | 'shared';
  offline: boolean;
  apiTokens: string[];
  logLevel: string;
  logFormat: 'auto' | 'json' | 'pretty';
  environment: string;
  maxBodyBytes: number;
  maxHeaderBytes: number;
  requestTimeoutMs: number;
  maxJsonDepth: number;
  reportMaxBodyBytes: number;
  outboxRetryMs: number;
  reportFlushMs: number;
  /** ms a report nobody waits on (a proxied call's) may wait to be written with others */
  reportWriteDelayMs: number;
  reportBatchMax: number;
  reportWorkerIdleMs: number;
  /** ms a report is kept (by receivedAt); 0 keeps reports forever */
  reportRetentionMs: number;
  /** ms a report keeps its bodies; 0 keeps them as long as the report */
  bodyRetentionMs: number;
  /** size budget of the data dir (and a PostgreSQL report store's rows); 0 is none */
  dataMaxBytes: number;
  shutdownGraceMs: number;
  upstreamConnectTimeoutMs: number;
  upstreamHeadersTimeoutMs: number;
  upstreamBodyTimeoutMs: number;
  storeTimeoutMs: number;
  /** ms of the Redis lease a relay holds while it makes a call others wait for (fleet single flight); 0 is off */
  fleetLeaseMs: number;
  pricesFile: string;
  /** from the standard OTEL_* variables only (tracing/tracing-config.ts); off without an endpoint */
  tracing: TracingSettings;
  /** from the standard HTTPS_PROXY, HTTP_PROXY and NO_PROXY only (upstream/upstream-proxy.ts); none: calls go straight out */
  upstreamProxy?: UpstreamProxy;
  /**
   * undici's HTTP parser build the relay compiles as it starts, before it listens (upstream/parser-warmup.ts),
   * from undici's UNDICI_NO_WASM_SIMD and Node's NODE_OPTIONS; none offline, or with the operator's own
   * WebAssembly flags
   */
  upstreamParser?: LlhttpBuild;
}

type Kind = 'int' | 'string' | 'bool' | 'onoff' | 'list' | 'url' | 'enum' | 'level' | 'duration';

interface Setting {
  key: keyof RelayConfig;
  env: string;
  kind: Kind;
  description: string;
  min?: number;
  max?: number;
  values?: readonly string[];
}

const PACKAGE_ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');

const DAY_MS = 86_400_000;
const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: DAY_MS, w: 7 * DAY_MS };
const DURATION = /^(\d+)(ms|s|m|h|d|w)$/;
const DURATION_HELP = 'a duration such as 90d, 12h, 30m or 45s (units ms, s, m, h, d, w), or off';

/** `90d` → ms; `off` and `0` → 0 (no limit); undefined when it is not a duration. */
export function parseDuration(text: string): number | undefined {
  const t = text.trim().toLowerCase();
  if (t === 'off' || t === '0') return 0;
  const m = DURATION.exec(t);
  if (!m) return undefined;
  const ms = Number(m[1]) * DURATION_UNITS[m[2]!]!;
  return Number.isSafeInteger(ms) ? ms : undefined;
}

/** ms as the shortest exact duration (`7776000000` → `90d`), for --help and messages. */
export function formatDuration(ms: number): string {
  if (ms === 0) return 'off';
  for (const unit of ['w', 'd', 'h', 'm', 's'] as const) {
    const size = DURATION_UNITS[unit]!;
    if (ms % size === 0 && (unit !== 'w' || ms % DAY_MS !== 0)) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

export const DEFAULTS: Readonly<RelayConfig> = Object.freeze({
  port: 8787,
  host: '127.0.0.1',
  upstreamUrl: 'https://api.openai.com',
  routes: [],
  dataDir: './data',
  cacheUrl: 'sqlite',
  reportsUrl: 'sqlite',
  cache: true,
  cacheTtl: 604_800,
  cacheMaxBytes: 1_073_741_824,
  cacheMaxEntryBytes: 8 * 1024 * 1024,
  cacheScope: 'credential',
  offline: false,
  apiTokens: [],
  logLevel: 'info',
  logFormat: 'auto',
  environment: 'development',
  maxBodyBytes: 32 * 1024 * 1024,
  maxHeaderBytes: 16 * 1024,
  requestTimeoutMs: 120_000,
  maxJsonDepth: 64,
  reportMaxBodyBytes: 1024 * 1024,
  outboxRetryMs: 1_000,
  reportFlushMs: 0,
  reportWriteDelayMs: 50,
  reportBatchMax: 500,
  reportWorkerIdleMs: 2_000,
  reportRetentionMs: 90 * DAY_MS,
  bodyRetentionMs: 30 * DAY_MS,
  dataMaxBytes: 0,
  shutdownGraceMs: 10_000,
  upstreamConnectTimeoutMs: 10_000,
  upstreamHeadersTimeoutMs: 300_000,
  upstreamBodyTimeoutMs: 300_000,
  storeTimeoutMs: 500,
  fleetLeaseMs: 5_000,
  pricesFile: resolve(PACKAGE_ROOT, 'config/prices.json'),
  tracing: TRACING_OFF,
});

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const SETTINGS: readonly Setting[] = [
  { key: 'port', env: 'PORT', kind: 'int', min: 0, max: 65_535, description: 'TCP port to listen on (0 picks a free port)' },
  { key: 'host', env: 'HOST', kind: 'string', description: 'address to bind; 0.0.0.0 in the Docker image' },
  { key: 'upstreamUrl', env: 'RELAY_UPSTREAM_URL', kind: 'url', description: 'origin of the default route, without /v1: /v1/chat/completions goes to <origin>/v1/chat/completions' },
  { key: 'dataDir', env: 'RELAY_DATA_DIR', kind: 'string', description: 'directory of the embedded SQLite databases and the durable outbox' },
  { key: 'cacheUrl', env: 'RELAY_CACHE_URL', kind: 'string', description: 'cache store: sqlite, memory, or redis://… / rediss://…' },
  { key: 'reportsUrl', env: 'RELAY_REPORTS_URL', kind: 'string', description: 'report store: sqlite, or postgres://… / postgresql://…' },
  { key: 'cache', env: 'RELAY_CACHE', kind: 'onoff', description: 'on or off: whether proxied calls use the cache by default' },
  { key: 'cacheTtl', env: 'RELAY_CACHE_TTL', kind: 'int', min: 1, max: 315_360_000, description: 'seconds an entry lives unless a request says otherwise' },
  { key: 'cacheMaxBytes', env: 'RELAY_CACHE_MAX_BYTES', kind: 'int', min: 1024, description: 'byte budget of the sqlite and memory cache stores; least recently used entries go first' },
  { key: 'cacheMaxEntryBytes', env: 'RELAY_CACHE_MAX_ENTRY_BYTES', kind: 'int', min: 1, description: 'largest answer stored in the cache (bigger ones are served, not stored)' },
  { key: 'cacheScope', env: 'RELAY_CACHE_SCOPE', kind: 'enum', values: ['credential', 'shared'], description: 'credential: proxy entries shared only by callers with the same upstream credential; shared: one team-wide space' },
  { key: 'offline', env: 'RELAY_OFFLINE', kind: 'bool', description: 'never call upstream: a cache miss is answered 504 (CI replay)' },
  { key: 'apiTokens', env: 'RELAY_API_TOKENS', kind: 'list', description: 'comma-separated access tokens; when set every route but /healthz needs one' },
  { key: 'logLevel', env: 'RELAY_LOG_LEVEL', kind: 'level', values: LEVELS, description: 'pino log level' },
  { key: 'logFormat', env: 'RELAY_LOG_FORMAT', kind: 'enum', values: ['auto', 'json', 'pretty'], description: 'json (one object per line), pretty (for a person), or auto: pretty when stdout is a terminal, else json' },
  { key: 'environment', env: 'RELAY_ENVIRONMENT', kind: 'string', description: 'metadata.environment of proxied reports that do not name one' },
  { key: 'maxBodyBytes', env: 'RELAY_MAX_BODY_BYTES', kind: 'int', min: 1024, description: 'largest request body accepted (413 above it)' },
  { key: 'maxHeaderBytes', env: 'RELAY_MAX_HEADER_BYTES', kind: 'int', min: 1024, max: 1_048_576, description: 'largest request headers (names and values) accepted (431 above it)' },
  { key: 'requestTimeoutMs', env: 'RELAY_REQUEST_TIMEOUT_MS', kind: 'int', min: 1, description: 'time a client has to send its whole request, body included (408 after it)' },
  { key: 'maxJsonDepth', env: 'RELAY_MAX_JSON_DEPTH', kind: 'int', min: 2, max: 10_000, description: 'deepest JSON nesting accepted on /api (400 above it)' },
  { key: 'reportMaxBodyBytes', env: 'RELAY_REPORT_MAX_BODY_BYTES', kind: 'int', min: 256, description: 'largest request or response body kept in a report; bigger ones are cut and marked truncated' },
  { key: 'outboxRetryMs', env: 'RELAY_OUTBOX_RETRY_MS', kind: 'int', min: 10, max: 600_000, description: 'how often reports waiting in the outbox are offered to the report store again' },
  { key: 'reportFlushMs', env: 'RELAY_REPORT_FLUSH_MS', kind: 'int', min: 0, max: 10_000, description: 'group commit window of direct-API reports: those arriving within it are made durable together (0: those that arrived while the last group was synced)' },
  { key: 'reportWriteDelayMs', env: 'RELAY_REPORT_WRITE_DELAY_MS', kind: 'int', min: 0, max: 10_000, description: 'how long a report may wait to be written into the report store with others (reads of reports write what waits first)' },
  { key: 'reportBatchMax', env: 'RELAY_REPORT_BATCH_MAX', kind: 'int', min: 1, max: 10_000, description: 'most reports written in one transaction' },
  { key: 'reportWorkerIdleMs', env: 'RELAY_REPORT_WORKER_IDLE_MS', kind: 'int', min: 0, max: 3_600_000, description: 'the report worker thread stops after this long with nothing to do, giving its memory back, and starts again with the next report (0: it runs until the relay stops)' },
  { key: 'reportRetentionMs', env: 'RELAY_REPORT_RETENTION', kind: 'duration', description: 'how long a report is kept, counted from when the relay received it (off: forever); older ones are pruned in small steps' },
  { key: 'bodyRetentionMs', env: 'RELAY_BODY_RETENTION', kind: 'duration', description: 'how long a report keeps its request and response bodies (off: as long as the report); after it the report keeps its metadata, sizes and sha256 and says bodiesExpired: true' },
  { key: 'dataMaxBytes', env: 'RELAY_DATA_MAX_BYTES', kind: 'int', min: 0, description: 'size budget in bytes of the data dir (with PostgreSQL reports, plus their rows); the oldest reports are pruned while it is exceeded (0: no budget)' },
  { key: 'shutdownGraceMs', env: 'RELAY_SHUTDOWN_GRACE_MS', kind: 'int', min: 0, description: 'how long SIGTERM/SIGINT waits for in-flight calls before closing' },
  { key: 'upstreamConnectTimeoutMs', env: 'RELAY_UPSTREAM_CONNECT_TIMEOUT_MS', kind: 'int', min: 1, description: 'upstream TCP/TLS connect timeout (504)' },
  { key: 'upstreamHeadersTimeoutMs', env: 'RELAY_UPSTREAM_HEADERS_TIMEOUT_MS', kind: 'int', min: 1, description: 'time allowed for the upstream response headers (504)' },
  { key: 'upstreamBodyTimeoutMs', env: 'RELAY_UPSTREAM_BODY_TIMEOUT_MS', kind: 'int', min: 1, description: 'longest silence allowed between upstream body chunks (504)' },
  { key: 'storeTimeoutMs', env: 'RELAY_STORE_TIMEOUT_MS', kind: 'int', min: 1, description: 'a cache store call slower than this counts as a failure (the proxy treats it as a miss)' },
  { key: 'fleetLeaseMs', env: 'RELAY_FLEET_LEASE_MS', kind: 'int', min: 0, max: 600_000, description: 'with a Redis cache: lease in ms a relay holds in Redis while it makes a call identical calls on other relays wait for, renewed while the call runs; when its relay dies, a waiting caller takes over after it (0: single flight per relay only)' },
  { key: 'pricesFile', env: 'RELAY_PRICES_FILE', kind: 'string', description: 'price table (USD per million tokens) used to derive cost' },
];

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export interface ConfigSources {
  env?: NodeJS.ProcessEnv;
  argv?: string[];
  /** Values set in code (tests); applied after every other source. */
  overrides?: Partial<RelayConfig>;
}

export function flagName(setting: Setting): string {
  return `--${setting.env.replace(/^RELAY_/, '').toLowerCase().replace(/_/g, '-')}`;
}

/** Builds the configuration from every source; throws ConfigError listing every problem. */
export function loadConfig(sources: ConfigSources = {}): Readonly<RelayConfig> {
  const env = sources.env ?? process.env;
  const problems: string[] = [];
  const { flags, configFile } = parseArgv(sources.argv ?? [], problems);
  const raw: Record<string, unknown> = { ...DEFAULTS };

  const file = configFile ?? env.RELAY_CONFIG;
  if (file) Object.assign(raw, readConfigFile(file, problems));
  for (const s of SETTINGS) {
    const fromEnv = env[s.env];
    if (fromEnv !== undefined && fromEnv !== '') raw[s.key] = fromString(s, fromEnv, `${s.env}`, problems);
  }
  for (const s of SETTINGS) {
    const f = flags.get(flagName(s));
    if (f !== undefined) raw[s.key] = fromString(s, f, flagName(s), problems);
  }
  Object.assign(raw, sources.overrides ?? {});

  const config = validate(raw, problems);
  config.tracing = sources.overrides?.tracing ?? tracingFromEnv(env, problems);
  const proxy = sources.overrides && 'upstreamProxy' in sources.overrides ? sources.overrides.upstreamProxy : proxyFromEnv(env, problems);
  if (proxy) config.upstreamProxy = proxy;
  const parser = config.offline ? undefined : upstreamParserFromEnv(env);
  if (parser) config.upstreamParser = parser;
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(config);
}

/** One option of a command line, with its value when it has one (`--port 80`, `--port=80`). */
interface OptionWord {
  name: string;
  value?: string;
  /** the words it took, for handing the options on */
  words: string[];
}

export interface CommandLine {
  /** the words that are not options: a command and its arguments (`cache`, `import`, `FILE`) */
  positionals: string[];
  /** the options with their values, as given, for loadConfig */
  options: string[];
}

/** Options that take no value; the command handles them before any configuration is loaded. */
const STANDALONE = new Set(['--help', '-h', '--version']);
/** `--offline` may stand alone (true) or take one of these; any other word after it is not its value. */
const BOOL_WORD = /^(true|false|1|0|yes|no|on|off)$/i;

function tokenize(argv: readonly string[]): { positionals: string[]; options: OptionWord[] } {
  const known = new Set(SETTINGS.map(flagName));
  const positionals: string[] = [];
  const options: OptionWord[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    // `-` (stdin) and every word not starting with `--` is an argument.
    if (!arg.startsWith('--') && !STANDALONE.has(arg)) {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    if (eq > 0) {
      options.push({ name: arg.slice(0, eq), value: arg.slice(eq + 1), words: [arg] });
      continue;
    }
    const next = argv[i + 1];
    let takesNext: boolean;
    if (STANDALONE.has(arg)) takesNext = false;
    else if (arg === '--offline') takesNext = next !== undefined && BOOL_WORD.test(next);
    else if (arg === '--config' || known.has(arg)) takesNext = next !== undefined;
    else takesNext = next !== undefined && !next.startsWith('-'); // an unknown option's value, probably
    if (takesNext) {
      options.push({ name: arg, value: next!, words: [arg, next!] });
      i++;
    } else options.push({ name: arg, words: [arg] });
  }
  return { positionals, options };
}

/**
 * Splits a command line into the options (each with its value) and the other words, so that options may
 * come before, between or after a command and its arguments: `llm-relay --data-dir X cache import FILE`
 * and `llm-relay cache import FILE --data-dir X` are the same.
 */
export function splitArgv(argv: readonly string[]): CommandLine {
  const { positionals, options } = tokenize(argv);
  return { positionals, options: options.flatMap((o) => o.words) };
}

function parseArgv(argv: string[], problems: string[]): { flags: Map<string, string>; configFile?: string } {
  const known = new Set(SETTINGS.map(flagName));
  const flags = new Map<string, string>();
  let configFile: string | undefined;
  const { positionals, options } = tokenize(argv);
  for (const arg of positionals) problems.push(`unexpected argument "${arg}" (see --help)`);
  for (const { name, value } of options) {
    if (name === '--config') {
      if (value === undefined) problems.push('--config needs a file name');
      else configFile = value;
    } else if (!known.has(name)) problems.push(`unknown option ${name} (see --help)`);
    else if (value !== undefined) flags.set(name, value);
    else if (name === '--offline') flags.set(name, 'true');
    else problems.push(`${name} needs a value`);
  }
  return configFile === undefined ? { flags } : { flags, configFile };
}

function readConfigFile(file: string, problems: string[]): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    problems.push(`config file ${file}: ${(err as Error).message}`);
    return {};
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    problems.push(`config file ${file}: must hold a JSON object`);
    return {};
  }
  const out: Record<string, unknown> = {};
  const keys = new Set<string>([...SETTINGS.map((s) => s.key), 'routes']);
  for (const [k, v] of Object.entries(parsed)) {
    if (k.startsWith('$') || k.startsWith('//')) continue; // comments and $schema
    if (!keys.has(k)) problems.push(`config file ${file}: unknown setting "${k}"`);
    else out[k] = v;
  }
  return out;
}

function fromString(s: Setting, value: string, where: string, problems: string[]): unknown {
  switch (s.kind) {
    case 'int': {
      if (!/^-?\d+$/.test(value.trim())) {
        problems.push(`${where}: "${value}" is not a whole number`);
        return undefined;
      }
      return Number(value);
    }
    case 'bool':
      if (/^(true|1|yes|on)$/i.test(value)) return true;
      if (/^(false|0|no|off)$/i.test(value)) return false;
      problems.push(`${where}: "${value}" is not true or false`);
      return undefined;
    case 'onoff':
      if (/^(on|true|1)$/i.test(value)) return true;
      if (/^(off|false|0)$/i.test(value)) return false;
      problems.push(`${where}: "${value}" is not on or off`);
      return undefined;
    case 'duration': {
      const ms = parseDuration(value);
      if (ms === undefined) problems.push(`${where}: "${value}" is not ${DURATION_HELP}`);
      return ms;
    }
    case 'list':
      return value.split(',').map((t) => t.trim()).filter((t) => t.length > 0);
    default:
      return value;
  }
}

function validate(raw: Record<string, unknown>, problems: string[]): RelayConfig {
  for (const s of SETTINGS) {
    const v = raw[s.key];
    const name = `${s.key} (${s.env})`;
    if (v === undefined) {
      raw[s.key] = DEFAULTS[s.key];
      continue;
    }
    switch (s.kind) {
      case 'int':
        if (!Number.isSafeInteger(v)) problems.push(`${name}: must be a whole number`);
        else if (s.min !== undefined && (v as number) < s.min) problems.push(`${name}: must be at least ${s.min}`);
        else if (s.max !== undefined && (v as number) > s.max) problems.push(`${name}: must be at most ${s.max}`);
        break;
      case 'bool':
      case 'onoff':
        if (typeof v !== 'boolean') problems.push(`${name}: must be a boolean`);
        break;
      case 'list':
        if (!Array.isArray(v) || v.some((t) => typeof t !== 'string' || t.length === 0))
          problems.push(`${name}: must be a list of non-empty strings`);
        break;
      case 'duration': {
        // The config file may give a duration as text (`"90d"`) or as milliseconds.
        const ms = typeof v === 'string' ? parseDuration(v) : v;
        if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 0) problems.push(`${name}: must be ${DURATION_HELP}`);
        else raw[s.key] = ms;
        break;
      }
      case 'enum':
      case 'level':
        if (!s.values!.includes(v as string)) problems.push(`${name}: must be one of ${s.values!.join(', ')}`);
        break;
      case 'url':
        if (!isHttpOrigin(v)) problems.push(`${name}: must be an http:// or https:// URL, got "${String(v)}"`);
        else if (endsInV1(v)) problems.push(`${name}: ${doubledV1('/v1/chat/completions', v)}`);
        break;
      default:
        if (typeof v !== 'string' || v.length === 0) problems.push(`${name}: must be a non-empty string`);
    }
  }
  const cacheUrl = String(raw.cacheUrl);
  if (!/^(sqlite|memory|rediss?:\/\/.+)$/.test(cacheUrl))
    problems.push(`cacheUrl (RELAY_CACHE_URL): must be sqlite, memory, redis://… or rediss://…, got "${redact(cacheUrl)}"`);
  if (typeof raw.fleetLeaseMs === 'number' && raw.fleetLeaseMs > 0 && raw.fleetLeaseMs < 100)
    problems.push('fleetLeaseMs (RELAY_FLEET_LEASE_MS): must be 0 (off) or at least 100');
  const reportsUrl = String(raw.reportsUrl);
  if (!/^(sqlite|postgres(ql)?:\/\/.+)$/.test(reportsUrl))
    problems.push(`reportsUrl (RELAY_REPORTS_URL): must be sqlite or postgres://…, got "${redact(reportsUrl)}"`);
  raw.routes = validateRoutes(raw.routes, problems);
  if (typeof raw.dataDir === 'string') raw.dataDir = resolve(raw.dataDir);
  if (typeof raw.pricesFile === 'string' && !isAbsolute(raw.pricesFile)) raw.pricesFile = resolve(raw.pricesFile);
  if (typeof raw.upstreamUrl === 'string') raw.upstreamUrl = raw.upstreamUrl.replace(/\/+$/, '');
  return raw as unknown as RelayConfig;
}

const RESERVED_PREFIXES = ['/api', '/healthz', '/readyz', '/metrics', '/docs', '/dashboard'];

function validateRoutes(routes: unknown, problems: string[]): RouteConfig[] {
  if (!Array.isArray(routes)) {
    problems.push('routes: must be a list of {"prefix": "/name", "upstream": "https://…"}');
    return [];
  }
  const seen = new Set<string>();
  const out: RouteConfig[] = [];
  routes.forEach((r: unknown, i) => {
    const route = r as Partial<RouteConfig> | null;
    const prefix = route?.prefix;
    let ok = true;
    if (typeof prefix !== 'string' || !/^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/.test(prefix)) {
      problems.push(`routes[${i}].prefix: must look like "/anthropic"`);
      ok = false;
    } else if (RESERVED_PREFIXES.some((p) => prefix === p || prefix.startsWith(`${p}/`))) {
      problems.push(`routes[${i}].prefix: ${prefix} is served by the relay itself`);
      ok = false;
    } else if (seen.has(prefix)) {
      problems.push(`routes[${i}].prefix: ${prefix} is listed twice`);
      ok = false;
    }
    if (!isHttpOrigin(route?.upstream)) {
      problems.push(`routes[${i}].upstream: must be an http:// or https:// URL`);
      ok = false;
    } else if (typeof prefix === 'string' && !/\/v1$/.test(prefix) && endsInV1(route.upstream)) {
      // Under a prefix that ends in /v1 the client's path after it no longer carries /v1: that pairing works.
      problems.push(`routes[${i}].upstream: ${doubledV1(`${prefix}/v1/chat/completions`, route.upstream)}`);
      ok = false;
    }
    if (ok) {
      seen.add(prefix as string);
      out.push({ prefix: prefix as string, upstream: (route!.upstream as string).replace(/\/+$/, '') });
    }
  });
  return out;
}

function isHttpOrigin(v: unknown): v is string {
  if (typeof v !== 'string') return false;
  try {
    const u = new URL(v);
    return (u.protocol === 'http:' || u.protocol === 'https:') && !u.search && !u.hash;
  } catch {
    return false;
  }
}

/**
 * An upstream whose path ends in /v1: the OPENAI_BASE_URL habit. The relay keeps the client's path, which
 * already starts with /v1, so every call would go to /v1/v1/…. Another base path (e.g. /openai) is kept.
 */
function endsInV1(url: string): boolean {
  return /\/v1\/*$/.test(new URL(url).pathname);
}

function doubledV1(example: string, url: string): string {
  const u = new URL(url);
  u.pathname = u.pathname.replace(/\/v1\/*$/, '');
  const origin = redact(u.toString()).replace(/\/+$/, '');
  return `must be the origin without /v1: use "${origin}"; a request for ${example} already carries /v1`;
}

/** A connection string without its password, for messages and logs. */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    if (!u.password) return url; // as written (URL would add a trailing slash)
    u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

/** A setting's default as a user would type it. */
export function defaultShown(s: Setting): string {
  const def = DEFAULTS[s.key];
  if (Array.isArray(def)) return def.length ? def.join(',') : '(none)';
  if (s.kind === 'onoff') return def ? 'on' : 'off';
  if (s.key === 'pricesFile') return 'config/prices.json';
  if (s.kind === 'duration') return formatDuration(def as number);
  if (s.key === 'dataMaxBytes' && def === 0) return '0 (no budget)';
  return String(def);
}

export function helpText(version: string): string {
  const lines = [
    `llm-relay ${version} — a caching, reporting reverse proxy for LLM APIs`,
    '',
    'Usage: llm-relay [options]                            start the relay',
    '       llm-relay cache export [options] > FILE.ndjson  write every live cache entry as NDJSON to stdout',
    '       llm-relay cache import FILE|- [options]         add the entries of an NDJSON file (- for stdin) to the cache',
    '',
    '`cache export|import` work on the configured cache store (--cache-url, --data-dir, ...) without a server;',
    'import is refused into a SQLite data dir a running relay holds (use its POST /api/cache/v1/import).',
    'Options may come before or after the command and its arguments.',
    '',
    'Every option can also be set by its environment variable or in a JSON config file;',
    'flags win over the environment, which wins over the file, which wins over the defaults.',
    '',
    '  --config FILE                        JSON config file (RELAY_CONFIG); also holds "routes"',
  ];
  for (const s of SETTINGS) {
    const shown = defaultShown(s);
    lines.push(`  ${`${flagName(s)} VALUE`.padEnd(36)} ${s.description}`);
    lines.push(`  ${''.padEnd(36)} env ${s.env}, default ${shown}`);
  }
  lines.push(
    '  --help                               print this help',
    '  --version                            print the version',
    '',
    'Read from the environment only, as other tools read them:',
    '  HTTPS_PROXY, HTTP_PROXY, NO_PROXY    the proxy calls upstream go through, and the hosts reached directly',
    '  OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_*  where trace spans go (tracing is off without an endpoint)',
  );
  return `${lines.join('\n')}\n`;
}
