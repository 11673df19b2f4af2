/**
 * The shared schema compilers (src/http/schema-compilers.ts): a schema is
 * compiled once per process and context, and an app that uses them answers
 * exactly as an app on Fastify's own compilers does.
 */
import { describe, expect, it } from 'vitest';
import Fastify, { type FastifyInstance } from 'fastify';
import { compileEveryStandIn, compilersFactory } from '../../src/http/schema-compilers.js';
import { startTestServe } from '../helpers/serve.js';

const BODY = {
  type: 'object',
  required: ['title', 'tags'],
  additionalProperties: false,
  properties: { title: { type: 'string', minLength: 1 }, tags: { type: 'array', items: { type: 'string' } }, draft: { type: 'boolean', default: false } },
} as const;
const QUERY = { type: 'object', properties: { page: { type: 'integer', minimum: 1 }, tag: { type: 'array', items: { type: 'string' } } } } as const;
const REPLY = {
  200: {
    type: 'object',
    properties: { title: { type: 'string' }, tags: { type: 'array', items: { type: 'string' } }, draft: { type: 'boolean' }, page: { type: 'integer' } },
  },
} as const;

function app(shared: boolean): FastifyInstance {
  const made = Fastify(shared ? { schemaController: { compilersFactory } } : {});
  made.post('/posts', { schema: { body: BODY, querystring: QUERY, response: REPLY } }, async (request) => ({
    ...(request.body as object),
    page: (request.query as { page?: number }).page,
    secret: 'not in the schema, so never sent',
  }));
  return made as unknown as FastifyInstance;
}

describe('the shared schema compilers', () => {
  it("answer every query string as Fastify's own compilers do: coercion, defaults, errors", async () => {
    const body = { title: 'Hi', tags: ['x'] };
    const requests = [
      { url: '/posts?page=2&tag=a', payload: body },
      { url: '/posts?page=0', payload: body },
      { url: '/posts?page=abc', payload: body },
      { url: '/posts', payload: { title: '', tags: [] } },
      { url: '/posts', payload: { tags: [] } },
    ];
    const own = app(false);
    const shared = app(true);
    for (const request of requests) {
      const [expected, got] = await Promise.all([own, shared].map((a) => a.inject({ method: 'POST', ...request })));
      expect({ status: got!.statusCode, body: got!.body }, request.url).toEqual({ status: expected!.statusCode, body: expected!.body });
    }
    await Promise.all([own.close(), shared.close()]);
  });

  it("take a JSON body as it was sent: no field dropped, no type converted, where Fastify's own would", async () => {
    const own = app(false);
    const shared = app(true);
    const send = (a: FastifyInstance, payload: object) => a.inject({ method: 'POST', url: '/posts', payload });
    // Fastify's own: the unknown field dropped, 1 made "1", "true" made true.
    expect((await send(own, { title: 'Hi', tags: ['x'], extra: 1 })).json()).toEqual({ title: 'Hi', tags: ['x'], draft: false });
    expect((await send(own, { title: 'Hi', tags: [1], draft: 'true' })).json()).toEqual({ title: 'Hi', tags: ['1'], draft: true });
    for (const [payload, says] of [
      [{ title: 'Hi', tags: ['x'], extra: 1 }, 'body must NOT have additional properties'],
      [{ title: 'Hi', tags: [1] }, 'body/tags/0 must be string'],
      [{ title: 'Hi', tags: ['x'], draft: 'true' }, 'body/draft must be boolean'],
      [{ title: 12345, tags: [] }, 'body/title must be string'],
      [{ title: 'Hi', tags: 'x' }, 'body/tags must be array'],
    ] as const) {
      const res = await send(shared, payload);
      expect({ status: res.statusCode, message: res.json().message }, JSON.stringify(payload)).toEqual({ status: 400, message: says });
    }
    // Defaults still fill what was left out.
    expect((await send(shared, { title: 'Hi', tags: [] })).json()).toEqual({ title: 'Hi', tags: [], draft: false });
    await Promise.all([own.close(), shared.close()]);
  });

  it('compile a schema once for every app and mount that uses it, and apart for another part, status or shared schemas', () => {
    const validators = compilersFactory.buildValidator({}, { customOptions: {} } as never);
    const again = compilersFactory.buildValidator({}, { customOptions: {} } as never);
    const withShared = compilersFactory.buildValidator({ tag: { $id: 'tag', type: 'string' } }, { customOptions: {} } as never);
    const body = validators({ schema: BODY, method: 'POST', url: '/a', httpPart: 'body' } as never);
    expect(again({ schema: structuredClone(BODY), method: 'POST', url: '/b', httpPart: 'body' } as never)).toBe(body);
    expect(validators({ schema: structuredClone(BODY), method: 'POST', url: '/a', httpPart: 'querystring' } as never)).not.toBe(body);
    expect(withShared({ schema: structuredClone(BODY), method: 'POST', url: '/a', httpPart: 'body' } as never)).not.toBe(body);

    const serializers = compilersFactory.buildSerializer({}, {} as never);
    const ok = serializers({ schema: REPLY[200], method: 'POST', url: '/a', httpStatus: '200' } as never);
    expect(serializers({ schema: structuredClone(REPLY[200]), method: 'GET', url: '/b', httpStatus: '200' } as never)).toBe(ok);
    expect(serializers({ schema: REPLY[200], method: 'POST', url: '/a', httpStatus: '201' } as never)).not.toBe(ok);
  });
});

describe('compiling on first use', () => {
  it("compiles a route's schemas at its first request, not when the app starts, and answers as if compiled at start", async () => {
    // A schema ajv refuses shows when it is compiled: not at ready, at the first request that needs it.
    const made = Fastify({ schemaController: { compilersFactory } });
    made.get('/broken', { schema: { querystring: { type: 'object', properties: { a: { type: 'no-such-type' } } } } }, async () => 'never');
    made.get('/fine', { schema: { querystring: QUERY } }, async (request) => request.query);
    await made.ready();
    const first = await made.inject({ url: '/broken' });
    const second = await made.inject({ url: '/broken' });
    expect(first.statusCode).toBe(500);
    // Compiled once: every request after the first fails the same, naming the route's part.
    expect(second.body).toBe(first.body);
    expect(compileEveryStandIn().map((failure) => failure.message)).toContain(
      'the querystring schema of GET /broken does not compile: schema is invalid: data/properties/a/type must be equal to one of the allowed values, data/properties/a/type must be array, data/properties/a/type must match a schema in anyOf',
    );
    // The stand-in passes ajv's errors on: the same 400 as compiled at start.
    const refused = await made.inject({ url: '/fine?page=0' });
    expect({ status: refused.statusCode, message: refused.json().message }).toEqual({ status: 400, message: 'querystring/page must be >= 1' });
    expect((await made.inject({ url: '/fine?page=3' })).json()).toEqual({ page: 3 });
    await made.close();
  });

  it("finds every schema of serve's app compiling, as Fastify's compilers would have at its start", async () => {
    const serve = await startTestServe({ store: { kind: 'memory' } });
    try {
      // Other apps of this process (the /broken route above) may hold schemas of their own: serve's routes are /api, /health, /metrics.
      const failures = compileEveryStandIn().filter((failure) => !failure.message.includes(' /broken '));
      expect(failures.map((failure) => failure.message)).toEqual([]);
    } finally {
      await serve.close();
    }
  });
});
