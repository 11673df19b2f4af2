/**
 * Request bodies say what they do (issue 42, items 1 and 4), through a real
 * listening serve: a body is taken as it was sent (no field dropped, no type
 * converted), v2 takes a draft on creation, text must be Unicode, and a body
 * that is not JSON is the one error INVALID_JSON on every surface.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';

let running: RunningServe;
let alice: string;

async function call(method: string, path: string, options: { json?: unknown; raw?: string | Buffer; token?: string } = {}) {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body = options.raw;
  if (options.json !== undefined) body = JSON.stringify(options.json);
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await request(`${running.url}${path}`, { method: method as 'GET', headers, body });
  const text = await response.body.text();
  return { status: response.statusCode, body: text ? JSON.parse(text) : undefined };
}

const titles = async (path: string, token?: string) => {
  const list = (await call('GET', path, { token })).body;
  return (Array.isArray(list) ? list : list.results).map((post: { title: string }) => post.title);
};

beforeAll(async () => {
  running = await startTestServe();
  expect((await call('POST', '/api/users', { json: { username: 'alice', email: 'alice@example.com', password: 'password123' } })).status).toBe(201);
  alice = (await call('POST', '/api/v2/auth/login', { json: { email: 'alice@example.com', password: 'password123' } })).body.access_token;
});
afterAll(async () => running.close());

describe('a post created on v2', () => {
  it('is a draft with is_published false: seen by its author alone, listed in no public list', async () => {
    const draft = await call('POST', '/api/v2/blog/posts', { token: alice, json: { title: 'Not yet', content: 'Draft body', is_published: false } });
    expect(draft).toMatchObject({ status: 201, body: { title: 'Not yet', is_published: false, author: 'alice' } });
    expect((await call('GET', `/api/v2/blog/posts/${draft.body.id}`)).status).toBe(404);
    expect((await call('GET', `/api/v2/blog/posts/${draft.body.id}`, { token: alice })).body.is_published).toBe(false);
    expect(await titles('/api/v2/blog/posts?page_size=100')).not.toContain('Not yet');
    expect(await titles('/api/v2/blog/posts?page_size=100&is_published=false', alice)).toContain('Not yet');
    const published = await call('POST', '/api/v2/blog/posts', { token: alice, json: { title: 'Out now', content: 'Body', is_published: true } });
    expect(published.body.is_published).toBe(true);
  });

  it('is refused with is_published on v1, which predates drafts on creation, naming the field', async () => {
    const res = await call('POST', '/api/v1/blog/posts', { token: alice, json: { title: 'v1 draft', content: 'Body', is_published: false } });
    expect(res).toEqual({
      status: 400,
      body: {
        error: 'Validation Error',
        code: 'VALIDATION_ERROR',
        detail: { is_published: ['is_published is not a field of this body (it takes title, content)'] },
      },
    });
  });
});

describe('unknown fields', () => {
  it('are a 400 VALIDATION_ERROR naming each of them, and nothing is written', async () => {
    const res = await call('POST', '/api/v2/blog/posts', { token: alice, json: { title: 'Typo', content: 'Body', author_id: 5, tilte: 'x' } });
    expect(res).toEqual({
      status: 400,
      body: {
        error: 'Validation Error',
        code: 'VALIDATION_ERROR',
        detail: {
          author_id: ['author_id is not a field of this body (it takes title, content, tags, is_published)'],
          tilte: ['tilte is not a field of this body (it takes title, content, tags, is_published)'],
        },
      },
    });
    expect(await titles('/api/v2/blog/posts?page_size=100')).not.toContain('Typo');
  });

  it('are refused by every body of the blog: a change, a sign-up, a login', async () => {
    const post = (await call('POST', '/api/v2/blog/posts', { token: alice, json: { title: 'Mine', content: 'Body' } })).body;
    const change = await call('PATCH', `/api/v2/blog/posts/${post.id}`, { token: alice, json: { title: 'Renamed', author: 'mallory' } });
    expect(change).toMatchObject({ status: 400, body: { detail: { author: [expect.stringContaining('author is not a field of this body')] } } });
    expect((await call('GET', `/api/v2/blog/posts/${post.id}`)).body.title).toBe('Mine');
    const signup = await call('POST', '/api/users', { json: { username: 'bob', email: 'bob@example.com', password: 'password123', roles: ['admin'] } });
    expect(signup).toMatchObject({
      status: 400,
      body: { code: 'VALIDATION_ERROR', detail: { roles: [expect.stringContaining('roles is not a field of this body')] } },
    });
    const login = await call('POST', '/api/v2/auth/login', { json: { email: 'alice@example.com', password: 'password123', remember: true } });
    expect(login).toMatchObject({
      status: 400,
      body: { code: 'VALIDATION_ERROR', detail: { remember: [expect.stringContaining('remember is not a field of this body (it takes email, password)')] } },
    });
  });
});

describe('values of another type', () => {
  it('are refused, not converted, naming the field', async () => {
    const cases: [string, string, unknown, string, string][] = [
      ['POST', '/api/v2/blog/posts', { title: 12345, content: 'Body' }, 'title', 'title must be string'],
      ['POST', '/api/v2/blog/posts', { title: 'T', content: 'Body', is_published: 'false' }, 'is_published', 'is_published must be boolean'],
      ['POST', '/api/v2/blog/posts', { title: 'T', content: 'Body', tags: 'intro' }, 'tags', 'tags must be array'],
      ['POST', '/api/v2/blog/posts', { title: 'T', content: 'Body', tags: [7] }, 'tags', 'tags[0] must be string'],
      ['POST', '/api/v2/auth/login', { email: 'alice@example.com', password: 12345678 }, 'password', 'password must be string'],
    ];
    for (const [method, path, json, field, says] of cases) {
      const res = await call(method, path, { token: alice, json });
      expect(res, JSON.stringify(json)).toMatchObject({ status: 400, body: { code: 'VALIDATION_ERROR', detail: { [field]: [says] } } });
    }
    expect(await titles('/api/v2/blog/posts?page_size=100')).not.toContain('12345');
    const numeric = await call('POST', '/api/users', { json: { username: 12345, email: 'n@example.com', password: 'password123' } });
    expect(numeric).toMatchObject({ status: 400, body: { code: 'VALIDATION_ERROR', detail: { username: ['username must be a string'] } } });
  });

  it('are refused in the whole body too: a JSON array or string is not a post', async () => {
    for (const json of [[{ title: 'T', content: 'Body' }], 'a post']) {
      const res = await call('POST', '/api/v2/blog/posts', { token: alice, json });
      expect(res, JSON.stringify(json)).toMatchObject({ status: 400, body: { code: 'VALIDATION_ERROR', detail: { body: ['body must be object'] } } });
    }
  });
});

describe('text that is not Unicode', () => {
  it('is a 400 INVALID_JSON when the bytes are not UTF-8, on the blog and the relay, and nothing is stored', async () => {
    const bytes = Buffer.concat([Buffer.from('{"title":"caf'), Buffer.from([0xe9]), Buffer.from('","content":"Body"}')]);
    const blog = await call('POST', '/api/v2/blog/posts', { token: alice, raw: bytes });
    expect(blog).toEqual({
      status: 400,
      body: { error: 'Bad Request', code: 'INVALID_JSON', detail: 'the body is not valid UTF-8 (at byte offset 13): JSON text must be UTF-8' },
    });
    const relay = await call('POST', '/api/auth/token', {
      raw: Buffer.concat([Buffer.from('{"authorizationCode":"'), Buffer.from([0xff, 0xfe]), Buffer.from('","referrer":"sandbox"}')]),
    });
    expect(relay).toMatchObject({
      status: 400,
      body: { code: 'INVALID_JSON', detail: 'the body is not valid UTF-8 (at byte offset 22): JSON text must be UTF-8' },
    });
    expect(await titles('/api/v2/blog/posts?page_size=100')).not.toContain('caf\uFFFD');
  });

  it('is a 400 INVALID_JSON naming the field that holds a lone surrogate escape; a pair is a character', async () => {
    const lone = await call('POST', '/api/v2/blog/posts', { token: alice, raw: '{"title":"a\\ud800b","content":"Body"}' });
    expect(lone).toMatchObject({ status: 400, body: { code: 'INVALID_JSON', detail: expect.stringMatching(/^title holds a lone surrogate escape/) } });
    const tag = await call('POST', '/api/v2/blog/posts', { token: alice, raw: '{"title":"T","content":"Body","tags":["ok","\\uDC00"]}' });
    expect(tag).toMatchObject({ status: 400, body: { code: 'INVALID_JSON', detail: expect.stringMatching(/^tags\[1\] holds a lone surrogate escape/) } });
    const signup = await call('POST', '/api/users', { raw: '{"username":"carol","email":"carol@example.com","password":"\\ud83dpassword"}' });
    expect(signup).toMatchObject({ status: 400, body: { code: 'INVALID_JSON', detail: expect.stringMatching(/^password holds a lone surrogate escape/) } });
    const pair = await call('POST', '/api/v2/blog/posts', { token: alice, raw: '{"title":"Launch \\ud83d\\ude80","content":"Body"}' });
    expect(pair).toMatchObject({ status: 201, body: { title: 'Launch 🚀' } });
  });
});

describe('a body that is not JSON', () => {
  it('is the one error INVALID_JSON on the relay and every mount of the blog, saying where it breaks', async () => {
    const where = 'the body is not valid JSON: unexpected character at line 1, column 10';
    const relay = await call('POST', '/api/auth/token', { raw: '{"code": x}' });
    expect(relay).toEqual({ status: 400, body: { error: where, detail: where, code: 'INVALID_JSON' } });
    for (const path of ['/api/v1/auth/login', '/api/v2/auth/login', '/api/auth/login', '/api/users', '/api/v2/blog/posts']) {
      const res = await call('POST', path, { token: alice, raw: '{"code": x}' });
      expect(res, path).toEqual({ status: 400, body: { error: 'Bad Request', detail: where, code: 'INVALID_JSON' } });
    }
    const cut = await call('POST', '/api/v2/blog/posts', { token: alice, raw: '{"title":"T",\n"content":' });
    expect(cut.body).toEqual({ error: 'Bad Request', detail: 'the body is not valid JSON: it ends too early (line 2, column 11)', code: 'INVALID_JSON' });
    // A post's body past 64 KiB is told what is wrong without where: searching for the place costs ~20 parses of it.
    const long = await call('POST', '/api/v2/blog/posts', { token: alice, raw: `{"title":"T","content":[${'1,'.repeat(40_000)}x]}` });
    expect(long.body).toEqual({ error: 'Bad Request', detail: 'the body is not valid JSON: unexpected character', code: 'INVALID_JSON' });
    for (const path of ['/api/auth/refresh', '/api/v2/auth/login']) {
      const empty = await call('POST', path, { raw: '' });
      expect(empty, path).toMatchObject({ status: 400, body: { code: 'INVALID_JSON' } });
    }
  });
});

describe('query parameters', () => {
  it("are named as a body's fields are: { field: [messages] }, each message a sentence about the field", async () => {
    const cases: [string, Record<string, string[]>][] = [
      ['page=0', { page: ['page must be >= 1'] }],
      ['page_size=abc', { page_size: ['page_size must be integer'] }],
      ['created_after=yesterday', { created_after: ['created_after must match format "date", or must match format "date-time"'] }],
      ['search=a%00b', { search: ['search must not hold a NUL character (U+0000)'] }],
    ];
    for (const [query, detail] of cases) {
      expect(await call('GET', `/api/v2/blog/posts?${query}`), query).toEqual({
        status: 400,
        body: { error: 'Validation Error', code: 'VALIDATION_ERROR', detail },
      });
    }
    const path = await call('GET', '/api/v2/blog/posts/abc');
    expect(path).toEqual({ status: 400, body: { error: 'Validation Error', code: 'VALIDATION_ERROR', detail: { post_id: ['post_id must be integer'] } } });
  });
});
