/**
 * The OpenAPI description that each blog mount makes at its first request
 * (src/blog/openapi-document.ts) is the one @fastify/swagger made when it
 * was registered on the mount itself, before the routes: the same routes,
 * the same options, the same document, for every version and mount, and
 * again with a public URL. Both apps are built as serve builds its own
 * (the same schema compilers); their routes are registered, never called.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import { afterEach, describe, expect, it } from 'vitest';
import { blogApi, openApiOptions, type BlogOptions } from '../../src/blog/api.js';
import { compilersFactory } from '../../src/http/schema-compilers.js';
import { BLOG_MOUNTS } from '../../src/server/app.js';

/** What registering the routes needs; nothing of it runs, since no route is called. */
const STORES = { posts: {}, users: {}, tokens: {}, images: {}, onPublished: () => undefined } as unknown as Omit<BlogOptions, 'version' | 'docs'>;

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

function newApp(): FastifyInstance {
  const app = Fastify({ logger: false, schemaController: { compilersFactory } }) as unknown as FastifyInstance;
  apps.push(app);
  return app;
}

/** The document as @fastify/swagger made it registered on the mount, before the blog's routes. */
async function eagerDocument(version: 1 | 2, prefix: string, publicUrl: string | undefined): Promise<unknown> {
  const app = newApp();
  let mount: FastifyInstance | undefined;
  await app.register(
    async (instance) => {
      mount = instance;
      await instance.register(swagger, openApiOptions(version, instance.prefix, publicUrl));
      await blogApi(instance, { ...STORES, version, docs: false, publicUrl });
    },
    { prefix },
  );
  await app.ready();
  return JSON.parse(JSON.stringify(mount!.swagger()));
}

/** The document the mount serves at /openapi.json, made at that request. */
async function lazyDocument(version: 1 | 2, prefix: string, publicUrl: string | undefined): Promise<unknown> {
  const app = newApp();
  await app.register(blogApi, { ...STORES, version, docs: true, publicUrl, prefix } as BlogOptions);
  await app.ready();
  const answer = await app.inject({ method: 'GET', url: `${prefix}/openapi.json` });
  expect(answer.statusCode).toBe(200);
  return answer.json();
}

describe("each blog mount's OpenAPI document, made at its first request", () => {
  it.each(BLOG_MOUNTS.flatMap((mount) => [undefined, 'https://blog.example.com'].map((publicUrl) => ({ ...mount, publicUrl }))))(
    'is the one @fastify/swagger made on the mount: $prefix (v$version), public URL $publicUrl',
    async ({ prefix, version, publicUrl }) => {
      const lazy = (await lazyDocument(version, prefix, publicUrl)) as { paths: Record<string, unknown> };
      expect(Object.keys(lazy.paths).length).toBeGreaterThan(5);
      expect(lazy).toEqual(await eagerDocument(version, prefix, publicUrl));
    },
  );

  it('is made once: a second request gets the same document', async () => {
    const app = newApp();
    await app.register(blogApi, { ...STORES, version: 2, docs: true, prefix: '/api/v2' } as BlogOptions);
    const [first, second] = await Promise.all([
      app.inject({ method: 'GET', url: '/api/v2/openapi.json' }),
      app.inject({ method: 'GET', url: '/api/v2/openapi.json' }),
    ]);
    expect(second.body).toBe(first.body);
    const yaml = await app.inject({ method: 'GET', url: '/api/v2/docs/yaml' });
    expect(yaml.statusCode).toBe(200);
    expect(yaml.body).toContain('openapi: 3.0.3');
  });
});
