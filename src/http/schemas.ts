// Route schemas, written with TypeBox: the source of the routes' types, of their request checks and of the
// OpenAPI document at /docs. The relay does not load this module (TypeBox takes ~0.5 s and ~30 MB to load):
// the routes take the same schemas as JSON from schemas.generated.ts, which a test writes from this file
// with TypeBox's standalone checks of the bodies and headers (see http/site-validation.ts).
import type { Readable } from 'node:stream';
import { Type } from 'typebox';

const FreeObject = (description: string) =>
  Type.Object({}, { additionalProperties: true, description });

const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 date-time, e.g. 2024-05-01T12:00:00.000Z' });
const Flag = (description: string) => Type.Optional(Type.Union([Type.Boolean(), Type.Null()], { description }));

export const ErrorBody = Type.Object(
  {
    statusCode: Type.Integer(),
    code: Type.String({ description: 'RELAY_ERR_* (see the README error table)' }),
    error: Type.String(),
    message: Type.String(),
  },
  { additionalProperties: true },
);

const Exchange = (what: string) =>
  Type.Object(
    {
      timestamp: Timestamp,
      body: Type.Optional(FreeObject(`body of the ${what}; absent for a call that never got one`)),
    },
    { additionalProperties: true },
  );

export const ReportBody = Type.Object(
  {
    metadata: Type.Optional(
      Type.Object(
        {
          client: Type.Optional(Type.String()),
          clientVersion: Type.Optional(Type.String()),
          environment: Type.Optional(Type.String()),
          promptId: Type.Optional(Type.String()),
        },
        { additionalProperties: true },
      ),
    ),
    request: Exchange('request'),
    response: Exchange('response'),
    properties: Type.Optional(FreeObject('free-form properties, e.g. userId, traceId')),
    cacheEnabled: Flag('whether caching was enabled (null: unknown)'),
    cacheHit: Flag('whether the answer came from a cache (null: cache off)'),
  },
  { additionalProperties: true },
);

export const StoredReportBody = Type.Object(
  {
    id: Type.String(),
    receivedAt: Type.String({ format: 'date-time' }),
    durationMs: Type.Union([Type.Number(), Type.Null()]),
    status: Type.Union([Type.Integer(), Type.Null()]),
    model: Type.Union([Type.String(), Type.Null()]),
    provider: Type.Union([Type.String(), Type.Null()]),
    costUsd: Type.Union([Type.Number(), Type.Null()]),
    requestBytes: Type.Integer(),
    responseBytes: Type.Integer(),
  },
  { additionalProperties: true, description: 'the report as sent, plus the derived fields' },
);

export const SaveBody = Type.Object(
  {
    request: FreeObject('the key object: the request as the client would send it'),
    response: FreeObject('the response to store'),
  },
  { additionalProperties: true },
);

export const SaveReply = Type.Object({
  hash: Type.String({ description: 'sha256 hex of the RFC 8785 canonical request' }),
  exp: Type.String({ format: 'date-time', description: 'expiry' }),
});

export const RetrieveBody = Type.Object(
  { request: FreeObject('the key object to look up') },
  { additionalProperties: true },
);

export const RetrieveHit = Type.Object(
  { hit: Type.Boolean(), data: Type.Unknown({ description: 'the saved response, or null on a miss' }) },
  { additionalProperties: true },
);

export const CacheHeaders = Type.Object(
  {
    'x-relay-cache-namespace': Type.Optional(
      Type.String({ pattern: '^[A-Za-z0-9._-]{1,128}$', description: 'explicit cache namespace' }),
    ),
    'x-relay-cache-ttl': Type.Optional(
      Type.String({ pattern: '^[0-9]{1,9}$', description: 'TTL in seconds of the saved entry' }),
    ),
    'x-pezzo-project-id': Type.Optional(Type.String({ description: 'selects the namespace of a Pezzo project' })),
  },
  { additionalProperties: true },
);

/** The list's filters; `property.<name>=<value>` filters come as additional properties. */
const filterProperties = {
  from: Type.Optional(Type.String({ format: 'date-time', description: 'inclusive, on request.timestamp' })),
  to: Type.Optional(Type.String({ format: 'date-time', description: 'exclusive, on request.timestamp' })),
  environment: Type.Optional(Type.String()),
  promptId: Type.Optional(Type.String()),
  client: Type.Optional(Type.String()),
  model: Type.Optional(Type.String()),
  status: Type.Optional(Type.Integer({ minimum: 100, maximum: 599 })),
  cacheHit: Type.Optional(Type.Boolean()),
};
const filterOptions = {
  additionalProperties: true,
  description: 'plus property.<name>=<value> filters on report properties',
};

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 512 })),
    ...filterProperties,
  },
  filterOptions,
);

/** The list's filters without paging: the export takes every report they select. */
export const FilterQuery = Type.Object(filterProperties, filterOptions);

export const StatsQuery = Type.Object(
  {
    ...filterProperties,
    groupBy: Type.Optional(
      Type.Enum(['model', 'environment', 'client', 'day'], {
        description: 'also aggregate per model, environment, client or UTC day (YYYY-MM-DD) of request.timestamp',
      }),
    ),
  },
  filterOptions,
);

const NullableNumber = (description: string) => Type.Union([Type.Number(), Type.Null()], { description });

const statsProperties = {
  requests: Type.Integer(),
  cacheHits: Type.Integer({ description: 'reports with cacheHit true' }),
  hitRatio: NullableNumber('cacheHits / requests; null without requests'),
  inputTokens: Type.Integer({ description: 'sum of usage.inputTokens' }),
  outputTokens: Type.Integer({ description: 'sum of usage.outputTokens' }),
  costUsd: Type.Number({ description: 'sum of costUsd, USD, rounded to 1e-9' }),
  costSavedUsd: Type.Number({ description: 'sum of costSavedUsd (what cache hits avoided), USD, rounded to 1e-9' }),
  errors: Type.Integer({ description: 'reports with status 400 or more, and proxied streams that broke after a 2xx start (proxy.outcome stream-error)' }),
  latencyMs: Type.Object(
    {
      p50: NullableNumber('median durationMs'),
      p95: NullableNumber('95th percentile of durationMs'),
      p99: NullableNumber('99th percentile of durationMs'),
    },
    { description: 'percentiles of durationMs, interpolated like percentile_cont; null without durations' },
  ),
};

export const StatsBody = Type.Object({
  totals: Type.Object(statsProperties),
  groups: Type.Optional(
    Type.Array(
      Type.Object({
        key: Type.Union([Type.String(), Type.Null()], { description: 'the group; null when reports lack it' }),
        ...statsProperties,
      }),
      { description: 'only with groupBy; key ascending, null last' },
    ),
  ),
});

export const ReportPageBody = Type.Object({
  items: Type.Array(StoredReportBody),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
});

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

/** One line of the report export, for the docs; the route sends a stream of such lines. */
export const ReportExportLine = Type.Unsafe<Readable>(StoredReportBody);

/** The cache export's answer, for the docs. */
export const CacheExportBody = Type.String({ description: 'application/x-ndjson, one entry per line' });

export const ImportReply = Type.Object({
  imported: Type.Integer({ description: 'entries written to the cache store' }),
  skipped: Type.Integer({ description: 'valid entries left out because they had expired' }),
});
