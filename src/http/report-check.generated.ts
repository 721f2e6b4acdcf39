// Generated from src/http/schemas.ts (ReportBody) by test/unit/report-check.test.ts with TypeBox's Code
// (typebox/compile) after registerAjvFormats(): do not edit; `UPDATE_GENERATED=1 npx vitest run
// test/unit/report-check.test.ts` writes it again. report-edge.ts hands SetExternal the validators named
// in EXTERNAL_FORMATS, from ajv-formats, as the route's compiler has them.
// @ts-nocheck

// @ts-ignore
let External = []

// @ts-ignore
export function SetExternal(external) { External = external.variables }

// @ts-ignore
const check_0 = ((value) => ((typeof value === "object" && value !== null && !(Array.isArray(value))) && ((("request" in value && "response" in value) && true) && ((((((value.metadata === undefined || (!("metadata" in value) || ((typeof value.metadata === "object" && value.metadata !== null && !(Array.isArray(value.metadata))) && (true && ((((value.metadata.client === undefined || (!("client" in value.metadata) || typeof value.metadata.client === "string")) && (value.metadata.clientVersion === undefined || (!("clientVersion" in value.metadata) || typeof value.metadata.clientVersion === "string"))) && (value.metadata.environment === undefined || (!("environment" in value.metadata) || typeof value.metadata.environment === "string"))) && (value.metadata.promptId === undefined || (!("promptId" in value.metadata) || typeof value.metadata.promptId === "string"))))))) && ((typeof value.request === "object" && value.request !== null && !(Array.isArray(value.request))) && (("timestamp" in value.request && true) && ((typeof value.request.timestamp === "string" && External[0](value.request.timestamp)) && (value.request.body === undefined || (!("body" in value.request) || ((typeof value.request.body === "object" && value.request.body !== null && !(Array.isArray(value.request.body))) && (true && true)))))))) && ((typeof value.response === "object" && value.response !== null && !(Array.isArray(value.response))) && (("timestamp" in value.response && true) && ((typeof value.response.timestamp === "string" && External[1](value.response.timestamp)) && (value.response.body === undefined || (!("body" in value.response) || ((typeof value.response.body === "object" && value.response.body !== null && !(Array.isArray(value.response.body))) && (true && true)))))))) && (value.properties === undefined || (!("properties" in value) || ((typeof value.properties === "object" && value.properties !== null && !(Array.isArray(value.properties))) && (true && true))))) && (value.cacheEnabled === undefined || (!("cacheEnabled" in value) || (typeof value.cacheEnabled === "boolean" || value.cacheEnabled === null)))) && (value.cacheHit === undefined || (!("cacheHit" in value) || (typeof value.cacheHit === "boolean" || value.cacheHit === null)))))));

// @ts-ignore
export function Check(value) { return check_0(value) }

export const EXTERNAL_FORMATS = ["date-time","date-time"];
