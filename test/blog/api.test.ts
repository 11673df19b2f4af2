/**
 * The blog API through a real listening `serve` (port 0), with undici and
 * multipart bodies as clients send them; one suite on both backends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FormData, request } from 'undici';
import * as grpc from '@grpc/grpc-js';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { BACKENDS } from '../helpers/postgres.js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { jpeg, png, webp } from '../helpers/images.js';

let running: RunningServe;
let alice: string;
let bob: string;

async function call(
  method: string,
  path: string,
  options: { json?: unknown; token?: string; body?: FormData | string; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | FormData | undefined = options.body;
  if (options.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.json);
  }
  const response = await request(`${running.url}${path}`, { method: method as 'GET', headers, body });
  const text = await response.body.text();
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: response.statusCode, body: parsed, headers: response.headers };
}

async function signup(username: string) {
  const res = await call('POST', '/api/users', { json: { username, email: `${username}@example.com`, password: 'password123' } });
  expect(res.status).toBe(201);
  const login = await call('POST', '/api/v2/auth/login', { json: { email: `${username}@example.com`, password: 'password123' } });
  expect(login.status).toBe(200);
  return login.body.access_token as string;
}

async function post(token: string, title: string, content: string, tags: string[] = []) {
  const res = await call('POST', '/api/v2/blog/posts', { token, json: { title, content, tags } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

describe('users of the blog API and of the gRPC service', () => {
  let served: RunningServe;
  beforeAll(async () => {
    served = await startTestServe({ grpc: { host: '127.0.0.1', port: 0 } });
    running = served;
  });
  afterAll(async () => served.close());

  // serve's wiring of the users family; on PostgreSQL once serve takes it (test/helpers/blog-serve.ts).
  it('are the same users', async () => {
    const res = await call('POST', '/api/v1/users', { json: { username: 'carol', email: 'carol@example.com', password: 'password123' } });
    expect(res.status).toBe(201);
    const { Client } = userServiceDefinition();
    const client = new Client(served.grpc!.address, grpc.credentials.createInsecure()) as grpc.Client & Record<string, any>;
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${served.adminToken}`);
    const user = await new Promise<any>((resolve, reject) =>
      client.GetUser({ user_id: String(res.body.id) }, metadata, (e: unknown, r: unknown) => (e ? reject(e) : resolve(r))),
    );
    client.close();
    expect(user).toMatchObject({ username: 'carol', email: 'carol@example.com' });
  });
});

describe.each(BACKENDS)('the blog API on %s', (backend) => {
  beforeAll(async () => {
    running = await startTestServe({}, backend);
    alice = await signup('alice');
    bob = await signup('bob');
    await post(alice, 'Getting started with mini-apps', 'A first post about the SDK and appLogin.', ['sdk', 'intro']);
    await post(alice, 'Decrypting personal fields', 'AES-256-GCM with the key and AAD from the console.', ['security']);
    await post(bob, 'Insights on a budget', 'Field expansion keeps you within 200 calls an hour.', ['Insights', 'Graph']);
    await post(bob, 'gRPC streams', 'Watch, chat and sync with grpc-js; also mentions the SDK.', ['grpc']);
    await post(alice, 'Zero-downtime certificate rotation', 'Rotate mTLS client certificates without an outage.', ['security', 'ops']);
  });
  afterAll(async () => running.close());

  describe('users and login', () => {
    it('creates a user with the profile schema', async () => {
      const res = await call('POST', '/api/v1/users', {
        json: { username: 'carol', email: 'carol@example.com', password: 'password123', bio: 'Writes.', avatar_url: 'https://cdn.example.com/c.png' },
      });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.any(Number),
        username: 'carol',
        email: 'carol@example.com',
        avatar_url: 'https://cdn.example.com/c.png',
        bio: 'Writes.',
        created_at: expect.any(String),
      });
    });

    it('answers 400 with every bad field named', async () => {
      const res = await call('POST', '/api/users', {
        json: { username: 'x', email: 'not-mail', password: 'short', bio: 'b'.repeat(501), avatar_url: 'ftp://x' },
      });
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('Validation Error');
      expect(res.body.code).toBe('VALIDATION_ERROR');
      expect(Object.keys(res.body.detail).sort()).toEqual(['avatar_url', 'bio', 'email', 'password', 'username']);
      expect(res.body.detail.username[0]).toContain('3 to 20');
      const missing = await call('POST', '/api/users', { json: {} });
      expect(Object.keys(missing.body.detail).sort()).toEqual(['email', 'password', 'username']);
      const duplicate = await call('POST', '/api/users', { json: { username: 'ALICE', email: 'new@example.com', password: 'password123' } });
      expect(duplicate).toMatchObject({ status: 400, body: { detail: { username: [expect.stringContaining('already exists')] } } });
    });

    it('logs in by username on v1 and by e-mail on v2 and /api', async () => {
      expect((await call('POST', '/api/v1/auth/login', { json: { username: 'alice', password: 'password123' } })).body).toMatchObject({
        token_type: 'bearer',
        expires_in: 3600,
      });
      expect((await call('POST', '/api/v1/auth/login', { json: { email: 'alice@example.com', password: 'password123' } })).status).toBe(400);
      expect((await call('POST', '/api/v2/auth/login', { json: { username: 'alice', password: 'password123' } })).status).toBe(400);
      expect((await call('POST', '/api/auth/login', { json: { email: 'alice@example.com', password: 'password123' } })).status).toBe(200);
      const wrong = await call('POST', '/api/v2/auth/login', { json: { email: 'alice@example.com', password: 'wrong-password' } });
      expect(wrong).toMatchObject({ status: 401, body: { code: 'INVALID_CREDENTIALS', error: 'Unauthorized' } });
      expect((await call('POST', '/api/v2/auth/login', { json: { email: 'nobody@example.com', password: 'password123' } })).status).toBe(401);
    });

    it('answers a login, given or refused, with Cache-Control: no-store (RFC 6749 section 5.1)', async () => {
      const given = await call('POST', '/api/v2/auth/login', { json: { email: 'alice@example.com', password: 'password123' } });
      const refused = await call('POST', '/api/v1/auth/login', { json: { username: 'alice', password: 'wrong-password' } });
      expect([given.status, refused.status]).toEqual([200, 401]);
      for (const answer of [given, refused]) expect(answer.headers['cache-control']).toBe('no-store');
    });
  });

  describe('posts', () => {
    it('v1 lists published posts newest first, at most 20, as a plain list', async () => {
      const res = await call('GET', '/api/v1/blog/posts');
      expect(Array.isArray(res.body)).toBe(true);
      expect(res.body.length).toBeLessThanOrEqual(20);
      expect(res.body[0].title).toBe('Zero-downtime certificate rotation');
      expect(res.body.every((p: { is_published: boolean }) => p.is_published)).toBe(true);
    });

    it('v2 paginates with count and next/previous links (relative without --public-url)', async () => {
      const first = await call('GET', '/api/v2/blog/posts?page_size=2&sort=title');
      expect(first.body.count).toBeGreaterThanOrEqual(5);
      expect(first.body.results.map((p: { title: string }) => p.title)).toEqual(['Decrypting personal fields', 'Getting started with mini-apps']);
      expect(first.body.previous).toBeNull();
      // The next page by number, and the cursor of this page's last post.
      expect(first.body.next).toMatch(/^\/api\/v2\/blog\/posts\?page_size=2&sort=title&page=2&after=[\w-]+$/);
      const second = await call('GET', first.body.next);
      expect(second.body.previous).toMatch(/page=1$/);
      const byNumber = await call('GET', '/api/v2/blog/posts?page_size=2&sort=title&page=2');
      expect(second.body.results).toEqual(byNumber.body.results);
      const pages = Math.ceil(first.body.count / 2);
      const last = await call('GET', `/api/v2/blog/posts?page_size=2&page=${pages}`);
      expect(last.body.next).toBeNull();
      expect(last.body.results.length).toBeGreaterThan(0);
      const past = await call('GET', `/api/v2/blog/posts?page_size=2&page=${pages + 5}`);
      expect(past.body).toMatchObject({ results: [], next: null });
      expect(past.body.previous).toMatch(new RegExp(`page=${pages}$`));
    });

    it.each([
      ['page_size=0', 'page_size'],
      ['page_size=101', 'page_size'],
      ['page_size=-5', 'page_size'],
      ['page=0', 'page'],
      ['page=-1', 'page'],
      ['page=abc', 'page'],
      ['sort=author', 'sort'],
      ['created_after=yesterday', 'created_after'],
      // PostgreSQL's text cannot hold NUL: refused alike on both backends.
      ['search=a%00b', 'search'],
      ['author=a%00', 'author'],
      ['tags=a%00', 'tags'],
    ])("answers 400 VALIDATION_ERROR for %s, naming the parameter as a body's field is named", async (query, field) => {
      const res = await call('GET', `/api/v2/blog/posts?${query}`);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        error: 'Validation Error',
        code: 'VALIDATION_ERROR',
        detail: { [field]: [expect.stringMatching(new RegExp(`^${field}\\b`))] },
      });
    });

    it('filters: search, author, tags (OR), is_published, dates, and their AND', async () => {
      const titles = async (query: string) =>
        (await call('GET', `/api/v2/blog/posts?page_size=100&sort=title&${query}`)).body.results.map((p: { title: string }) => p.title);
      expect(await titles('search=sdk')).toEqual(['Getting started with mini-apps', 'gRPC streams']);
      expect(await titles('search=AES-256')).toEqual(['Decrypting personal fields']);
      expect(await titles('author=BOB')).toEqual(['gRPC streams', 'Insights on a budget']);
      expect(await titles('tags=security')).toEqual(['Decrypting personal fields', 'Zero-downtime certificate rotation']);
      expect(await titles('tags=grpc&tags=graph')).toEqual(['gRPC streams', 'Insights on a budget']);
      expect(await titles('tags=grpc,intro')).toEqual(['Getting started with mini-apps', 'gRPC streams']);
      expect(await titles('tags=Security&tags=OPS')).toEqual(['Decrypting personal fields', 'Zero-downtime certificate rotation']);
      // Matched whatever the case, kept as the author spelled them.
      expect((await call('GET', '/api/v2/blog/posts?tags=graph')).body.results.map((p: { tags: string[] }) => p.tags)).toEqual([['Insights', 'Graph']]);
      expect(await titles('search=GETTING%20STARTED')).toEqual(['Getting started with mini-apps']);
      expect(await titles('tags=security&author=alice&search=rotate')).toEqual(['Zero-downtime certificate rotation']);
      expect(await titles('tags=grpc&author=alice')).toEqual([]);
      expect(await titles('search=%25')).toEqual([]);
      const today = new Date().toISOString().slice(0, 10);
      const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
      expect((await titles(`created_after=${today}`)).length).toBeGreaterThanOrEqual(5);
      expect(await titles(`created_after=${tomorrow}`)).toEqual([]);
      expect(await titles(`created_before=${today}`)).toEqual([]);
      expect((await titles(`created_before=${tomorrow}&author=bob`)).length).toBe(2);
    });

    it('keeps drafts out of the default lists and shows them to their author with is_published=false', async () => {
      const draft = await post(bob, 'Draft to hide', 'Not yet.');
      await call('PATCH', `/api/v2/blog/posts/${draft.id}`, { token: bob, json: { is_published: false } });
      expect((await call('GET', '/api/v2/blog/posts?search=hide')).body.results).toEqual([]);
      // Drafts are their author's (and the admin's) to see: test/blog/drafts.test.ts.
      expect((await call('GET', '/api/v2/blog/posts?search=hide&is_published=false', { token: bob })).body.count).toBe(1);
      expect((await call('GET', '/api/v1/blog/posts?is_published=false', { token: bob })).body.map((p: { title: string }) => p.title)).toContain(
        'Draft to hide',
      );
    });

    it('reads one post, 404 with the error body for an unknown one, 400 for a bad id', async () => {
      const list = await call('GET', '/api/v2/blog/posts?page_size=1');
      const id = list.body.results[0].id;
      expect((await call('GET', `/api/v1/blog/posts/${id}`)).body).toEqual(list.body.results[0]);
      expect(await call('GET', '/api/v2/blog/posts/999999')).toMatchObject({ status: 404, body: { error: 'Not Found', code: 'NOT_FOUND' } });
      expect((await call('GET', '/api/v2/blog/posts/abc')).status).toBe(400);
      // Past what an id column holds (and a JavaScript number holds exactly).
      expect((await call('GET', '/api/v2/blog/posts/1e%2B21')).status).toBe(400);
      expect((await call('GET', '/api/v2/blog/posts/9007199254740992')).status).toBe(400);
      expect((await call('GET', '/api/v2/blog/posts/9007199254740991')).status).toBe(404);
    });

    it("creates posts published, authored by the token's user, tags on v2 only (v1 refuses them, naming the field)", async () => {
      const v2 = await post(alice, 'Tagged', 'Body', ['a', 'b', 'A']);
      expect(v2).toMatchObject({ author: 'alice', is_published: true, tags: ['a', 'b'] });
      const v1 = await call('POST', '/api/v1/blog/posts', { token: alice, json: { title: 'v1 post', content: 'Body', tags: ['refused'] } });
      expect(v1).toMatchObject({
        status: 400,
        body: { code: 'VALIDATION_ERROR', detail: { tags: ['tags is not a field of this body (it takes title, content)'] } },
      });
      expect((await call('GET', '/api/v1/blog/posts')).body.map((p: { title: string }) => p.title)).not.toContain('v1 post');
      for (const json of [
        { title: 'a\u0000b', content: 'Body' },
        { title: 'T', content: 'Body\u0000' },
        { title: 'T', content: 'Body', tags: ['\u0000'] },
      ]) {
        expect(await call('POST', '/api/v2/blog/posts', { token: alice, json }), JSON.stringify(json)).toMatchObject({
          status: 400,
          body: { code: 'VALIDATION_ERROR' },
        });
      }
      const missing = await call('POST', '/api/v2/blog/posts', { token: alice, json: { title: 'No content' } });
      expect(missing).toMatchObject({ status: 400, body: { code: 'VALIDATION_ERROR', detail: { content: ['content is required'] } } });
      const admin = await call('POST', '/api/blog/posts', { token: running.adminToken, json: { title: 'From admin', content: 'Body' } });
      expect(admin.body.author).toBe('admin');
    });

    it('lets only the author or an admin change a post', async () => {
      const mine = await post(alice, 'Mine', 'Body');
      expect(await call('PATCH', `/api/v2/blog/posts/${mine.id}`, { token: bob, json: { title: 'Stolen' } })).toMatchObject({
        status: 403,
        body: { code: 'FORBIDDEN' },
      });
      const edited = await call('PATCH', `/api/v2/blog/posts/${mine.id}`, { token: alice, json: { title: 'Mine, edited', content: null, tags: ['x'] } });
      expect(edited.body).toMatchObject({ title: 'Mine, edited', content: 'Body', tags: ['x'] });
      expect((await call('PATCH', `/api/v1/blog/posts/${mine.id}`, { token: running.adminToken, json: { is_published: false } })).body.is_published).toBe(
        false,
      );
      expect((await call('PATCH', '/api/v2/blog/posts/999999', { token: alice, json: {} })).status).toBe(404);
      expect((await call('PATCH', `/api/v2/blog/posts/${mine.id}`, { token: alice, json: { title: '' } })).status).toBe(400);
    });

    it('requires a valid token on every protected route', async () => {
      const form = new FormData();
      form.append('file', new Blob([png(1, 1)], { type: 'image/png' }), 'a.png');
      for (const [method, path, json] of [
        ['POST', '/api/v2/blog/posts', { title: 't', content: 'c' }],
        ['POST', '/api/v1/blog/posts', { title: 't', content: 'c' }],
        ['PATCH', '/api/v2/blog/posts/1', { title: 't' }],
        ['POST', '/api/v2/upload/image', undefined],
        ['POST', '/api/v2/upload/images', undefined],
      ] as const) {
        for (const token of [undefined, 'mat_not-a-token']) {
          const res = await call(method, path, json ? { json, token } : { body: form, token });
          expect(res.status, `${method} ${path} ${token}`).toBe(401);
          expect(res.body.code).toBe('UNAUTHORIZED');
          expect(res.headers['www-authenticate']).toBe('Bearer');
        }
      }
    });
  });

  describe('uploads', () => {
    const upload = (path: string, files: { field: string; bytes: Buffer; type: string; name: string }[], token = alice) => {
      const form = new FormData();
      for (const file of files) form.append(file.field, new Blob([file.bytes], { type: file.type }), file.name);
      return call('POST', path, { token, body: form });
    };

    it.each([
      ['PNG', png(64, 48), 'image/png', 'png'],
      ['JPEG', jpeg(640, 480), 'image/jpeg', 'jpg'],
      ['WebP', webp(1920, 1080), 'image/webp', 'webp'],
    ])('stores a %s by its content and serves it back at its url', async (_name, bytes, type, ext) => {
      const res = await upload('/api/v2/upload/image', [{ field: 'file', bytes, type, name: `image.${ext}` }]);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({ size: bytes.length, url: expect.stringMatching(new RegExp(`/uploads/[0-9a-f]{64}\\.${ext}$`)) });
      const back = await request(`${running.url}${res.body.url}`);
      expect(back.statusCode).toBe(200);
      expect(Buffer.from(await back.body.arrayBuffer())).toEqual(bytes);
    });

    it('serves an image with its type, immutable caching, validators, HEAD and byte ranges; 404 in the error body', async () => {
      const bytes = png(5, 4);
      const { body } = await upload('/api/v2/upload/image', [{ field: 'file', bytes, type: 'image/png', name: 'five.png' }]);
      const url = `${running.url}${body.url}`;
      const got = await request(url);
      expect(Buffer.from(await got.body.arrayBuffer())).toEqual(bytes);
      expect(got.headers).toMatchObject({
        'content-type': 'image/png',
        'content-length': String(bytes.length),
        'cache-control': 'public, max-age=31536000, immutable',
        'accept-ranges': 'bytes',
      });
      const etag = got.headers.etag as string;
      expect(etag).toBe(`"${body.url.slice('/uploads/'.length, -'.png'.length)}"`);
      const again = await request(url, { headers: { 'if-none-match': etag } });
      expect(again.statusCode).toBe(304);
      expect(await again.body.text()).toBe('');
      const head = await request(url, { method: 'HEAD' });
      expect(head.statusCode).toBe(200);
      expect(head.headers).toMatchObject({ 'content-type': 'image/png', 'content-length': String(bytes.length), etag });
      expect(await head.body.text()).toBe('');
      const part = await request(url, { headers: { range: 'bytes=1-3' } });
      expect(part.statusCode).toBe(206);
      expect(part.headers['content-range']).toBe(`bytes 1-3/${bytes.length}`);
      expect(Buffer.from(await part.body.arrayBuffer())).toEqual(bytes.subarray(1, 4));
      const outside = await request(url, { headers: { range: `bytes=${bytes.length}-` } });
      expect(outside.statusCode).toBe(416);
      expect(await outside.body.json()).toMatchObject({ code: 'RANGE_NOT_SATISFIABLE' });
      const missing = await request(`${running.url}/uploads/${'0'.repeat(64)}.png`);
      expect(missing.statusCode).toBe(404);
      expect(await missing.body.json()).toMatchObject({ error: expect.any(String), detail: expect.any(String), code: 'NOT_FOUND' });
      const headMissing = await request(`${running.url}/uploads/not-an-image.txt`, { method: 'HEAD' });
      expect(headMissing.statusCode).toBe(404);
      await headMissing.body.dump();
    });

    it('reports the dimensions', async () => {
      const res = await upload('/api/upload/image', [{ field: 'file', bytes: webp(1920, 1080), type: 'image/webp', name: 'w.webp' }]);
      expect(res.body).toMatchObject({ width: 1920, height: 1080 });
    });

    it('believes the bytes, not the declared type', async () => {
      const lying = await upload('/api/v2/upload/image', [{ field: 'file', bytes: png(2, 2), type: 'image/jpeg', name: 'photo.jpg' }]);
      expect(lying.status).toBe(200);
      expect(lying.body.url).toMatch(/\.png$/);
      const text = await upload('/api/v2/upload/image', [{ field: 'file', bytes: Buffer.from('not an image at all'), type: 'image/png', name: 'fake.png' }]);
      expect(text).toMatchObject({ status: 415, body: { code: 'UNSUPPORTED_MEDIA_TYPE', detail: expect.stringContaining('fake.png') } });
      const gif = await upload('/api/v2/upload/image', [
        { field: 'file', bytes: Buffer.from('GIF89a\x01\x00\x01\x00\x80\x00\x00', 'latin1'), type: 'image/gif', name: 'a.gif' },
      ]);
      expect(gif.status).toBe(415);
    });

    it('answers 413 for an image over 5 MB', async () => {
      const big = png(1, 1, 5 * 1024 * 1024 + 1);
      expect(await upload('/api/v2/upload/image', [{ field: 'file', bytes: big, type: 'image/png', name: 'big.png' }])).toMatchObject({
        status: 413,
        body: { code: 'PAYLOAD_TOO_LARGE' },
      });
    });

    it('takes up to 10 images in one request and refuses 11', async () => {
      const ten = Array.from({ length: 10 }, (_, i) => ({ field: 'files', bytes: png(i + 1, 1), type: 'image/png', name: `${i}.png` }));
      const ok = await upload('/api/v2/upload/images', ten);
      expect(ok.status).toBe(200);
      expect(ok.body).toHaveLength(10);
      expect(ok.body[9]).toMatchObject({ width: 10, height: 1 });
      const eleven = [...ten, { field: 'files', bytes: png(11, 1), type: 'image/png', name: '10.png' }];
      expect(await upload('/api/v2/upload/images', eleven)).toMatchObject({ status: 400, body: { code: 'TOO_MANY_FILES' } });
    });

    it('stores nothing from a multi-upload with one bad file', async () => {
      const good = png(77, 7);
      const res = await upload('/api/v2/upload/images', [
        { field: 'files', bytes: good, type: 'image/png', name: 'good.png' },
        { field: 'files', bytes: Buffer.from('nope'), type: 'image/png', name: 'bad.png' },
      ]);
      expect(res.status).toBe(415);
      const { createHash } = await import('node:crypto');
      const name = `${createHash('sha256').update(good).digest('hex')}.png`;
      expect((await request(`${running.url}/uploads/${name}`)).statusCode).toBe(404);
    });

    it('names the part it expects, and refuses a non-multipart body', async () => {
      const wrongPart = await upload('/api/v2/upload/image', [{ field: 'image', bytes: png(1, 1), type: 'image/png', name: 'a.png' }]);
      expect(wrongPart).toMatchObject({ status: 400, body: { code: 'VALIDATION_ERROR', detail: { image: [expect.stringContaining('"file"')] } } });
      const json = await call('POST', '/api/v2/upload/image', { token: alice, json: { file: 'x' } });
      expect(json.status).toBe(415);
    });
  });

  describe('documentation', () => {
    it('publishes one OpenAPI description per mount, differing as the change history says', async () => {
      const v1 = (await call('GET', '/api/v1/openapi.json')).body;
      const v2 = (await call('GET', '/api/v2/openapi.json')).body;
      const latest = (await call('GET', '/api/openapi.json')).body;
      expect(v1.info.version).toBe('1.2.0');
      expect(v2.info.version).toBe('2.4.0');
      expect(latest.info.version).toBe('2.4.0');
      expect(v2.info.description).toContain('2.4.0');
      expect(v2.info.description).toContain('2.0.0');
      expect([v1, v2, latest].map((doc) => doc.servers[0].url)).toEqual(['/api/v1', '/api/v2', '/api']);
      const login = (doc: any) => doc.paths['/auth/login'].post.requestBody.content['application/json'].schema.required;
      expect(login(v1)).toEqual(['username', 'password']);
      expect(login(v2)).toEqual(['email', 'password']);
      const params = (doc: any) => doc.paths['/blog/posts'].get.parameters.map((p: { name: string }) => p.name);
      expect(params(v1)).toEqual(['is_published']);
      expect(params(v2)).toEqual(expect.arrayContaining(['page', 'page_size', 'sort', 'search', 'author', 'tags', 'created_after', 'created_before']));
      const create = (doc: any) => Object.keys(doc.paths['/blog/posts'].post.requestBody.content['application/json'].schema.properties);
      expect(create(v1)).toEqual(['title', 'content']);
      expect(create(v2)).toEqual(['title', 'content', 'tags', 'is_published']);
      expect(v2.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    });

    it('serves the interactive pages', async () => {
      for (const path of ['/api/v1/docs', '/api/v2/docs', '/api/docs']) {
        const res = await request(`${running.url}${path}`);
        expect(res.statusCode, path).toBe(200);
        expect(res.headers['content-type']).toContain('text/html');
        expect(await res.body.text()).toContain('swagger-ui');
      }
      const script = await request(`${running.url}/api/v2/docs/static/swagger-ui-bundle.js`);
      expect(script.statusCode).toBe(200);
      await script.body.dump();
    });
  });
});
