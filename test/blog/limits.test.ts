/**
 * Limits and links of the blog API, each found by fuzzing or abuse: a page
 * number past any list, a long post in a multi-byte script, the multipart
 * bodies in the OpenAPI documents, links that must not follow the Host
 * header.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FormData, request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { BACKENDS } from '../helpers/postgres.js';
import { png } from '../helpers/images.js';

let running: RunningServe;
let proxied: RunningServe;
let token: string;

describe.each(BACKENDS)('limits and links of the blog API on %s', (backend) => {
  beforeAll(async () => {
    running = await startTestServe({}, backend);
    proxied = await startTestServe({ publicUrl: 'https://blog.example.com/miniapp' }, backend);
    token = running.adminToken;
    for (let i = 0; i < 3; i++) await post(running, { title: `Post ${i}`, content: 'x' });
    for (let i = 0; i < 3; i++) await post(proxied, { title: `Post ${i}`, content: 'x' });
  });
  afterAll(async () => {
    await running.close();
    await proxied.close();
  });

  async function call(
    server: RunningServe,
    method: string,
    path: string,
    options: { json?: unknown; body?: string | FormData; headers?: Record<string, string> } = {},
  ) {
    const headers: Record<string, string> = { ...options.headers };
    let body = options.body;
    if (options.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.json);
    }
    const response = await request(`${server.url}${path}`, { method: method as 'GET', headers, body });
    const text = await response.body.text();
    return { status: response.statusCode, body: text ? JSON.parse(text) : undefined };
  }

  async function post(server: RunningServe, json: unknown) {
    return call(server, 'POST', '/api/v2/blog/posts', { json, headers: { authorization: `Bearer ${server.adminToken}` } });
  }

  describe('page numbers', () => {
    it('answers 400 for a page past the bound, never a 500', async () => {
      for (const page of ['461168601842738784', '1000001', '9007199254740993']) {
        const res = await call(running, 'GET', `/api/v2/blog/posts?page=${page}&page_size=100`);
        expect(res.status, page).toBe(400);
        expect(res.body).toMatchObject({ error: 'Validation Error', code: 'VALIDATION_ERROR', detail: { page: [expect.stringContaining('page')] } });
      }
      const last = await call(running, 'GET', '/api/v2/blog/posts?page=1000000&page_size=100');
      expect(last.status).toBe(200);
      expect(last.body.results).toEqual([]);
    });
  });

  describe('the body limit of posts agrees with the schema', () => {
    it('takes a valid post of 90 KB of Korean text', async () => {
      const content = '가나다라마바사아자차카타파하'.repeat(2200); // 30,800 characters, 92,400 bytes of UTF-8
      const res = await post(running, { title: '긴 글', content });
      expect(res.status).toBe(201);
      expect(res.body.content).toBe(content);
    });

    it('takes the longest valid content in the widest characters', async () => {
      const res = await post(running, { title: 'widest', content: '😀'.repeat(100_000) });
      expect(res.status).toBe(201);
    });

    it('refuses content over 100,000 characters with 400, and a body over the limit with 413, both in the error shape', async () => {
      const long = await post(running, { title: 'too long', content: 'a'.repeat(100_001) });
      expect(long.status).toBe(400);
      expect(long.body.code).toBe('VALIDATION_ERROR');
      const huge = await post(running, { title: 'huge', content: 'a'.repeat(1_100_000) });
      expect(huge.status).toBe(413);
      expect(huge.body).toMatchObject({ error: expect.any(String), detail: expect.any(String), code: 'PAYLOAD_TOO_LARGE' });
    });

    it('documents 413 on every operation that takes a body', async () => {
      for (const mount of ['/api/v1', '/api/v2', '/api']) {
        const document = (await call(running, 'GET', `${mount}/openapi.json`)).body;
        for (const [path, operations] of Object.entries<Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>>(document.paths)) {
          for (const [method, operation] of Object.entries(operations)) {
            if (operation.requestBody) expect(Object.keys(operation.responses), `${mount} ${method} ${path}`).toContain('413');
          }
        }
      }
    });
  });

  describe('uploads in the OpenAPI documents', () => {
    it('describe the multipart bodies of /upload/image and /upload/images', async () => {
      for (const mount of ['/api/v1', '/api/v2', '/api']) {
        const { paths } = (await call(running, 'GET', `${mount}/openapi.json`)).body;
        const one = paths['/upload/image'].post.requestBody;
        expect(one.content['multipart/form-data'].schema).toMatchObject({ properties: { file: { type: 'string', format: 'binary' } }, required: ['file'] });
        const many = paths['/upload/images'].post.requestBody;
        expect(many.content['multipart/form-data'].schema).toMatchObject({
          properties: { files: { type: 'array', items: { type: 'string', format: 'binary' }, maxItems: 10 } },
          required: ['files'],
        });
      }
    });

    it('are still read by the handlers, not refused by a schema', async () => {
      const form = new FormData();
      form.append('file', new Blob([png(4, 3)], { type: 'image/png' }), 'a.png');
      const res = await call(running, 'POST', '/api/v2/upload/image', { body: form, headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ width: 4, height: 3 });
    });
  });

  describe('links in answers', () => {
    it('never reflect the Host header: relative without a public URL', async () => {
      const res = await call(running, 'GET', '/api/v2/blog/posts?page_size=1', { headers: { host: 'evil.example' } });
      expect(res.status).toBe(200);
      // The page number, and the cursor of the page's last post (base64url): nothing from the request's Host.
      expect(res.body.next).toMatch(/^\/api\/v2\/blog\/posts\?page_size=1&page=2&after=[\w-]+$/);
      const second = await call(running, 'GET', '/api/v2/blog/posts?page_size=1&page=2', { headers: { host: 'evil.example' } });
      expect(second.body.previous).toBe('/api/v2/blog/posts?page_size=1&page=1');
      const form = new FormData();
      form.append('file', new Blob([png(2, 2)], { type: 'image/png' }), 'a.png');
      const upload = await call(running, 'POST', '/api/v2/upload/image', { body: form, headers: { authorization: `Bearer ${token}`, host: 'evil.example' } });
      expect(upload.body.url).toMatch(/^\/uploads\/[0-9a-f]{64}\.png$/);
      expect((await request(`${running.url}${upload.body.url}`)).statusCode).toBe(200);
    });

    it('are absolute under --public-url, whatever the Host header says', async () => {
      const res = await call(proxied, 'GET', '/api/v2/blog/posts?page_size=1', { headers: { host: 'evil.example' } });
      expect(res.body.next).toMatch(/^https:\/\/blog\.example\.com\/miniapp\/api\/v2\/blog\/posts\?page_size=1&page=2&after=[\w-]+$/);
      const form = new FormData();
      form.append('file', new Blob([png(2, 2)], { type: 'image/png' }), 'a.png');
      const upload = await call(proxied, 'POST', '/api/v2/upload/image', {
        body: form,
        headers: { authorization: `Bearer ${proxied.adminToken}`, host: 'evil.example' },
      });
      expect(upload.body.url).toMatch(/^https:\/\/blog\.example\.com\/miniapp\/uploads\/[0-9a-f]{64}\.png$/);
      const document = (await call(proxied, 'GET', '/api/v2/openapi.json')).body;
      expect(document.servers).toEqual([expect.objectContaining({ url: 'https://blog.example.com/miniapp/api/v2' })]);
    });
  });

  describe('date filters', () => {
    it('take a leap second (RFC 3339 23:59:60) as the start of the next second, never a 500', async () => {
      for (const filter of ['created_after', 'created_before']) {
        const res = await call(running, 'GET', `/api/v2/blog/posts?${filter}=1998-12-31T23%3A59%3A60Z`);
        expect(res.status, filter).toBe(200);
      }
      const after = await call(running, 'GET', '/api/v2/blog/posts?created_after=2016-12-31T23%3A59%3A60%2B00%3A00');
      expect(after.body.count).toBeGreaterThan(0);
      const before = await call(running, 'GET', '/api/v2/blog/posts?created_before=2016-12-31T23%3A59%3A60Z');
      expect(before.body.count).toBe(0);
    });
  });
});
