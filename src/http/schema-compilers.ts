/**
 * The JSON-schema compilers of every Fastify app in the process (serve's,
 * the sandbox's): Fastify's own (ajv for request validation, bodies taken as
 * sent: BODY_AJV_OPTIONS; fast-json-stringify for responses), with each compiled function kept and
 * handed out again for the same schema in the same context. serve mounts
 * the blog API three times (/api/v1, /api/v2, /api) with the same schemas,
 * and a process that starts serve again (the tests, a restart in place)
 * would compile them all again: compiling was a quarter of serve's start.
 *
 * A compiled validator or serializer depends only on its schema, the shared
 * schemas of its app and the compiler options, which make up the key; it
 * keeps no state between calls (ajv's `errors` is set and read within one
 * synchronous validation).
 */
import AjvCompiler from '@fastify/ajv-compiler';
import SerializerSelector from '@fastify/fast-json-stringify-compiler';

interface RouteSchema {
  schema?: unknown;
  httpPart?: string;
  httpStatus?: string;
  contentType?: string;
}

type Factory = (externalSchemas: unknown, options: unknown) => (route: RouteSchema) => unknown;

/** `factory`, its compiled functions kept by schema, part, status, content type, shared schemas and options. */
function keeping<F>(factory: F): F {
  const compiled = new Map<string, unknown>();
  const build = factory as unknown as Factory;
  return ((externalSchemas: unknown, options: unknown) => {
    const compile = build(externalSchemas, options);
    const context = JSON.stringify([externalSchemas, options]);
    return (route: RouteSchema) => {
      const key = JSON.stringify([route.httpPart ?? null, route.httpStatus ?? null, route.contentType ?? null, route.schema ?? null]) + context;
      let made = compiled.get(key);
      if (made === undefined) {
        made = compile(route);
        compiled.set(key, made);
      }
      return made;
    };
  }) as unknown as F;
}

/**
 * Request bodies are validated as they were sent. Fastify's ajv converts types (`"title": 12345` became the title
 * "12345", `"is_published": "false"` a boolean) and drops what a schema with `additionalProperties: false` does not
 * name, so a client's typo or a field of a later version vanished without a word. In JSON the client chose each
 * type, so a body is neither converted nor trimmed: the schema refuses it, naming the field. Query strings and
 * paths are text, whose numbers and booleans are still read from it (`?page=2`, `/posts/7`).
 */
const BODY_AJV_OPTIONS = { coerceTypes: false, removeAdditional: false } as const;

type ValidatorFactory = (externalSchemas: unknown, options: { customOptions?: object } | undefined) => (route: RouteSchema) => unknown;

function bodiesAsSent<F>(factory: F): F {
  const build = factory as unknown as ValidatorFactory;
  return ((externalSchemas: unknown, options: { customOptions?: object } | undefined) => {
    const text = build(externalSchemas, options);
    const bodies = build(externalSchemas, { ...options, customOptions: { ...options?.customOptions, ...BODY_AJV_OPTIONS } });
    return (route: RouteSchema) => (route.httpPart === 'body' ? bodies(route) : text(route));
  }) as unknown as F;
}

/** For `Fastify({ schemaController: { compilersFactory } })`. */
export const compilersFactory = {
  buildValidator: keeping(bodiesAsSent(AjvCompiler())),
  buildSerializer: keeping(SerializerSelector()),
};
