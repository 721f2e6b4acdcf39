// Generated from src/http/schemas.ts by test/helpers/schema-module.ts: do not edit. After a change to the
// schemas, `UPDATE_GENERATED=1 npx vitest run test/unit/schemas-generated.test.ts` writes it again.
// The route schemas as JSON, without TypeBox's compiler (~0.5 s and ~30 MB to load; a check may call its
// guards, typebox/guard); their types are those of schemas.ts. CHECKS holds TypeBox's standalone checks
// (typebox/compile's Code, with the formats of registerAjvFormats) of the request parts the routes take,
// keyed by part and schema text (http/site-validation.ts).
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { Guard } from 'typebox/guard';
import type * as S from './schemas.js';

const StatsBody_totals_outputTokens = {
  "type": "integer",
  "description": "sum of usage.outputTokens"
};
const StatsBody_totals_cacheHits = {
  "type": "integer",
  "description": "reports with cacheHit true"
};
const StatsBody_totals_costUsd = {
  "type": "number",
  "description": "sum of costUsd, USD, rounded to 1e-9"
};
const StatsBody_totals_latencyMs_p50 = {
  "anyOf": [
    {
      "type": "number"
    },
    {
      "type": "null"
    }
  ],
  "description": "median durationMs"
};
const ListQuery_from = {
  "type": "string",
  "format": "date-time",
  "description": "inclusive, on request.timestamp"
};
const ListQuery_to = {
  "type": "string",
  "format": "date-time",
  "description": "exclusive, on request.timestamp"
};
const StatsBody_totals_latencyMs_p95 = {
  "anyOf": [
    {
      "type": "number"
    },
    {
      "type": "null"
    }
  ],
  "description": "95th percentile of durationMs"
};
const StatsBody_totals_latencyMs_p99 = {
  "anyOf": [
    {
      "type": "number"
    },
    {
      "type": "null"
    }
  ],
  "description": "99th percentile of durationMs"
};
const StoredReportBody_required = [
  "id",
  "receivedAt",
  "durationMs",
  "status",
  "model",
  "provider",
  "costUsd",
  "requestBytes",
  "responseBytes"
];
const StatsBody_totals_costSavedUsd = {
  "type": "number",
  "description": "sum of costSavedUsd (what cache hits avoided), USD, rounded to 1e-9"
};
const ReportBody_request_timestamp = {
  "type": "string",
  "format": "date-time",
  "description": "ISO 8601 date-time, e.g. 2024-05-01T12:00:00.000Z"
};
const StatsBody_totals_hitRatio = {
  "anyOf": [
    {
      "type": "number"
    },
    {
      "type": "null"
    }
  ],
  "description": "cacheHits / requests; null without requests"
};
const StatsBody_totals_errors = {
  "type": "integer",
  "description": "reports with status 400 or more, and proxied streams that broke after a 2xx start (proxy.outcome stream-error)"
};
const StatsBody_totals_latencyMs_properties = {
  "p50": StatsBody_totals_latencyMs_p50,
  "p95": StatsBody_totals_latencyMs_p95,
  "p99": StatsBody_totals_latencyMs_p99
};
const StoredReportBody_properties = {
  "id": {
    "type": "string"
  },
  "receivedAt": {
    "type": "string",
    "format": "date-time"
  },
  "durationMs": {
    "anyOf": [
      {
        "type": "number"
      },
      {
        "type": "null"
      }
    ]
  },
  "status": {
    "anyOf": [
      {
        "type": "integer"
      },
      {
        "type": "null"
      }
    ]
  },
  "model": {
    "anyOf": [
      {
        "type": "string"
      },
      {
        "type": "null"
      }
    ]
  },
  "provider": {
    "anyOf": [
      {
        "type": "string"
      },
      {
        "type": "null"
      }
    ]
  },
  "costUsd": {
    "anyOf": [
      {
        "type": "number"
      },
      {
        "type": "null"
      }
    ]
  },
  "requestBytes": {
    "type": "integer"
  },
  "responseBytes": {
    "type": "integer"
  }
};
const StatsBody_totals_latencyMs = {
  "type": "object",
  "required": [
    "p50",
    "p95",
    "p99"
  ],
  "properties": StatsBody_totals_latencyMs_properties,
  "description": "percentiles of durationMs, interpolated like percentile_cont; null without durations"
};
export const StoredReportBody = {
  "type": "object",
  "required": StoredReportBody_required,
  "properties": StoredReportBody_properties,
  "additionalProperties": true,
  "description": "the report as sent, plus the derived fields"
} as unknown as typeof S.StoredReportBody;

export const ErrorBody = {
  "type": "object",
  "required": [
    "statusCode",
    "code",
    "error",
    "message"
  ],
  "properties": {
    "statusCode": {
      "type": "integer"
    },
    "code": {
      "type": "string",
      "description": "RELAY_ERR_* (see the README error table)"
    },
    "error": {
      "type": "string"
    },
    "message": {
      "type": "string"
    }
  },
  "additionalProperties": true
} as unknown as typeof S.ErrorBody;

export const ReportBody = {
  "type": "object",
  "required": [
    "request",
    "response"
  ],
  "properties": {
    "metadata": {
      "type": "object",
      "properties": {
        "client": {
          "type": "string"
        },
        "clientVersion": {
          "type": "string"
        },
        "environment": {
          "type": "string"
        },
        "promptId": {
          "type": "string"
        }
      },
      "additionalProperties": true
    },
    "request": {
      "type": "object",
      "required": [
        "timestamp"
      ],
      "properties": {
        "timestamp": ReportBody_request_timestamp,
        "body": {
          "type": "object",
          "properties": {},
          "additionalProperties": true,
          "description": "body of the request; absent for a call that never got one"
        }
      },
      "additionalProperties": true
    },
    "response": {
      "type": "object",
      "required": [
        "timestamp"
      ],
      "properties": {
        "timestamp": ReportBody_request_timestamp,
        "body": {
          "type": "object",
          "properties": {},
          "additionalProperties": true,
          "description": "body of the response; absent for a call that never got one"
        }
      },
      "additionalProperties": true
    },
    "properties": {
      "type": "object",
      "properties": {},
      "additionalProperties": true,
      "description": "free-form properties, e.g. userId, traceId"
    },
    "cacheEnabled": {
      "anyOf": [
        {
          "type": "boolean"
        },
        {
          "type": "null"
        }
      ],
      "description": "whether caching was enabled (null: unknown)"
    },
    "cacheHit": {
      "anyOf": [
        {
          "type": "boolean"
        },
        {
          "type": "null"
        }
      ],
      "description": "whether the answer came from a cache (null: cache off)"
    }
  },
  "additionalProperties": true
} as unknown as typeof S.ReportBody;

export const SaveBody = {
  "type": "object",
  "required": [
    "request",
    "response"
  ],
  "properties": {
    "request": {
      "type": "object",
      "properties": {},
      "additionalProperties": true,
      "description": "the key object: the request as the client would send it"
    },
    "response": {
      "type": "object",
      "properties": {},
      "additionalProperties": true,
      "description": "the response to store"
    }
  },
  "additionalProperties": true
} as unknown as typeof S.SaveBody;

export const SaveReply = {
  "type": "object",
  "required": [
    "hash",
    "exp"
  ],
  "properties": {
    "hash": {
      "type": "string",
      "description": "sha256 hex of the RFC 8785 canonical request"
    },
    "exp": {
      "type": "string",
      "format": "date-time",
      "description": "expiry"
    }
  }
} as unknown as typeof S.SaveReply;

export const RetrieveBody = {
  "type": "object",
  "required": [
    "request"
  ],
  "properties": {
    "request": {
      "type": "object",
      "properties": {},
      "additionalProperties": true,
      "description": "the key object to look up"
    }
  },
  "additionalProperties": true
} as unknown as typeof S.RetrieveBody;

export const RetrieveHit = {
  "type": "object",
  "required": [
    "hit",
    "data"
  ],
  "properties": {
    "hit": {
      "type": "boolean"
    },
    "data": {
      "description": "the saved response, or null on a miss"
    }
  },
  "additionalProperties": true
} as unknown as typeof S.RetrieveHit;

export const CacheHeaders = {
  "type": "object",
  "properties": {
    "x-relay-cache-namespace": {
      "type": "string",
      "pattern": "^[A-Za-z0-9._-]{1,128}$",
      "description": "explicit cache namespace"
    },
    "x-relay-cache-ttl": {
      "type": "string",
      "pattern": "^[0-9]{1,9}$",
      "description": "TTL in seconds of the saved entry"
    },
    "x-pezzo-project-id": {
      "type": "string",
      "description": "selects the namespace of a Pezzo project"
    }
  },
  "additionalProperties": true
} as unknown as typeof S.CacheHeaders;

export const ListQuery = {
  "type": "object",
  "properties": {
    "limit": {
      "type": "integer",
      "minimum": 1,
      "maximum": 1000,
      "default": 50
    },
    "cursor": {
      "type": "string",
      "maxLength": 512
    },
    "from": ListQuery_from,
    "to": ListQuery_to,
    "environment": {
      "type": "string"
    },
    "promptId": {
      "type": "string"
    },
    "client": {
      "type": "string"
    },
    "model": {
      "type": "string"
    },
    "status": {
      "type": "integer",
      "minimum": 100,
      "maximum": 599
    },
    "cacheHit": {
      "type": "boolean"
    }
  },
  "additionalProperties": true,
  "description": "plus property.<name>=<value> filters on report properties"
} as unknown as typeof S.ListQuery;

export const FilterQuery = {
  "type": "object",
  "properties": {
    "from": ListQuery_from,
    "to": ListQuery_to,
    "environment": {
      "type": "string"
    },
    "promptId": {
      "type": "string"
    },
    "client": {
      "type": "string"
    },
    "model": {
      "type": "string"
    },
    "status": {
      "type": "integer",
      "minimum": 100,
      "maximum": 599
    },
    "cacheHit": {
      "type": "boolean"
    }
  },
  "additionalProperties": true,
  "description": "plus property.<name>=<value> filters on report properties"
} as unknown as typeof S.FilterQuery;

export const StatsQuery = {
  "type": "object",
  "properties": {
    "from": ListQuery_from,
    "to": ListQuery_to,
    "environment": {
      "type": "string"
    },
    "promptId": {
      "type": "string"
    },
    "client": {
      "type": "string"
    },
    "model": {
      "type": "string"
    },
    "status": {
      "type": "integer",
      "minimum": 100,
      "maximum": 599
    },
    "cacheHit": {
      "type": "boolean"
    },
    "groupBy": {
      "enum": [
        "model",
        "environment",
        "client",
        "day"
      ],
      "description": "also aggregate per model, environment, client or UTC day (YYYY-MM-DD) of request.timestamp"
    }
  },
  "additionalProperties": true,
  "description": "plus property.<name>=<value> filters on report properties"
} as unknown as typeof S.StatsQuery;

export const StatsBody = {
  "type": "object",
  "required": [
    "totals"
  ],
  "properties": {
    "totals": {
      "type": "object",
      "required": [
        "requests",
        "cacheHits",
        "hitRatio",
        "inputTokens",
        "outputTokens",
        "costUsd",
        "costSavedUsd",
        "errors",
        "latencyMs"
      ],
      "properties": {
        "requests": {
          "type": "integer"
        },
        "cacheHits": StatsBody_totals_cacheHits,
        "hitRatio": StatsBody_totals_hitRatio,
        "inputTokens": {
          "type": "integer",
          "description": "sum of usage.inputTokens"
        },
        "outputTokens": StatsBody_totals_outputTokens,
        "costUsd": StatsBody_totals_costUsd,
        "costSavedUsd": StatsBody_totals_costSavedUsd,
        "errors": StatsBody_totals_errors,
        "latencyMs": StatsBody_totals_latencyMs
      }
    },
    "groups": {
      "type": "array",
      "items": {
        "type": "object",
        "required": [
          "key",
          "requests",
          "cacheHits",
          "hitRatio",
          "inputTokens",
          "outputTokens",
          "costUsd",
          "costSavedUsd",
          "errors",
          "latencyMs"
        ],
        "properties": {
          "key": {
            "anyOf": [
              {
                "type": "string"
              },
              {
                "type": "null"
              }
            ],
            "description": "the group; null when reports lack it"
          },
          "requests": {
            "type": "integer"
          },
          "cacheHits": StatsBody_totals_cacheHits,
          "hitRatio": StatsBody_totals_hitRatio,
          "inputTokens": {
            "type": "integer",
            "description": "sum of usage.inputTokens"
          },
          "outputTokens": StatsBody_totals_outputTokens,
          "costUsd": StatsBody_totals_costUsd,
          "costSavedUsd": StatsBody_totals_costSavedUsd,
          "errors": StatsBody_totals_errors,
          "latencyMs": StatsBody_totals_latencyMs
        }
      },
      "description": "only with groupBy; key ascending, null last"
    }
  }
} as unknown as typeof S.StatsBody;

export const ReportPageBody = {
  "type": "object",
  "required": [
    "items",
    "nextCursor"
  ],
  "properties": {
    "items": {
      "type": "array",
      "items": StoredReportBody
    },
    "nextCursor": {
      "anyOf": [
        {
          "type": "string"
        },
        {
          "type": "null"
        }
      ]
    }
  }
} as unknown as typeof S.ReportPageBody;

export const IdParams = {
  "type": "object",
  "required": [
    "id"
  ],
  "properties": {
    "id": {
      "type": "string",
      "minLength": 1,
      "maxLength": 64
    }
  }
} as unknown as typeof S.IdParams;

export const ReportExportLine = StoredReportBody as unknown as typeof S.ReportExportLine;

export const CacheExportBody = {
  "type": "string",
  "description": "application/x-ndjson, one entry per line"
} as unknown as typeof S.CacheExportBody;

export const ImportReply = {
  "type": "object",
  "required": [
    "imported",
    "skipped"
  ],
  "properties": {
    "imported": {
      "type": "integer",
      "description": "entries written to the cache store"
    },
    "skipped": {
      "type": "integer",
      "description": "valid entries left out because they had expired"
    }
  }
} as unknown as typeof S.ImportReply;

/** A schema's check, by `<part> <schema as JSON>` (schemaKey). */
export const CHECKS: ReadonlyMap<string, (value: unknown) => boolean> = new Map([
  [schemaKey("body", ReportBody), ((External: readonly unknown[]) => {
    // @ts-ignore: TypeBox's code
    const check_0 = ((value) => ((typeof value === "object" && value !== null && !(Array.isArray(value))) && ((("request" in value && "response" in value) && true) && ((((((value.metadata === undefined || (!("metadata" in value) || ((typeof value.metadata === "object" && value.metadata !== null && !(Array.isArray(value.metadata))) && (true && ((((value.metadata.client === undefined || (!("client" in value.metadata) || typeof value.metadata.client === "string")) && (value.metadata.clientVersion === undefined || (!("clientVersion" in value.metadata) || typeof value.metadata.clientVersion === "string"))) && (value.metadata.environment === undefined || (!("environment" in value.metadata) || typeof value.metadata.environment === "string"))) && (value.metadata.promptId === undefined || (!("promptId" in value.metadata) || typeof value.metadata.promptId === "string"))))))) && ((typeof value.request === "object" && value.request !== null && !(Array.isArray(value.request))) && (("timestamp" in value.request && true) && ((typeof value.request.timestamp === "string" && External[0](value.request.timestamp)) && (value.request.body === undefined || (!("body" in value.request) || ((typeof value.request.body === "object" && value.request.body !== null && !(Array.isArray(value.request.body))) && (true && true)))))))) && ((typeof value.response === "object" && value.response !== null && !(Array.isArray(value.response))) && (("timestamp" in value.response && true) && ((typeof value.response.timestamp === "string" && External[1](value.response.timestamp)) && (value.response.body === undefined || (!("body" in value.response) || ((typeof value.response.body === "object" && value.response.body !== null && !(Array.isArray(value.response.body))) && (true && true)))))))) && (value.properties === undefined || (!("properties" in value) || ((typeof value.properties === "object" && value.properties !== null && !(Array.isArray(value.properties))) && (true && true))))) && (value.cacheEnabled === undefined || (!("cacheEnabled" in value) || (typeof value.cacheEnabled === "boolean" || value.cacheEnabled === null)))) && (value.cacheHit === undefined || (!("cacheHit" in value) || (typeof value.cacheHit === "boolean" || value.cacheHit === null)))))));
    return check_0 as (value: unknown) => boolean;
  })([(fullFormats["date-time"] as { validate: (s: string) => boolean }).validate, (fullFormats["date-time"] as { validate: (s: string) => boolean }).validate])],
  [schemaKey("body", SaveBody), ((External: readonly unknown[]) => {
    // @ts-ignore: TypeBox's code
    const check_0 = ((value) => ((typeof value === "object" && value !== null && !(Array.isArray(value))) && ((("request" in value && "response" in value) && true) && (((typeof value.request === "object" && value.request !== null && !(Array.isArray(value.request))) && (true && true)) && ((typeof value.response === "object" && value.response !== null && !(Array.isArray(value.response))) && (true && true))))));
    return check_0 as (value: unknown) => boolean;
  })([])],
  [schemaKey("body", RetrieveBody), ((External: readonly unknown[]) => {
    // @ts-ignore: TypeBox's code
    const check_0 = ((value) => ((typeof value === "object" && value !== null && !(Array.isArray(value))) && (("request" in value && true) && ((typeof value.request === "object" && value.request !== null && !(Array.isArray(value.request))) && (true && true)))));
    return check_0 as (value: unknown) => boolean;
  })([])],
  [schemaKey("headers", CacheHeaders), ((External: readonly unknown[]) => {
    // @ts-ignore: TypeBox's code
    const check_0 = ((value) => ((typeof value === "object" && value !== null && !(Array.isArray(value))) && (true && (((value["x-relay-cache-namespace"] === undefined || (!("x-relay-cache-namespace" in value) || (typeof value["x-relay-cache-namespace"] === "string" && External[0].test(value["x-relay-cache-namespace"])))) && (value["x-relay-cache-ttl"] === undefined || (!("x-relay-cache-ttl" in value) || (typeof value["x-relay-cache-ttl"] === "string" && External[1].test(value["x-relay-cache-ttl"]))))) && (value["x-pezzo-project-id"] === undefined || (!("x-pezzo-project-id" in value) || typeof value["x-pezzo-project-id"] === "string"))))));
    return check_0 as (value: unknown) => boolean;
  })([new RegExp("^[A-Za-z0-9._-]{1,128}$", "u"), new RegExp("^[0-9]{1,9}$", "u")])],
  [schemaKey("querystring", ListQuery), ((External: readonly unknown[]) => {
    // @ts-ignore: TypeBox's code
    const check_0 = ((value) => ((typeof value === "object" && value !== null && !(Array.isArray(value))) && (true && ((((((((((value.limit === undefined || (!("limit" in value) || (Number.isInteger(value.limit) && (!((Number.isFinite(value.limit) || typeof value.limit === "bigint")) || (value.limit >= 1 && value.limit <= 1000))))) && (value.cursor === undefined || (!("cursor" in value) || (typeof value.cursor === "string" && (value.cursor.length <= 512 || (value.cursor.length <= 1024 && Guard.CodePointCount(value.cursor) <= 512)))))) && (value.from === undefined || (!("from" in value) || (typeof value.from === "string" && External[0](value.from))))) && (value.to === undefined || (!("to" in value) || (typeof value.to === "string" && External[1](value.to))))) && (value.environment === undefined || (!("environment" in value) || typeof value.environment === "string"))) && (value.promptId === undefined || (!("promptId" in value) || typeof value.promptId === "string"))) && (value.client === undefined || (!("client" in value) || typeof value.client === "string"))) && (value.model === undefined || (!("model" in value) || typeof value.model === "string"))) && (value.status === undefined || (!("status" in value) || (Number.isInteger(value.status) && (!((Number.isFinite(value.status) || typeof value.status === "bigint")) || (value.status >= 100 && value.status <= 599)))))) && (value.cacheHit === undefined || (!("cacheHit" in value) || typeof value.cacheHit === "boolean"))))));
    return check_0 as (value: unknown) => boolean;
  })([(fullFormats["date-time"] as { validate: (s: string) => boolean }).validate, (fullFormats["date-time"] as { validate: (s: string) => boolean }).validate])],
  [schemaKey("querystring", FilterQuery), ((External: readonly unknown[]) => {
    // @ts-ignore: TypeBox's code
    const check_0 = ((value) => ((typeof value === "object" && value !== null && !(Array.isArray(value))) && (true && ((((((((value.from === undefined || (!("from" in value) || (typeof value.from === "string" && External[0](value.from)))) && (value.to === undefined || (!("to" in value) || (typeof value.to === "string" && External[1](value.to))))) && (value.environment === undefined || (!("environment" in value) || typeof value.environment === "string"))) && (value.promptId === undefined || (!("promptId" in value) || typeof value.promptId === "string"))) && (value.client === undefined || (!("client" in value) || typeof value.client === "string"))) && (value.model === undefined || (!("model" in value) || typeof value.model === "string"))) && (value.status === undefined || (!("status" in value) || (Number.isInteger(value.status) && (!((Number.isFinite(value.status) || typeof value.status === "bigint")) || (value.status >= 100 && value.status <= 599)))))) && (value.cacheHit === undefined || (!("cacheHit" in value) || typeof value.cacheHit === "boolean"))))));
    return check_0 as (value: unknown) => boolean;
  })([(fullFormats["date-time"] as { validate: (s: string) => boolean }).validate, (fullFormats["date-time"] as { validate: (s: string) => boolean }).validate])],
  [schemaKey("querystring", StatsQuery), ((External: readonly unknown[]) => {
    // @ts-ignore: TypeBox's code
    const check_0 = ((value) => ((typeof value === "object" && value !== null && !(Array.isArray(value))) && (true && (((((((((value.from === undefined || (!("from" in value) || (typeof value.from === "string" && External[0](value.from)))) && (value.to === undefined || (!("to" in value) || (typeof value.to === "string" && External[1](value.to))))) && (value.environment === undefined || (!("environment" in value) || typeof value.environment === "string"))) && (value.promptId === undefined || (!("promptId" in value) || typeof value.promptId === "string"))) && (value.client === undefined || (!("client" in value) || typeof value.client === "string"))) && (value.model === undefined || (!("model" in value) || typeof value.model === "string"))) && (value.status === undefined || (!("status" in value) || (Number.isInteger(value.status) && (!((Number.isFinite(value.status) || typeof value.status === "bigint")) || (value.status >= 100 && value.status <= 599)))))) && (value.cacheHit === undefined || (!("cacheHit" in value) || typeof value.cacheHit === "boolean"))) && (value.groupBy === undefined || (!("groupBy" in value) || (((value.groupBy === "model" || value.groupBy === "environment") || value.groupBy === "client") || value.groupBy === "day")))))));
    return check_0 as (value: unknown) => boolean;
  })([(fullFormats["date-time"] as { validate: (s: string) => boolean }).validate, (fullFormats["date-time"] as { validate: (s: string) => boolean }).validate])],
  [schemaKey("params", IdParams), ((External: readonly unknown[]) => {
    // @ts-ignore: TypeBox's code
    const check_0 = ((value) => ((typeof value === "object" && value !== null && !(Array.isArray(value))) && ("id" in value && (typeof value.id === "string" && ((value.id.length >= 2 || (value.id.length >= 1 && Guard.CodePointCount(value.id) >= 1)) && (value.id.length <= 64 || (value.id.length <= 128 && Guard.CodePointCount(value.id) <= 64)))))));
    return check_0 as (value: unknown) => boolean;
  })([])],
]);

/** The key of a schema a request part is checked against. */
export function schemaKey(part: string, schema: unknown): string {
  return `${part} ${JSON.stringify(schema)}`;
}
