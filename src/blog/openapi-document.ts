/**
 * The OpenAPI description of a blog mount, made at its first request rather
 * than at serve's start: @fastify/swagger (and what it loads: a YAML
 * writer, a JSON Schema resolver) was, with Swagger UI (docs-page.ts), a
 * tenth of `miniapp serve`'s time from spawn to ready, for a document most
 * runs never fetch.
 *
 * The mount keeps the options of each route registered after this (an
 * onRoute hook, as @fastify/swagger's own); the first request for the
 * document registers @fastify/swagger on a Fastify instance of its own (no
 * listener), then each kept route with its method, URL, schema and config
 * and a handler that never runs, and asks it for the document. That is
 * @fastify/swagger's own document of the same routes:
 * test/blog/openapi-document.test.ts holds it to the one it made when it
 * was registered on the mount. The routes' schemas are read there, never
 * compiled (validators and serializers that do nothing).
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import { lazyOnce } from '../lazy-once.js';

/** @fastify/swagger's `swagger()`: the document, or it in YAML with `{ yaml: true }`. */
export type SwaggerDocument = FastifyInstance['swagger'];

const neverCalled = async () => {
  throw new Error('a route of the OpenAPI document is never called');
};

/**
 * Keeps the routes `app` registers from now on, and gives what makes their
 * document, once (the same function, and @fastify/swagger's cache, for every
 * request after the first).
 */
export function lazyOpenApi(app: FastifyInstance, options: FastifyDynamicSwaggerOptions): () => Promise<SwaggerDocument> {
  const routes: RouteOptions[] = [];
  // @fastify/swagger leaves out HEAD routes unless told to expose them (these options never do).
  app.addHook('onRoute', (route) => {
    if (route.method !== 'HEAD') routes.push(route);
  });
  return lazyOnce(async (): Promise<SwaggerDocument> => {
    const [{ default: Fastify }, { default: swagger }] = await Promise.all([import('fastify'), import('@fastify/swagger')]);
    const described = Fastify({ logger: false });
    described.setValidatorCompiler(() => () => true);
    described.setSerializerCompiler(() => (data) => JSON.stringify(data));
    await described.register(swagger, options);
    for (const { method, url, schema, config, links } of routes as (RouteOptions & { links?: unknown })[]) {
      described.route({ method, url, schema, config, ...(links === undefined ? {} : { links }), exposeHeadRoute: false, handler: neverCalled } as RouteOptions);
    }
    await described.ready();
    return described.swagger.bind(described) as SwaggerDocument;
  });
}
