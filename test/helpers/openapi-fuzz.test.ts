/**
 * The fuzzing harness on documents and answers made up for the purpose:
 * that it reads a document as OpenAPI means it, that its multipart bodies
 * are what a real parser sees, that each check fires on the answer it is
 * about and stays quiet on a good one, and that a report reproduces
 * without printing a token.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import Fastify, { type FastifyInstance } from 'fastify';
import multipart from '@fastify/multipart';
import {
  checkAnswer,
  minimise,
  operationsOf,
  requestArbitrary,
  send,
  ViolationLog,
  withAuth,
  type Answer,
  type FuzzRequest,
  type Operation,
} from './openapi-fuzz.js';

const ErrorBody = { type: 'object', properties: { error: { type: 'string' }, detail: {}, code: { type: 'string' } }, required: ['error', 'detail', 'code'] };
const json = (schema: unknown) => ({ description: 'x', content: { 'application/json': { schema } } });

const DOCUMENT = {
  openapi: '3.0.3',
  security: [{ bearer: [] }],
  components: {
    schemas: { Error: ErrorBody, Item: { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' } }, required: ['id', 'name'] } },
    responses: { NotFound: json({ $ref: '#/components/schemas/Error' }) },
    parameters: { Id: { name: 'id', in: 'path', required: true, schema: { type: 'integer', minimum: 1 } } },
    requestBodies: {
      Item: {
        required: true,
        content: {
          'application/json': {
            schema: { type: 'object', properties: { name: { type: 'string', maxLength: 10 } }, required: ['name'], additionalProperties: false },
          },
        },
      },
    },
  },
  paths: {
    '/items/{id}': {
      parameters: [{ $ref: '#/components/parameters/Id' }, { name: 'verbose', in: 'query', schema: { type: 'string' } }],
      get: {
        operationId: 'getItem',
        security: [],
        parameters: [{ name: 'verbose', in: 'query', schema: { type: 'boolean' } }],
        responses: {
          200: json({ $ref: '#/components/schemas/Item' }),
          404: { $ref: '#/components/responses/NotFound' },
          '4XX': json({ $ref: '#/components/schemas/Error' }),
        },
      },
      patch: {
        operationId: 'renameItem',
        requestBody: { $ref: '#/components/requestBodies/Item' },
        responses: { 200: json({ $ref: '#/components/schemas/Item' }), 204: { description: 'nothing' }, default: json({ $ref: '#/components/schemas/Error' }) },
      },
    },
  },
};

describe('reading a document', () => {
  const [get, patch] = operationsOf(DOCUMENT, 'http://127.0.0.1:9/docs/openapi.json') as [Operation, Operation];

  it('resolves $refs and merges path-level parameters, the operation winning', () => {
    expect(get.parameters.map((p) => [p.in, p.name, p.schema.type])).toEqual([
      ['path', 'id', 'integer'],
      ['query', 'verbose', 'boolean'],
    ]);
    expect(patch.body?.required).toBe(true);
    expect(patch.body?.content['application/json']?.schema.required).toEqual(['name']);
    expect(get.responses['404']?.['application/json']).toEqual(ErrorBody);
  });

  it('takes security from the document unless the operation overrides it', () => {
    expect(get.requiresAuth).toBe(false);
    expect(patch.requiresAuth).toBe(true);
  });

  it('resolves server URLs against where the document was served', () => {
    expect(get.urlTemplate).toBe('http://127.0.0.1:9/items/{id}');
    const [withServer] = operationsOf({ ...DOCUMENT, servers: [{ url: '/api/v2' }] }, 'http://127.0.0.1:9/api/v2/openapi.json');
    expect(withServer!.urlTemplate).toBe('http://127.0.0.1:9/api/v2/items/{id}');
    expect(get.label).toBe('GET /items/{id} (getItem)');
    // Mounts that share paths and operationIds stay apart in reports.
    expect(withServer!.label).toBe('GET /api/v2/items/{id} (getItem)');
  });
});

describe('checking an answer', () => {
  const [get, patch] = operationsOf(DOCUMENT, 'http://127.0.0.1:9/openapi.json') as [Operation, Operation];
  const request = (auth: FuzzRequest['auth']): FuzzRequest => ({
    method: 'GET',
    url: 'http://127.0.0.1:9/items/1',
    headers: {},
    body: undefined,
    broken: undefined,
    auth,
  });
  const answer = (status: number, body: unknown, contentType = 'application/json; charset=utf-8'): Answer => ({
    status,
    contentType,
    text: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const error = { error: 'Not Found', detail: 'no item 1', code: 'NOT_FOUND' };

  it('passes answers that keep to the document', () => {
    expect(checkAnswer(get, request('none'), answer(200, { id: 1, name: 'a' }))).toEqual([]);
    expect(checkAnswer(get, request('none'), answer(404, error))).toEqual([]);
    expect(checkAnswer(get, request('none'), answer(422, error)), '4XX covers 422').toEqual([]);
    expect(checkAnswer(patch, request('valid'), answer(503, error)).join()).toMatch(/a server error \(code NOT_FOUND\)/);
    expect(checkAnswer(patch, request('valid'), answer(204, ''))).toEqual([]);
    expect(checkAnswer(patch, request('valid'), answer(418, error)), 'default covers the rest').toEqual([]);
  });

  it('names each way an answer breaks it', () => {
    expect(checkAnswer(get, request('none'), answer(500, error))).toEqual(['a server error (code NOT_FOUND)']);
    expect(checkAnswer(get, request('none'), answer(302, ''))).toEqual(['status 302 is not documented (documented: 200, 404, 4XX)']);
    expect(checkAnswer(get, request('none'), answer(200, { id: '1', name: 'a', extra: true }))).toEqual([
      'the body does not match the documented 200 schema: /id must be integer',
    ]);
    expect(checkAnswer(get, request('none'), answer(200, 'not json', 'application/json'))).toEqual(['the body is declared application/json but is not JSON']);
    expect(checkAnswer(get, request('none'), answer(200, '<p>hi</p>', 'text/html'))).toEqual([
      'content-type text/html is not documented for 200 (documented: application/json)',
    ]);
    expect(checkAnswer(get, request('none'), answer(404, { statusCode: 404, error: 'Not Found', message: 'x' }))).toEqual([
      'the error body is not { error, detail, code }: missing detail, code; extra message, statusCode',
    ]);
    expect(checkAnswer(get, request('none'), answer(404, { ...error, detail: 'Error: x\n    at handler (/srv/app/dist/api.js:10:5)' }))).toEqual([
      'the body shows a stack trace or a source path',
    ]);
    expect(checkAnswer(patch, request('none'), answer(200, { id: 1, name: 'a' }))).toEqual(['succeeded without a valid token (no Authorization header)']);
    expect(checkAnswer(patch, request('invalid'), answer(200, { id: 1, name: 'a' }))).toEqual(['succeeded without a valid token (a bad Authorization header)']);
    expect(checkAnswer(patch, request('valid'), answer(204, { id: 1 }))).toEqual(['a body where the documented 204 response has none']);
  });
});

describe('cutting a failing request down', () => {
  it('keeps only the inputs without which it passes', async () => {
    const original: FuzzRequest = {
      method: 'POST',
      url: 'http://127.0.0.1:9/items?page=1e%2B21&sort=title&q=x',
      headers: { 'content-type': 'application/json', authorization: 'Bearer t' },
      body: Buffer.from(JSON.stringify({ name: 'a', when: '23:59:60', tags: [] })),
      broken: undefined,
      auth: 'valid',
    };
    const fails = async (r: FuzzRequest) => r.url.includes('page=1e%2B21') && JSON.parse(r.body!.toString()).when !== undefined;
    const { request, inputs } = await minimise(original, fails);
    expect(request.url).toBe('http://127.0.0.1:9/items?page=1e%2B21');
    expect(JSON.parse(request.body!.toString())).toEqual({ when: '23:59:60' });
    expect(request.headers.authorization).toBeUndefined();
    expect(inputs).toEqual(['query page', 'body when']);
  });
});

describe('the violation log', () => {
  const [get] = operationsOf(DOCUMENT, 'http://127.0.0.1:9/openapi.json') as [Operation];
  const token = 'mat_secret-token-value';

  it('keeps one entry per operation, status and reason, with the plainest valid example', () => {
    const log = new ViolationLog({ USER_TOKEN: token });
    const broken: FuzzRequest = {
      method: 'GET',
      url: 'http://127.0.0.1:9/items/1?verbose=x',
      headers: { authorization: `Bearer ${token}` },
      body: undefined,
      broken: 'query parameter "verbose": wrong type',
      auth: 'valid',
    };
    const valid: FuzzRequest = { ...broken, url: 'http://127.0.0.1:9/items/1?verbose=true', broken: undefined };
    const bad = { status: 500, contentType: 'application/json', text: '{}' };
    log.record(get, broken, bad, checkAnswer(get, broken, bad));
    log.record(get, valid, bad, checkAnswer(get, valid, bad));
    expect(log.summary()).toEqual([
      'GET /items/{id} (getItem) | 500 | a server error',
      'GET /items/{id} (getItem) | 500 | the error body is not { error, detail, code }: missing error, detail, code',
    ]);
    expect(log.violations[0]!.count).toBe(2);
    expect(log.violations[0]!.request?.url).toContain('verbose=true');
    const report = log.report();
    expect(report).not.toContain(token);
    expect(report).toContain(`curl -sS -i -X GET 'http://127.0.0.1:9/items/1?verbose=true' -H "authorization: Bearer \${USER_TOKEN}"`);
  });

  it('quotes bodies that are not printable ASCII byte by byte', () => {
    const log = new ViolationLog({});
    const request: FuzzRequest = {
      method: 'POST',
      url: 'http://127.0.0.1:9/x',
      headers: { 'content-type': 'text/plain' },
      body: Buffer.from([0x61, 0x27, 0x0a, 0xff]),
      broken: undefined,
      auth: 'none',
    };
    expect(log.curl(request)).toBe(`curl -sS -i -X POST 'http://127.0.0.1:9/x' -H 'content-type: text/plain' --data-binary $'a\\x27\\x0a\\xff'`);
    // A body sent without a content type stays without one (curl would otherwise add a form type).
    expect(log.curl({ ...request, headers: {}, body: Buffer.from('{}') })).toBe(
      `curl -sS -i -X POST 'http://127.0.0.1:9/x' -H 'content-type:' --data-binary '{}'`,
    );
  });
});

describe('multipart bodies from a document', () => {
  const UPLOADS = {
    openapi: '3.0.3',
    servers: [{ url: '/base' }],
    paths: {
      '/upload': {
        post: {
          requestBody: {
            required: true,
            content: {
              'multipart/form-data': {
                schema: {
                  type: 'object',
                  properties: { file: { type: 'string', format: 'binary' }, caption: { type: 'string', maxLength: 20 } },
                  required: ['file'],
                },
                encoding: { file: { contentType: 'image/png, image/jpeg' } },
              },
            },
          },
          responses: { 200: json({}) },
        },
      },
      '/gallery': {
        post: {
          requestBody: {
            required: true,
            content: {
              'multipart/form-data': {
                schema: {
                  type: 'object',
                  properties: { files: { type: 'array', items: { type: 'string', format: 'binary' }, maxItems: 3 } },
                  required: ['files'],
                },
              },
            },
          },
          responses: { 200: json({}) },
        },
      },
    },
  };
  interface SeenPart {
    name: string;
    file: boolean;
    kind?: string;
  }
  let app: FastifyInstance;
  let base: string;

  beforeAll(async () => {
    // A real multipart parser, so the encoder is judged by what a server reads.
    app = Fastify();
    await app.register(multipart);
    app.post('/base/*', async (request, reply) => {
      if (!request.isMultipart()) return reply.status(415).send({ parts: [] });
      const parts: SeenPart[] = [];
      try {
        for await (const part of request.parts()) {
          if (part.type === 'file') {
            const bytes = await part.toBuffer();
            const kind = bytes.subarray(0, 4).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47]))
              ? 'png'
              : bytes[0] === 0xff && bytes[1] === 0xd8
                ? 'jpeg'
                : bytes.subarray(8, 12).toString() === 'WEBP'
                  ? 'webp'
                  : 'other';
            parts.push({ name: part.fieldname, file: true, kind });
          } else parts.push({ name: part.fieldname, file: false });
        }
      } catch {
        return reply.status(400).send({ parts });
      }
      return { parts };
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address();
    base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });
  afterAll(async () => app?.close());

  async function exchanges(path: string) {
    const operation = operationsOf(UPLOADS, `${base}/base/openapi.json`).find((op) => op.path === path)!;
    const shapes = fc.sample(requestArbitrary(operation, { tokens: { T: 'token' } }), { seed: 5, numRuns: 80 });
    const results: { broken: string | undefined; status: number; parts: SeenPart[] }[] = [];
    for (const shape of shapes) {
      const answer = await send(withAuth(shape, 'none'));
      results.push({ broken: shape.broken, status: answer.status, parts: (JSON.parse(answer.text) as { parts: SeenPart[] }).parts });
    }
    return results;
  }

  it('sends real images of the documented types under the documented part names, and says when it does not', async () => {
    const results = await exchanges('/upload');
    const valid = results.filter((r) => r.broken === undefined);
    expect(valid.length).toBeGreaterThan(10);
    for (const r of valid) {
      expect(r.status).toBe(200);
      expect(r.parts.filter((p) => p.file)).toEqual([{ name: 'file', file: true, kind: expect.stringMatching(/^(png|jpeg)$/) }]);
      expect(r.parts.filter((p) => !p.file).every((p) => p.name === 'caption')).toBe(true);
    }
    const byReason = (reason: string) => results.filter((r) => r.broken === reason);
    expect(byReason('a file under a part name the document does not give').every((r) => r.parts.some((p) => p.file && p.name !== 'file'))).toBe(true);
    expect(byReason('file parts hold bytes that are no image').every((r) => r.parts.every((p) => !p.file || p.kind === 'other'))).toBe(true);
    const reasons = new Set(results.map((r) => r.broken));
    for (const expected of [
      'a file under a part name the document does not give',
      'file parts hold bytes that are no image',
      'a text field where a file is documented',
    ])
      expect(reasons).toContain(expected);
  });

  it('sends up to maxItems files in an array part, and one more when that is the point', async () => {
    const results = await exchanges('/gallery');
    for (const r of results.filter((x) => x.broken === undefined)) {
      const files = r.parts.filter((p) => p.file);
      expect(files.length).toBeGreaterThanOrEqual(1);
      expect(files.length).toBeLessThanOrEqual(3);
      expect(files.every((p) => p.name === 'files' && p.kind !== 'other')).toBe(true);
    }
    const tooMany = results.filter((r) => r.broken === 'more files than maxItems');
    expect(tooMany.length).toBeGreaterThan(0);
    for (const r of tooMany) expect(r.parts.filter((p) => p.file && p.name === 'files')).toHaveLength(4);
  });
});
