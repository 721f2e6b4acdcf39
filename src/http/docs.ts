// The OpenAPI 3 document, generated from the route schemas, at /docs/json, and Swagger UI at /docs
// (served from the package, no CDN).
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

export async function registerDocs(app: FastifyInstance, version: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'llm-relay',
        description: 'A caching, reporting reverse proxy for LLM APIs: the direct reporting and cache API.',
        version,
      },
      tags: [
        { name: 'Reporting', description: 'Reports of request/response exchanges' },
        { name: 'Cache', description: 'Explicit cache entries (Pezzo-compatible)' },
        { name: 'Operations', description: 'Health and readiness' },
      ],
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
}
