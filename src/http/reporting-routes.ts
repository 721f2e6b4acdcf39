// POST /api/reporting/v2/request and reading reports back.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { RELAY_ERR_NOT_FOUND, RELAY_ERR_VALIDATION } from '../errors.js';
import type { ReportInput } from '../core/report-derive.js';
import type { ReportService } from '../core/report-service.js';
import type { ReportQuery } from '../storage/report-store.js';
import { ErrorBody, IdParams, ListQuery, ReportBody, ReportPageBody, StoredReportBody } from './schemas.js';

export interface ReportingRoutesOptions {
  reports: ReportService;
}

const PROPERTY_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

export const reportingRoutes: FastifyPluginAsyncTypebox<ReportingRoutesOptions> = async (app, { reports }) => {
  app.post(
    '/api/reporting/v2/request',
    {
      schema: {
        tags: ['Reporting'],
        summary: 'Report one request/response exchange',
        description: 'Answers 201 only once the report is durable.',
        body: ReportBody,
        response: { 201: StoredReportBody, 400: ErrorBody, 413: ErrorBody, 415: ErrorBody, 503: ErrorBody },
      },
    },
    async (request, reply) => {
      const stored = await reports.record(request.body as ReportInput);
      return reply.code(201).send(stored);
    },
  );

  app.get(
    '/api/reporting/v2/requests',
    {
      schema: {
        tags: ['Reporting'],
        summary: 'List reports, newest first',
        querystring: ListQuery,
        response: { 200: ReportPageBody, 400: ErrorBody },
      },
    },
    async (request) => {
      const q = request.query;
      const query: ReportQuery = { limit: q.limit ?? 50 };
      for (const k of ['cursor', 'from', 'to', 'environment', 'promptId', 'client', 'model'] as const) {
        if (q[k] !== undefined) query[k] = q[k];
      }
      if (q.status !== undefined) query.status = q.status;
      if (q.cacheHit !== undefined) query.cacheHit = q.cacheHit;
      const properties = propertyFilters(request.query as Record<string, unknown>);
      if (properties) query.properties = properties;
      return reports.list(query);
    },
  );

  app.get(
    '/api/reporting/v2/requests/:id',
    {
      schema: {
        tags: ['Reporting'],
        summary: 'One report',
        params: IdParams,
        response: { 200: StoredReportBody, 404: ErrorBody },
      },
    },
    async (request) => {
      const report = await reports.get(request.params.id);
      if (!report) throw new RELAY_ERR_NOT_FOUND(`No report with id ${request.params.id}`);
      return report;
    },
  );
};

/** `property.userId=u1` → {userId: 'u1'}; names are checked so they can go into a JSON path safely. */
function propertyFilters(query: Record<string, unknown>): Record<string, string> | undefined {
  let out: Record<string, string> | undefined;
  for (const [key, value] of Object.entries(query)) {
    if (!key.startsWith('property.')) continue;
    const name = key.slice('property.'.length);
    if (!PROPERTY_NAME.test(name)) throw new RELAY_ERR_VALIDATION(`querystring/${key} is not a valid property name`);
    if (typeof value !== 'string') throw new RELAY_ERR_VALIDATION(`querystring/${key} must be given once`);
    (out ??= {})[name] = value;
  }
  return out;
}
