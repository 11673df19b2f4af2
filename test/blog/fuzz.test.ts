/**
 * Property-based: random query strings and bodies at every blog route and
 * every mount. Whatever comes in, the answer is never a 500, the server
 * never crashes, and every error carries the standardized body.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { BACKENDS } from '../helpers/postgres.js';

const ROUTES: [string, string][] = [];
for (const mount of ['/api/v1', '/api/v2', '/api']) {
  ROUTES.push(
    ['GET', `${mount}/blog/posts`],
    ['GET', `${mount}/blog/posts/1`],
    ['POST', `${mount}/blog/posts`],
    ['PATCH', `${mount}/blog/posts/1`],
    ['POST', `${mount}/users`],
    ['POST', `${mount}/auth/login`],
    ['POST', `${mount}/upload/image`],
    ['POST', `${mount}/upload/images`],
  );
}

const queryKey = fc.constantFrom('page', 'page_size', 'sort', 'search', 'author', 'tags', 'is_published', 'created_after', 'created_before', 'x', '__proto__');
const queryValue = fc.oneof(
  fc.string(),
  fc.integer().map(String),
  fc.constantFrom('true', 'false', '2026-11-01', '-1', '0', '101', '1e9', '%', '%00', '\u0000'),
);
const query = fc.array(fc.tuple(queryKey, queryValue), { maxLength: 6 }).map((pairs) => new URLSearchParams(pairs).toString());
const body = fc
  .oneof(
    fc.json(),
    fc.string(),
    fc.record({ title: fc.anything(), content: fc.anything(), tags: fc.anything(), is_published: fc.anything() }, { requiredKeys: [] }),
    fc.record({ username: fc.anything(), email: fc.anything(), password: fc.anything(), bio: fc.anything(), avatar_url: fc.anything() }, { requiredKeys: [] }),
  )
  .map((value) => (typeof value === 'string' ? value : (JSON.stringify(value) ?? 'null')));

describe.each(BACKENDS)('every blog route under random input, on %s', (backend) => {
  let running: RunningServe;
  let token: string;

  beforeAll(async () => {
    running = await startTestServe({}, backend);
    token = running.adminToken;
    await request(`${running.url}/api/v2/blog/posts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ title: 'Seed', content: 'Seed post', tags: ['seed'] }),
    }).then((r) => r.body.dump());
  });
  afterAll(async () => running.close());

  it('never answers 500 and always answers the standardized error body', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ROUTES),
        query,
        body,
        fc.boolean(),
        fc.constantFrom('application/json', 'text/plain', 'multipart/form-data; boundary=x'),
        async ([method, path], q, payload, authed, type) => {
          const res = await request(`${running.url}${path}${q ? `?${q}` : ''}`, {
            method: method as 'GET',
            headers: { ...(authed ? { authorization: `Bearer ${token}` } : {}), ...(method === 'GET' ? {} : { 'content-type': type }) },
            body: method === 'GET' ? undefined : payload,
          });
          const text = await res.body.text();
          expect(res.statusCode, `${method} ${path}?${q} ${payload}`).toBeLessThan(500);
          if (res.statusCode >= 400) {
            const error = JSON.parse(text);
            expect(error).toMatchObject({ error: expect.any(String), code: expect.any(String) });
            expect('detail' in error).toBe(true);
            expect(text).not.toMatch(/\bat .*\.(js|ts):\d+/);
          }
        },
      ),
      { numRuns: 300 },
    );
    const health = await request(`${running.url}/health`);
    expect(health.statusCode).toBe(200);
    await health.body.dump();
  });
});
