/**
 * Walking the v2 post list by its links (next and previous carry a cursor
 * besides the page number), through a real listening serve on both
 * backends: every post once, in order, from either end, in every sort and
 * with the filters a list uses most; a post written during a walk neither
 * repeats nor hides one; a cursor the server did not give is a 400.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { BACKENDS } from '../helpers/postgres.js';

const POSTS = 47;

describe.each(BACKENDS)('post list cursors on %s', (backend) => {
  let running: RunningServe;

  async function get(path: string): Promise<{ status: number; body: any }> {
    // As the admin, who sees the drafts too (a list of drafts is its reader's own: test/blog/drafts.test.ts).
    const res = await request(`${running.url}${path}`, { headers: { authorization: `Bearer ${running.adminToken}` } });
    return { status: res.statusCode, body: await res.body.json() };
  }

  async function write(title: string, tags: string[], isPublished = true): Promise<number> {
    const res = await request(`${running.url}/api/v2/blog/posts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${running.adminToken}` },
      body: JSON.stringify({ title, content: 'x', tags }),
    });
    const body = (await res.body.json()) as { id: number };
    expect(res.statusCode).toBe(201);
    if (!isPublished) {
      const patched = await request(`${running.url}/api/v2/blog/posts/${body.id}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${running.adminToken}` },
        body: JSON.stringify({ is_published: false }),
      });
      expect(patched.statusCode).toBe(200);
      await patched.body.dump();
    }
    return body.id;
  }

  beforeAll(async () => {
    running = await startTestServe({}, backend);
    // Titles that tie when case is ignored, so that the id decides; every 5th post tagged "rare", every 9th a draft.
    for (let i = 0; i < POSTS; i++) {
      await write(`${['Alpha', 'alpha', 'Beta', 'beta ', 'Gamma'][i % 5]} ${i % 7}`, i % 5 === 0 ? ['rare', 'Common'] : ['common'], i % 9 !== 4);
    }
  });
  afterAll(async () => {
    await running?.close();
  });

  const ids = (body: { results: { id: number }[] }) => body.results.map((post) => post.id);

  /** Every page from `path` following `link` ('next' or 'previous') until it is null: the ids in the order seen, page by page. */
  async function walk(path: string, link: 'next' | 'previous'): Promise<number[][]> {
    const pages: number[][] = [];
    for (let at: string | null = path; at !== null; ) {
      const { status, body } = await get(at);
      expect(status, at).toBe(200);
      pages.push(ids(body));
      at = body[link];
      expect(pages.length).toBeLessThan(100);
    }
    return pages;
  }

  for (const sort of ['-created_at', 'created_at', 'title', '-title']) {
    for (const filter of ['', '&tags=rare', '&tags=common&is_published=false', '&tags=rare,common', '&search=alpha']) {
      it(`walks sort=${sort}${filter} both ways by its links, every post once`, async () => {
        const all = await get(`/api/v2/blog/posts?page_size=100&sort=${sort}${filter}`);
        expect(all.body.next).toBeNull();
        const everything = ids(all.body);
        expect(everything.length).toBe(all.body.count);
        expect(everything.length).toBeGreaterThan(0);
        const size = 4;
        const forward = await walk(`/api/v2/blog/posts?page_size=${size}&sort=${sort}${filter}`, 'next');
        expect(forward.flat()).toEqual(everything);
        expect(forward.slice(0, -1).every((page) => page.length === size)).toBe(true);
        // From the last page asked for by number, back to the first.
        const last = Math.ceil(everything.length / size);
        const backward = await walk(`/api/v2/blog/posts?page_size=${size}&sort=${sort}${filter}&page=${last}`, 'previous');
        expect(backward.reverse().flat()).toEqual(everything);
        // Each page by number is the same page.
        for (let page = 1; page <= last; page++) {
          const numbered = await get(`/api/v2/blog/posts?page_size=${size}&sort=${sort}${filter}&page=${page}`);
          expect(ids(numbered.body), `page ${page}`).toEqual(everything.slice((page - 1) * size, page * size));
          expect(numbered.body.count).toBe(everything.length);
        }
      });
    }
  }

  it('neither repeats nor skips a post when one is written during the walk', async () => {
    const before = ids((await get('/api/v2/blog/posts?page_size=100')).body);
    const first = await get('/api/v2/blog/posts?page_size=5');
    // A new post goes first in the newest-first order: page 2 by number would now repeat page 1's last post.
    const written = await write('written during the walk', ['rare']);
    const rest = await walk(first.body.next, 'next');
    expect([...ids(first.body), ...rest.flat()]).toEqual(before);
    const byNumber = await get('/api/v2/blog/posts?page_size=5&page=2');
    expect(ids(byNumber.body)[0]).toBe(ids(first.body)[4]);
    expect(ids((await get('/api/v2/blog/posts?page_size=5')).body)[0]).toBe(written);
    // Walking back from the second page of the walk reaches the list's start as it is now, new post included.
    const second = await get(first.body.next);
    const previous = await get(second.body.previous);
    expect(ids(previous.body)[0]).toBe(written);
    expect(previous.body.previous).toBeNull();
  });

  it('answers 400 naming the parameter for a cursor it did not give, of another sort, or two at once', async () => {
    const first = await get('/api/v2/blog/posts?page_size=2&sort=title');
    const cursor = new URL(first.body.next, 'http://x').searchParams.get('after')!;
    const cases: [string, string, string][] = [
      ['after=not-a-cursor', 'after', 'after'],
      [`after=${Buffer.from('[1,2,3]').toString('base64url')}`, 'after', 'after'],
      [`before=${Buffer.from(JSON.stringify(['title', 'a', -1])).toString('base64url')}`, 'before', 'before'],
      [`after=${cursor}`, 'after', 'sorted by title'],
      [`after=${cursor}&before=${cursor}&sort=title`, 'before', 'after and before'],
      [`after=${'A'.repeat(3000)}`, 'after', 'after'],
    ];
    for (const [query, field, says] of cases) {
      const res = await get(`/api/v2/blog/posts?${query}`);
      expect(res.status, query).toBe(400);
      // Named as every other parameter's (and body field's) problem is: { field: [messages] }.
      expect(res.body, query).toMatchObject({ error: 'Validation Error', code: 'VALIDATION_ERROR', detail: { [field]: [expect.stringContaining(says)] } });
    }
    // The same cursor in its own sort is a page.
    expect((await get(`/api/v2/blog/posts?page_size=2&sort=title&page=2&after=${cursor}`)).status).toBe(200);
  });
});
