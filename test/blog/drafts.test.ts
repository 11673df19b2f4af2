/**
 * Issue 39, item 10, through a real listening serve (undici), on both
 * backends: a draft (is_published false) is seen by its author and by the
 * admins alone (the admin token, a user with the admin role), on v1, v2 and /api, by id and in the lists, whatever the
 * list caches kept for the same URL; to anyone else (no token, a token
 * that does not authenticate, another user) a draft is 404, as a post that
 * does not exist, and lists of drafts hold none of theirs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { BACKENDS } from '../helpers/postgres.js';
import { UserClients, unary } from '../helpers/user-client.js';

const MOUNTS = ['/api/v1', '/api/v2', '/api'];

describe.each(BACKENDS)('drafts on %s', (backend) => {
  let running: RunningServe;
  let alice: string;
  let bob: string;
  let published: any;
  let draft: any;
  let adminDraft: any;
  /** A user whose account has the admin role: an admin, as the admin token is. */
  let carol: string;

  async function call(method: string, path: string, token?: string, json?: unknown) {
    const headers: Record<string, string> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (json !== undefined) headers['content-type'] = 'application/json';
    const response = await request(`${running.url}${path}`, { method: method as 'GET', headers, body: json === undefined ? undefined : JSON.stringify(json) });
    return { status: response.statusCode, body: (await response.body.json()) as any, headers: response.headers };
  }

  async function signup(username: string) {
    expect((await call('POST', '/api/users', undefined, { username, email: `${username}@example.com`, password: 'password123' })).status).toBe(201);
    return (await call('POST', '/api/v2/auth/login', undefined, { email: `${username}@example.com`, password: 'password123' })).body.access_token as string;
  }

  async function write(token: string, title: string, isPublished: boolean) {
    const created = await call('POST', '/api/v2/blog/posts', token, { title, content: `${title}, the body.`, tags: ['notes'] });
    expect(created.status).toBe(201);
    if (isPublished) return created.body;
    const hidden = await call('PATCH', `/api/v2/blog/posts/${created.body.id}`, token, { is_published: false });
    expect(hidden.status).toBe(200);
    return hidden.body;
  }

  beforeAll(async () => {
    running = await startTestServe({ grpc: { host: '127.0.0.1', port: 0 } }, backend);
    alice = await signup('alice');
    bob = await signup('bob');
    carol = await signup('carol');
    const users = new UserClients(running);
    const c = users.client();
    const listed = await new Promise<any[]>((resolve, reject) => {
      const found: any[] = [];
      const stream = c.ListUsers({ page: 1, page_size: 10, filter: 'carol' }, users.auth());
      stream.on('data', (user: any) => found.push(user));
      stream.on('end', () => resolve(found));
      stream.on('error', reject);
    });
    await unary(c, 'UpdateUser', { user_id: listed[0].id, user: { roles: ['admin'] }, update_mask: { paths: ['roles'] } }, users.auth());
    c.close();
    published = await write(alice, 'Out in the open', true);
    draft = await write(alice, 'Alice draft', false);
    adminDraft = await write(running.adminToken, 'Admin draft', false);
  });
  afterAll(async () => running.close());

  const readers = () => ({ anonymous: undefined, 'a made-up token': 'mat_not-a-token', bob, alice, admin: running.adminToken, 'carol (admin role)': carol });
  /** Who sees each draft. */
  const sees = { draft: ['alice', 'admin', 'carol (admin role)'], adminDraft: ['admin', 'carol (admin role)'] };

  it('GET /blog/posts/{id} of a draft: 200 for its author and the admin (not cached), 404 NOT_FOUND for anyone else, as an unknown id', async () => {
    const unknown = await call('GET', '/api/v2/blog/posts/999999');
    for (const [who, token] of Object.entries(readers())) {
      for (const mount of MOUNTS) {
        for (const [name, post] of [
          ['draft', draft],
          ['adminDraft', adminDraft],
        ] as const) {
          const res = await call('GET', `${mount}/blog/posts/${post.id}`, token);
          if (sees[name].includes(who)) {
            expect(res.status, `${who} ${mount} ${name}`).toBe(200);
            expect(res.body).toEqual(post);
            expect(res.headers['cache-control']).toBe('private, no-store');
          } else {
            expect(res.status, `${who} ${mount} ${name}`).toBe(404);
            expect(res.body).toEqual({ ...unknown.body, detail: `no post with id ${post.id}` });
          }
        }
        expect((await call('GET', `${mount}/blog/posts/${published.id}`, token)).body).toEqual(published);
      }
    }
  });

  it("lists of drafts (?is_published=false) hold the caller's own (every draft for the admin, none without a token), each list kept apart", async () => {
    const expected: Record<string, string[]> = {
      anonymous: [],
      'a made-up token': [],
      bob: [],
      alice: ['Alice draft'],
      admin: ['Admin draft', 'Alice draft'],
      'carol (admin role)': ['Admin draft', 'Alice draft'],
    };
    // Each reader asks twice (the list cache keeps an answer from a URL's second request on), in turns, so that a
    // kept answer would be met by the next reader of the same URL.
    for (let round = 0; round < 2; round++) {
      for (const [who, token] of Object.entries(readers())) {
        for (let twice = 0; twice < 2; twice++) {
          const v1 = await call('GET', '/api/v1/blog/posts?is_published=false', token);
          expect(
            v1.body.map((p: any) => p.title),
            `${who} v1`,
          ).toEqual(expected[who]);
          expect(v1.headers['cache-control']).toBe('private, no-store');
          for (const query of [
            'is_published=false&sort=title',
            'is_published=false&sort=title&tags=notes',
            'is_published=false&sort=title&search=draft',
            'is_published=false&sort=title&page_size=1',
          ]) {
            for (const mount of ['/api/v2', '/api']) {
              const v2 = await call('GET', `${mount}/blog/posts?${query}`, token);
              const titles = query.includes('page_size=1') ? expected[who]!.slice(0, 1) : expected[who];
              expect(
                v2.body.results.map((p: any) => p.title),
                `${who} ${mount} ${query}`,
              ).toEqual(titles);
              expect(v2.body.count, `${who} ${query}`).toBe(expected[who]!.length);
            }
          }
        }
      }
    }
    // The lists of published posts are everyone's, drafts never in them.
    for (const token of Object.values(readers())) {
      expect((await call('GET', '/api/v1/blog/posts', token)).body.map((p: any) => p.title)).toEqual(['Out in the open']);
      expect((await call('GET', '/api/v2/blog/posts?tags=notes', token)).body.results.map((p: any) => p.title)).toEqual(['Out in the open']);
    }
  });

  it("PATCH of another's draft is 404 (403 stays for a published post of another); published, a draft is everyone's", async () => {
    expect(await call('PATCH', `/api/v2/blog/posts/${draft.id}`, bob, { title: 'Taken' })).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } });
    expect(await call('PATCH', `/api/v1/blog/posts/${adminDraft.id}`, alice, { is_published: true })).toMatchObject({
      status: 404,
      body: { code: 'NOT_FOUND' },
    });
    expect((await call('PATCH', `/api/v2/blog/posts/${published.id}`, bob, { title: 'Taken' })).status).toBe(403);
    const later = await write(bob, 'Bob draft', false);
    expect((await call('GET', `/api/v2/blog/posts/${later.id}`)).status).toBe(404);
    expect((await call('PATCH', `/api/v2/blog/posts/${later.id}`, bob, { is_published: true })).status).toBe(200);
    const seen = await call('GET', `/api/v2/blog/posts/${later.id}`);
    expect(seen).toMatchObject({ status: 200, body: { title: 'Bob draft', is_published: true } });
    expect(seen.headers['cache-control']).toBeUndefined();
  });
});
