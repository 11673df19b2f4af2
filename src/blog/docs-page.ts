/**
 * Swagger UI for one mount of the blog API, at `<mount>/docs`, built at its
 * first request rather than at serve's start: @fastify/swagger-ui and what
 * it loads (@fastify/static, send, mime, its routes for three mounts) were
 * about a twentieth of `miniapp serve`'s time from spawn to ready, for a
 * page most runs never open.
 *
 * The page is the library's own: a Fastify instance of its own (no
 * listener) with @fastify/swagger-ui registered as before, asked with
 * `inject` for each request under `<mount>/docs`, its answer passed on
 * (status, headers, and its bytes as a stream, so a 1.5 MB script is not
 * held whole for each request) through the mount's own routes, so the
 * mount's hooks (security headers, limits, logs, metrics) see it as any
 * other. Swagger UI's headers come last: its pages keep their own
 * content-security-policy. The document it shows is the mount's own
 * (openapi-document.ts), made before the page is.
 * What the library does not have is answered by the mount's 404.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { FastifySwaggerUiOptions } from '@fastify/swagger-ui';
import type { SwaggerDocument } from './openapi-document.js';
import { lazyOnce } from '../lazy-once.js';

/** Headers of the inner answer that belong to its own (absent) connection. */
const NOT_PASSED_ON = new Set(['connection', 'keep-alive', 'transfer-encoding', 'date']);

/** Registers `/docs` and `/docs/*` on `app` (a mount, with its prefix), served by Swagger UI built on first use. */
export function lazyDocsPage(app: FastifyInstance, document: () => Promise<SwaggerDocument>, options: Omit<FastifySwaggerUiOptions, 'routePrefix'>): void {
  const routePrefix = `${app.prefix}/docs`;
  const built = lazyOnce(async (): Promise<FastifyInstance> => {
    const [{ default: Fastify }, { default: swaggerUi }, { default: fastifyPlugin }, swagger] = await Promise.all([
      import('fastify'),
      import('@fastify/swagger-ui'),
      import('fastify-plugin'),
      document(),
    ]);
    const docs = Fastify({ logger: false });
    // Swagger UI needs @fastify/swagger registered before it, for its `swagger()`: here that is the mount's document.
    await docs.register(fastifyPlugin(async (instance: FastifyInstance) => void instance.decorate('swagger', swagger), { name: '@fastify/swagger' }));
    await docs.register(swaggerUi, { ...options, routePrefix });
    await docs.ready();
    return docs;
  });
  const forward = async (request: FastifyRequest, reply: FastifyReply) => {
    const docs = await built();
    // A HEAD is asked as a GET: Fastify's HEAD answer keeps the GET's length and drops its body.
    const answer = await docs.inject({ method: 'GET', url: request.url, headers: request.headers, payloadAsStream: true });
    const body = answer.stream();
    if (answer.statusCode === 404) {
      body.destroy();
      return reply.callNotFound();
    }
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value !== undefined && !NOT_PASSED_ON.has(name)) void reply.header(name, value);
    }
    return reply.status(answer.statusCode).send(body);
  };
  app.get('/docs', { schema: { hide: true } }, forward);
  app.get('/docs/*', { schema: { hide: true } }, forward);
}
