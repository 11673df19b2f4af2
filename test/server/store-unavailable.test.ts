/**
 * A database that cannot be reached is a 503 with the standard error body
 * and Retry-After, never a 500: on every blog mount (the blog's own error
 * handler), on /uploads and the relay's routes (serve's error handler).
 * The database is a real PostgreSQL behind a TCP proxy that the test cuts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FormData, request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { png } from '../helpers/images.js';
import { RETRY_AFTER_SECONDS, toHttpError } from '../../src/http/errors.js';
import { StoreUnavailableError } from '../../src/store/sql.js';

let database: TestDatabase;
let proxy: TcpProxy;
let running: RunningServe;
let imageUrl: string;

beforeAll(async () => {
  database = await createTestDatabase();
  const url = new URL(database.url);
  proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
  url.port = String(proxy.port);
  running = await startTestServe({ store: { kind: 'postgres', url: url.href, poolSize: 2, timeoutMs: 1000 } }, 'postgres');
  const form = new FormData();
  form.append('file', new Blob([png(2, 2)], { type: 'image/png' }), 'a.png');
  const uploaded = await request(`${running.url}/api/v2/upload/image`, {
    method: 'POST',
    headers: { authorization: `Bearer ${running.adminToken}` },
    body: form,
  });
  imageUrl = ((await uploaded.body.json()) as { url: string }).url;
  // Cached before the cut: a cached page is not served once the database cannot say whether it is current.
  await (await request(`${running.url}/api/v2/blog/posts`)).body.dump();
  await proxy.stop();
});
afterAll(async () => {
  await running?.close();
  await proxy?.stop();
  await database?.drop();
});

describe('a database that cannot be reached', () => {
  it('is a 503 with the error body and Retry-After, on every mount, /uploads and the relay', async () => {
    const json = { 'content-type': 'application/json', authorization: `Bearer ${running.adminToken}` };
    const calls: [string, string, Record<string, string>?, string?][] = [
      ['GET', '/api/v2/blog/posts'],
      ['GET', '/api/v1/blog/posts'],
      ['GET', '/api/blog/posts/1'],
      ['POST', '/api/v2/blog/posts', json, JSON.stringify({ title: 't', content: 'c' })],
      ['PATCH', '/api/v1/blog/posts/1', json, JSON.stringify({ title: 't' })],
      ['GET', imageUrl],
      ['HEAD', imageUrl],
      ['GET', '/api/auth/unlink-callback?userKey=7&referrer=UNLINK'],
    ];
    for (const [method, path, headers, body] of calls) {
      const res = await request(`${running.url}${path}`, { method: method as 'GET', headers, body });
      const text = await res.body.text();
      expect(res.statusCode, `${method} ${path}: ${text}`).toBe(503);
      expect(res.headers['retry-after'], `${method} ${path}`).toBe(String(RETRY_AFTER_SECONDS));
      if (method !== 'HEAD')
        expect(JSON.parse(text), `${method} ${path}`).toEqual({ error: expect.any(String), detail: expect.any(String), code: 'SERVICE_UNAVAILABLE' });
    }
  });

  it("maps to 503 in serve's error handler, whatever the cause says", () => {
    const mapped = toHttpError(new StoreUnavailableError('the database cannot be reached (ECONNREFUSED)'));
    expect(mapped).toMatchObject({ status: 503, headers: { 'retry-after': String(RETRY_AFTER_SECONDS) }, body: { code: 'SERVICE_UNAVAILABLE' } });
    expect(mapped.body.detail).not.toContain('ECONNREFUSED');
  });
});
