/**
 * Two instances A and B of the blog on one PostgreSQL database (issue 12,
 * "behaviour across instances"): a write acknowledged by A shows on B's
 * next request, cached pages included, and an image stored through either
 * is served by both.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FormData, request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { openStore, type Store } from '../../src/store/store.js';
import { jpeg, png } from '../helpers/images.js';

let database: TestDatabase;
let a: RunningServe;
let b: RunningServe;
/** A third connection to the same database, to look at it directly. */
let store: Store;

beforeAll(async () => {
  database = await createTestDatabase();
  const location = { kind: 'postgres', url: database.url, poolSize: 5 } as const;
  a = await startTestServe({ store: location }, 'postgres');
  b = await startTestServe({ store: location }, 'postgres');
  store = await openStore(location);
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  await store?.close();
  await database?.drop();
});

async function get(server: RunningServe, path: string, token?: string) {
  const res = await request(`${server.url}${path}`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  return { status: res.statusCode, body: (await res.body.json()) as any };
}

async function send(server: RunningServe, method: 'POST' | 'PATCH', path: string, json: unknown) {
  const res = await request(`${server.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${server.adminToken}` },
    body: JSON.stringify(json),
  });
  return { status: res.statusCode, body: (await res.body.json()) as any };
}

const titlesOn = async (server: RunningServe, path = '/api/v2/blog/posts') => {
  const { body } = await get(server, path);
  return (Array.isArray(body) ? body : body.results).map((p: { title: string }) => p.title);
};

async function upload(server: RunningServe, bytes: Buffer, type: string) {
  const form = new FormData();
  form.append('file', new Blob([bytes], { type }), 'image');
  const res = await request(`${server.url}/api/v2/upload/image`, { method: 'POST', headers: { authorization: `Bearer ${server.adminToken}` }, body: form });
  expect(res.statusCode).toBe(200);
  return (await res.body.json()) as { url: string };
}

describe('two instances on one PostgreSQL', () => {
  it("a post written through A is on B's lists at the next request, even when B had those pages cached", async () => {
    expect((await send(a, 'POST', '/api/v2/blog/posts', { title: 'first, through A', content: 'x', tags: ['Ops'] })).status).toBe(201);
    const pages = ['/api/v2/blog/posts', '/api/v1/blog/posts', '/api/v2/blog/posts?tags=ops&page_size=1', '/api/v2/blog/posts?sort=title'];
    // Twice: B keeps an answer from a URL's second request on (ListCache's admitOnSecondRequest).
    await Promise.all(pages.map((page) => titlesOn(b, page)));
    const before = await Promise.all(pages.map((page) => titlesOn(b, page)));
    expect(before[0]).toEqual(['first, through A']);

    // B answers these pages from its cache: a row put in behind the store's back (the posts' version untouched)
    // does not show. This is what the version is for; every write through the store changes it.
    await store.sql.run(
      "INSERT INTO posts (title, content, author, tags, is_published, created_at, updated_at) VALUES ('behind the cache', 'x', 'ops', '[]', TRUE, $1, $1)",
      [new Date().toISOString()],
    );
    expect(await titlesOn(b)).toEqual(['first, through A']);

    const created = await send(a, 'POST', '/api/v2/blog/posts', { title: 'second, through A', content: 'x', tags: ['ops'] });
    expect(created.status).toBe(201);
    const after = await Promise.all(pages.map((page) => titlesOn(b, page)));
    expect(after[0]).toEqual(['second, through A', 'behind the cache', 'first, through A']);
    expect(after[1]).toEqual(after[0]);
    expect(after[2]).toEqual(['second, through A']);
    expect((await get(b, '/api/v2/blog/posts?tags=ops&page_size=1')).body.count).toBe(2);
    expect(after[3]).toEqual(['behind the cache', 'first, through A', 'second, through A']);

    expect((await send(a, 'PATCH', `/api/v2/blog/posts/${created.body.id}`, { title: 'second, renamed on A' })).status).toBe(200);
    expect((await titlesOn(b))[0]).toBe('second, renamed on A');
    expect((await send(b, 'PATCH', `/api/v2/blog/posts/${created.body.id}`, { is_published: false })).status).toBe(200);
    expect(await titlesOn(a)).not.toContain('second, renamed on A');
    // The draft is its author's (here the admin's) to see.
    expect((await get(a, `/api/v2/blog/posts/${created.body.id}`, a.adminToken)).body.is_published).toBe(false);
  });

  it('writes racing through both instances all show on both', async () => {
    const start = (await get(a, '/api/v2/blog/posts?page_size=1')).body.count as number;
    // Both pages cached on both instances before the race (kept from the second request on).
    for (const server of [a, b, a, b]) await get(server, '/api/v2/blog/posts?page_size=1');
    const writes = Array.from({ length: 20 }, (_, i) => send(i % 2 ? a : b, 'POST', '/api/v2/blog/posts', { title: `race ${i}`, content: 'x' }));
    expect((await Promise.all(writes)).map((w) => w.status)).toEqual(Array(20).fill(201));
    for (const server of [a, b]) expect((await get(server, '/api/v2/blog/posts?page_size=1')).body.count).toBe(start + 20);
  });

  it('an image uploaded through A is served by B, and the same bytes are stored once', async () => {
    const bytes = jpeg(320, 200);
    const { url } = await upload(a, bytes, 'image/jpeg');
    const served = await request(`${b.url}${url}`);
    expect(served.statusCode).toBe(200);
    expect(served.headers['content-type']).toBe('image/jpeg');
    expect(served.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(Buffer.from(await served.body.arrayBuffer())).toEqual(bytes);
    const head = await request(`${b.url}${url}`, { method: 'HEAD' });
    expect(head.headers['content-length']).toBe(String(bytes.length));
    await head.body.dump();

    expect((await upload(b, bytes, 'image/jpeg')).url).toBe(url);
    const other = png(3, 3);
    const second = await upload(b, other, 'image/png');
    expect(Buffer.from(await (await request(`${a.url}${second.url}`)).body.arrayBuffer())).toEqual(other);
    const rows = await store.sql.all<{ name: string; size: number }>('SELECT name, size FROM images ORDER BY size');
    expect(rows).toEqual(
      [
        { name: url.slice('/uploads/'.length), size: bytes.length },
        { name: second.url.slice('/uploads/'.length), size: other.length },
      ].sort((x, y) => x.size - y.size),
    );
  });
});
