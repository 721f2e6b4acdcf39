// POST /api/reporting/v2/request and reading reports back: one, a page, all of them as NDJSON, or stats.
import { Readable } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import { RELAY_ERR_NOT_FOUND, RELAY_ERR_VALIDATION } from '../errors.js';
import { uuidv7 } from '../core/ids.js';
import type { ReportService } from '../core/report-service.js';
import type { ReportFilter, ReportPage, ReportQuery } from '../storage/report-store.js';
import {
  ErrorBody,
  FilterQuery,
  IdParams,
  ListQuery,
  ReportBody,
  ReportExportLine,
  ReportPageBody,
  StatsBody,
  StatsQuery,
  StoredReportBody,
} from './schemas.generated.js';

export interface ReportingRoutesOptions {
  reports: ReportService;
}

const PROPERTY_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** The reply is JSON text already. */
const passThrough = (text: unknown): string => text as string;

/** Reports per store read while exporting: memory holds one page, whatever the export's size. */
const EXPORT_PAGE_SIZE = 500;

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
      // Validated here (the schema above); derived, stored and made durable on the report worker, which
      // answers with the stored report's JSON.
      const receivedAt = Date.now();
      const text = await reports.recordApi({ id: uuidv7(receivedAt), receivedAt, body: request.rawBody! });
      return reply.code(201).type('application/json; charset=utf-8').serializer(passThrough).send(text as never);
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
      const query: ReportQuery = { limit: request.query.limit ?? 50, ...reportFilter(request.query) };
      if (request.query.cursor !== undefined) query.cursor = request.query.cursor;
      return reports.list(query);
    },
  );

  // A static segment: find-my-way tries it before the `:id` parameter of the route below.
  app.get(
    '/api/reporting/v2/requests/export',
    {
      schema: {
        tags: ['Reporting'],
        summary: 'Every report the filters select, as NDJSON, newest first',
        description: 'One stored report as JSON per line; streamed, read from the store a page at a time.',
        querystring: FilterQuery,
        response: {
          200: {
            description: 'one report per line',
            content: { 'application/x-ndjson': { schema: ReportExportLine } },
          },
          400: ErrorBody,
          503: ErrorBody,
        },
      },
    },
    async (request, reply) => {
      const filter = reportFilter(request.query);
      // The first page is read before the answer starts, so a bad filter or a store outage is still a
      // 400 or a 503; a failure on a later page can only cut the stream.
      const first = await reports.list({ ...filter, limit: EXPORT_PAGE_SIZE });
      return reply.type('application/x-ndjson').send(Readable.from(exportLines(reports, filter, first)));
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

  app.get(
    '/api/reporting/v2/stats',
    {
      schema: {
        tags: ['Reporting'],
        summary: 'Requests, hit ratio, tokens, cost, cost saved, errors and latency percentiles',
        description: 'Over the reports the list filters select; with groupBy, also per group.',
        querystring: StatsQuery,
        response: { 200: StatsBody, 400: ErrorBody, 503: ErrorBody },
      },
    },
    async (request) => reports.stats(reportFilter(request.query), request.query.groupBy),
  );
};

/**
 * Lines of the export, one page of the list after another. A generator pulled by Readable.from: the next
 * page is read only when the client has taken the previous one, and a client that goes away ends it.
 */
async function* exportLines(reports: ReportService, filter: ReportFilter, first: ReportPage): AsyncGenerator<string> {
  let page = first;
  for (;;) {
    for (const report of page.items) yield `${JSON.stringify(report)}\n`;
    if (page.nextCursor === null) return;
    page = await reports.list({ ...filter, limit: EXPORT_PAGE_SIZE, cursor: page.nextCursor });
  }
}

/** The list's filters from a querystring (ListQuery, FilterQuery or StatsQuery), `property.<name>` included. */
function reportFilter(q: Static<typeof FilterQuery>): ReportFilter {
  const filter: ReportFilter = {};
  for (const k of ['from', 'to', 'environment', 'promptId', 'client', 'model'] as const) {
    if (q[k] !== undefined) filter[k] = q[k];
  }
  if (q.status !== undefined) filter.status = q.status;
  if (q.cacheHit !== undefined) filter.cacheHit = q.cacheHit;
  const properties = propertyFilters(q);
  if (properties) filter.properties = properties;
  return filter;
}

/** `property.userId=u1` → {userId: 'u1'}; names are checked so they can go into a JSON path safely. */
function propertyFilters(query: object): Record<string, string> | undefined {
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
