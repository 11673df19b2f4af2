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
 *
 * Compiled on first use: Fastify asks for every route's functions when the
 * app starts, and compiling them all there (a new ajv, its meta-schema, every
 * route's schemas: about 150 ms of CPU) was the largest part of serve's time
 * to ready. What Fastify gets at start is a stand-in that compiles the real
 * function the first time a request needs it, then calls it: the same
 * schema, the same checks, the same answers. The first request that needs
 * a validator pays for ajv (about 60 ms, once per process); compiling ahead
 * in the background after start was tried and dropped: it held the event
 * loop in the first requests' way instead.
 */
import { createRequire } from 'node:module';
import type AjvCompiler from '@fastify/ajv-compiler';
import type SerializerSelector from '@fastify/fast-json-stringify-compiler';

/** Both compilers are loaded when the first function is compiled, not when serve starts (ajv alone is about 30 ms). */
const requireCjs = createRequire(import.meta.url);

interface RouteSchema {
  schema?: unknown;
  method?: string;
  url?: string;
  httpPart?: string;
  httpStatus?: string;
  contentType?: string;
}

type Factory = (externalSchemas: unknown, options: unknown) => (route: RouteSchema) => unknown;

/** Every stand-in's compile, so that a test can compile them all at once (compileEveryStandIn). */
const standIns = new Set<() => unknown>();

/**
 * Compiles every schema handed out so far in this process, as Fastify's own compilers do when an app starts, and
 * gives the failures: a test that builds serve's app and calls this finds a schema that cannot compile, which serve
 * would only meet at the first request that needs it.
 */
export function compileEveryStandIn(): Error[] {
  const failures: Error[] = [];
  for (const compile of standIns) {
    try {
      compile();
    } catch (error) {
      failures.push(error as Error);
    }
  }
  return failures;
}

/**
 * A function that compiles `compile()` on its first call (or property read) and is that function from then on:
 * called with the same arguments, and with ajv's `errors` and `schemaEnv` read through (Fastify reads both). A
 * schema that does not compile fails every call with the same error, naming its route, without compiling again.
 */
function compiledOnFirstUse(compile: () => unknown, route: RouteSchema): unknown {
  let made: ((...args: unknown[]) => unknown) | undefined;
  let failure: Error | undefined;
  const real = () => {
    if (failure) throw failure;
    if (made === undefined) {
      try {
        made = compile() as (...args: unknown[]) => unknown;
      } catch (error) {
        const part = route.httpPart ?? `response ${route.httpStatus ?? ''}`.trim();
        failure = new Error(`the ${part} schema of ${route.method ?? '?'} ${route.url ?? '?'} does not compile: ${(error as Error).message}`, { cause: error });
        throw failure;
      }
    }
    return made;
  };
  standIns.add(real);
  const standIn = function (this: unknown, ...args: unknown[]) {
    const fn = real();
    try {
      return fn.apply(this, args);
    } finally {
      const errors = (fn as { errors?: unknown }).errors;
      if ((standIn as { errors?: unknown }).errors !== errors) (standIn as { errors?: unknown }).errors = errors;
    }
  };
  // Fastify passes ajv's validators their parent data when they have a schemaEnv (so that a root value can change).
  Object.defineProperty(standIn, 'schemaEnv', { get: () => (real() as { schemaEnv?: unknown }).schemaEnv });
  return standIn;
}

/** `factory()`, its compiled functions kept by schema, part, status, content type, shared schemas and options. */
function keeping(factory: () => Factory): Factory {
  const compiled = new Map<string, unknown>();
  return (externalSchemas: unknown, options: unknown) => {
    // The compiler (a new ajv, or fast-json-stringify's options) is built once a function of this context is compiled.
    let compile: ((route: RouteSchema) => unknown) | undefined;
    const context = JSON.stringify([externalSchemas, options]);
    return (route: RouteSchema) => {
      const key = JSON.stringify([route.httpPart ?? null, route.httpStatus ?? null, route.contentType ?? null, route.schema ?? null]) + context;
      let made = compiled.get(key);
      if (made === undefined) {
        made = compiledOnFirstUse(() => {
          compile ??= factory()(externalSchemas, options);
          return compile(route);
        }, route);
        compiled.set(key, made);
      }
      return made;
    };
  };
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

function bodiesAsSent(build: ValidatorFactory): Factory {
  return (externalSchemas: unknown, options: unknown) => {
    const given = options as { customOptions?: object } | undefined;
    // Each ajv is made when a schema of its kind is first compiled.
    let text: ((route: RouteSchema) => unknown) | undefined;
    let bodies: ((route: RouteSchema) => unknown) | undefined;
    return (route: RouteSchema) => {
      if (route.httpPart === 'body') {
        bodies ??= build(externalSchemas, { ...given, customOptions: { ...given?.customOptions, ...BODY_AJV_OPTIONS } });
        return bodies(route);
      }
      text ??= build(externalSchemas, given);
      return text(route);
    };
  };
}

let ajvFactory: Factory | undefined;
let serializerFactory: Factory | undefined;

/** For `Fastify({ schemaController: { compilersFactory } })`. */
export const compilersFactory = {
  buildValidator: keeping(() => (ajvFactory ??= bodiesAsSent((requireCjs('@fastify/ajv-compiler') as () => ValidatorFactory)()))) as unknown as ReturnType<
    typeof AjvCompiler
  >,
  buildSerializer: keeping(() => (serializerFactory ??= (requireCjs('@fastify/fast-json-stringify-compiler') as () => Factory)())) as unknown as ReturnType<
    typeof SerializerSelector
  >,
};
