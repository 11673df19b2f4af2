/**
 * A wrong method on a path that has routes is 405 with `Allow` (RFC 9110
 * section 15.5.6), on the relay, the blog and serve's own routes; a path
 * with no route stays 404. Through a real listening serve, with and
 * without CORS (whose preflight answers OPTIONS on any path).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { SECURITY_HEADERS } from '../../src/http/security-headers.js';
import { startTestServe } from '../helpers/serve.js';

let plain: RunningServe;
let withCors: RunningServe;

beforeAll(async () => {
  plain = await startTestServe();
  withCors = await startTestServe({ corsOrigin: 'https://app.example.com' });
});
afterAll(async () => {
  await plain.close();
  await withCors.close();
});

async function call(running: RunningServe, method: string, path: string) {
  const response = await request(`${running.url}${path}`, { method: method as 'GET' });
  const text = await response.body.text();
  return { status: response.statusCode, headers: response.headers, body: text ? JSON.parse(text) : undefined };
}

describe('a wrong method on a path that has routes', () => {
  it('is 405 with Allow naming the methods the path takes, on the blog at every mount', async () => {
    const cases: [string, string, string][] = [
      ['DELETE', '/api/v2/blog/posts', 'GET, HEAD, POST'],
      ['PUT', '/api/v1/blog/posts/1', 'GET, HEAD, PATCH'],
      ['DELETE', '/api/blog/posts/%31', 'GET, HEAD, PATCH'],
      ['GET', '/api/v2/users', 'POST'],
      ['GET', '/api/auth/login', 'POST'],
      ['PATCH', '/api/v2/upload/image', 'POST'],
    ];
    for (const running of [plain, withCors]) {
      for (const [method, path, allow] of cases) {
        const res = await call(running, method, path);
        expect({ status: res.status, allow: res.headers.allow }, `${method} ${path}`).toEqual({ status: 405, allow });
        expect(res.body).toEqual({ error: 'Method Not Allowed', detail: `${method} is not allowed on ${path}: it takes ${allow}`, code: 'METHOD_NOT_ALLOWED' });
        expect(res.headers).toMatchObject(SECURITY_HEADERS);
      }
    }
  });

  it("is 405 with Allow on the relay and serve's own routes, in the error body of the path's mount", async () => {
    const cases: [string, string, string][] = [
      ['GET', '/api/auth/token', 'POST'],
      ['PUT', '/api/auth/refresh', 'POST'],
      ['POST', '/api/auth/me', 'GET, HEAD'],
      ['DELETE', '/api/auth/unlink-callback', 'GET, HEAD, POST'],
      ['DELETE', '/health', 'GET, HEAD'],
      ['POST', '/metrics', 'GET, HEAD'],
    ];
    for (const running of [plain, withCors]) {
      for (const [method, path, allow] of cases) {
        const res = await call(running, method, path);
        expect({ status: res.status, allow: res.headers.allow }, `${method} ${path}`).toEqual({ status: 405, allow });
        const message = `${method} is not allowed on ${path}: it takes ${allow}`;
        // Under /api the relay's paths share the blog mount's error body, as their 404s always have.
        const error = path.startsWith('/api/') ? 'Method Not Allowed' : message;
        expect(res.body).toEqual({ error, detail: message, code: 'METHOD_NOT_ALLOWED' });
        expect(res.headers).toMatchObject(SECURITY_HEADERS);
      }
    }
    const head = await call(plain, 'HEAD', '/api/auth/token');
    expect({ status: head.status, allow: head.headers.allow, body: head.body }).toEqual({ status: 405, allow: 'POST', body: undefined });
  });

  it("leaves a path its own method's route found nothing at 404 (an image never stored), and 405 to other methods", async () => {
    const image = `/uploads/${'0'.repeat(64)}.png`;
    for (const method of ['GET', 'HEAD']) {
      const res = await call(plain, method, image);
      expect({ status: res.status, allow: res.headers.allow }, method).toEqual({ status: 404, allow: undefined });
    }
    const deleted = await call(plain, 'DELETE', image);
    expect({ status: deleted.status, allow: deleted.headers.allow }).toEqual({ status: 405, allow: 'GET, HEAD' });
  });

  it('leaves a path without routes 404 NOT_FOUND, whatever the method', async () => {
    for (const running of [plain, withCors]) {
      for (const [method, path] of [
        ['GET', '/api/v2/nothing'],
        ['DELETE', '/api/auth/nothing'],
        ['POST', '/nope'],
      ]) {
        const res = await call(running, method!, path!);
        expect({ status: res.status, allow: res.headers.allow, code: res.body.code }, `${method} ${path}`).toEqual({
          status: 404,
          allow: undefined,
          code: 'NOT_FOUND',
        });
      }
    }
  });

  it('changes nothing in the OpenAPI descriptions', async () => {
    for (const mount of ['/api/v1', '/api/v2', '/api']) {
      const document = (await call(plain, 'GET', `${mount}/openapi.json`)).body;
      const statuses = Object.values(document.paths as Record<string, Record<string, { responses: object }>>).flatMap((item) =>
        Object.values(item).flatMap((operation) => Object.keys(operation.responses)),
      );
      expect(statuses, mount).not.toContain('405');
    }
  });
});
