// GET /api/cache/v1/export and POST /api/cache/v1/import: every cache entry as NDJSON (the format is
// documented in core/cache-transfer.ts), straight from and to the cache store. Registered inside the /api
// scope; this plugin's own encapsulated scope takes application/x-ndjson bodies only.
import { Readable } from 'node:stream';
import type { FastifyPluginAsync } from 'fastify';
import { decodeUtf8Strict } from '../core/json-guard.js';
import { NDJSON_CONTENT_TYPE, exportEntries, importEntries, splitNdjson } from '../core/cache-transfer.js';
import { RELAY_ERR_CACHE_UNAVAILABLE, RELAY_ERR_UNSUPPORTED_MEDIA_TYPE, StoreUnavailableError } from '../errors.js';
import type { CacheStore } from '../storage/cache-store.js';
import { CacheExportBody, ErrorBody, ImportReply } from './schemas.generated.js';

export interface CacheTransferRoutesOptions {
  store: CacheStore;
}

const LINE_FORMAT =
  'One JSON object per line: {"key": "<namespace>:<sha256 hex>", "createdAt": <epoch ms>, "expiresAt": <epoch ms>, "value": <cached response object>}.';

/** A store failure is the same 503 the rest of /api/cache answers with. */
function storeError(err: unknown): unknown {
  return err instanceof StoreUnavailableError ? new RELAY_ERR_CACHE_UNAVAILABLE(err.message, { cause: err }) : err;
}

function unsupported(contentType: string | undefined): Error {
  const err = new RELAY_ERR_UNSUPPORTED_MEDIA_TYPE(String(contentType));
  err.message = `Unsupported content type ${String(contentType)}: this endpoint takes ${NDJSON_CONTENT_TYPE}`;
  return err;
}

export const cacheTransferRoutes: FastifyPluginAsync<CacheTransferRoutesOptions> = async (app, { store }) => {
  // This scope's parsers replace the inherited application/json one: NDJSON is read as one string (so the
  // app's bodyLimit applies, a 413 above it), and anything else is a 415 that names the right type.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(NDJSON_CONTENT_TYPE, { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, decodeUtf8Strict(body as Buffer));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  app.addContentTypeParser('*', (request, _payload, done) => done(unsupported(request.headers['content-type']), undefined));

  app.get(
    '/api/cache/v1/export',
    {
      schema: {
        tags: ['Cache'],
        summary: 'Export every live cache entry as NDJSON',
        description: `${LINE_FORMAT} Expired entries are left out. The answer is streamed.`,
        produces: [NDJSON_CONTENT_TYPE],
        response: { 200: CacheExportBody, 503: ErrorBody },
      },
    },
    async (_request, reply) => {
      const lines = exportEntries(store)[Symbol.asyncIterator]();
      // The first entry is read before the answer starts, so a store that is down is a 503 with a JSON
      // body; a failure later can only cut the stream (like any streamed answer).
      let first: IteratorResult<string>;
      try {
        first = await lines.next();
      } catch (err) {
        throw storeError(err);
      }
      async function* body(): AsyncIterable<string> {
        if (first.done) return;
        yield `${first.value}\n`;
        for (let next = await lines.next(); !next.done; next = await lines.next()) yield `${next.value}\n`;
      }
      return reply.type(NDJSON_CONTENT_TYPE).send(Readable.from(body(), { objectMode: false }));
    },
  );

  app.post(
    '/api/cache/v1/import',
    {
      schema: {
        tags: ['Cache'],
        summary: 'Import cache entries from NDJSON',
        description:
          `${LINE_FORMAT} All or nothing: every line is validated before any is written; a bad line is a 400 ` +
          'naming it ("line N: …"). Expired entries are skipped. Entries replace those with the same key.',
        consumes: [NDJSON_CONTENT_TYPE],
        response: { 200: ImportReply, 400: ErrorBody, 413: ErrorBody, 415: ErrorBody, 503: ErrorBody },
      },
    },
    async (request) => {
      // A request without a body never meets the parsers above; it must still say what it sends.
      if (typeof request.body !== 'string') throw unsupported(request.headers['content-type']);
      const text = request.body;
      try {
        return await importEntries(store, splitNdjson(text));
      } catch (err) {
        throw storeError(err);
      }
    },
  );
};
