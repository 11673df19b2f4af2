/**
 * The blog family's repositories on both backends, one suite: posts and
 * what is written with them in one transaction, the posts' version that
 * the list caches are keyed on, and the images.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { adminSql } from '../helpers/pg-admin.js';
import { openStore, type Store } from '../../src/store/store.js';
import { PostStore } from '../../src/blog/posts.js';
import { openImageStore, type ImageStore } from '../../src/blog/uploads.js';
import { BACKENDS, serverUrl, testLocation } from '../helpers/postgres.js';
import { png, webp } from '../helpers/images.js';

describe.each(BACKENDS)('blog repositories on %s', (backend) => {
  let store: Store;
  let posts: PostStore;
  let images: ImageStore;
  let dispose: () => Promise<void>;

  beforeAll(async () => {
    const test = await testLocation(backend);
    dispose = test.dispose;
    store = await openStore(test.location);
    posts = new PostStore(store.sql);
    images = openImageStore(store);
  });
  afterAll(async () => {
    await images?.close();
    await store?.close();
    await dispose?.();
  });

  const deliveries = async (event: string) =>
    (await store.sql.all<{ body: string }>('SELECT body FROM webhook_deliveries WHERE event = $1', [event])).map((row) => JSON.parse(row.body).title);
  const enqueue = (event: string) => async (post: { title: string }, tx: typeof store.sql) => {
    const at = new Date().toISOString();
    await tx.run("INSERT INTO webhook_deliveries (event, url, body, state, created_at, updated_at) VALUES ($1, 'http://x', $2, 'pending', $3, $3)", [
      event,
      JSON.stringify(post),
      at,
    ]);
  };

  it('writes a post and what its hook writes in one transaction, or neither', async () => {
    await expect(
      posts.create({ title: 'rolled back', content: 'x', tags: ['a'], authorId: null, author: 'ops' }, async (post, tx) => {
        await enqueue('test.rollback')(post, tx);
        throw new Error('the outbox refused');
      }),
    ).rejects.toThrow('the outbox refused');
    expect((await posts.list({ search: 'rolled back' })).total).toBe(0);
    expect(await store.sql.one('SELECT tag FROM post_tags WHERE tag = $1', ['a'])).toBeUndefined();
    expect(await deliveries('test.rollback')).toEqual([]);

    const post = await posts.create({ title: 'committed', content: 'x', tags: [], authorId: null, author: 'ops', isPublished: false }, enqueue('test.commit'));
    expect(await deliveries('test.commit')).toEqual(['committed']);
    const published = await posts.update(post.id, { is_published: true }, async (result, tx) => {
      if (result.firstPublication) await enqueue('test.published')(result.post, tx);
    });
    expect(published?.firstPublication).toBe(true);
    expect(await deliveries('test.published')).toEqual(['committed']);
  });

  it('publishes a draft for the first time once, whatever updates race', async () => {
    const draft = await posts.create({ title: 'draft', content: 'x', tags: [], authorId: null, author: 'ops', isPublished: false });
    // Every connection of the pool open first, so that the updates do run side by side on PostgreSQL.
    if (store.kind === 'postgres') await Promise.all(Array.from({ length: 5 }, () => store.sql.one('SELECT pg_sleep(0.05)')));
    const results = await Promise.all(Array.from({ length: 6 }, () => posts.update(draft.id, { is_published: true })));
    expect(results.filter((result) => result?.firstPublication)).toHaveLength(1);
  });

  it('changes its version with every write that commits, and not with reads', async () => {
    const before = await posts.version();
    await posts.list({});
    expect(await posts.version()).toBe(before);
    const post = await posts.create({ title: 'versioned', content: 'x', tags: [], authorId: null, author: 'ops' });
    const created = await posts.version();
    expect(created).not.toBe(before);
    await posts.update(post.id, { title: 'versioned, renamed' });
    expect(await posts.version()).not.toBe(created);
  });

  it('keeps the tags as written and matches them whatever their case', async () => {
    const post = await posts.create({ title: 'tagged', content: 'x', tags: ['GraphQL', ' Ops ', 'graphql'], authorId: null, author: 'Ann' });
    expect(post.tags).toEqual(['GraphQL', 'Ops']);
    expect((await posts.list({ tags: ['graphql'] })).posts.map((p) => p.title)).toEqual(['tagged']);
    expect((await posts.list({ tags: ['OPS', 'none'], author: 'ANN' })).posts.map((p) => p.title)).toEqual(['tagged']);
    expect((await posts.list({ tags: ['ops'], author: 'bob' })).total).toBe(0);
    expect((await posts.list({ search: 'TAGG' })).posts.map((p) => p.title)).toEqual(['tagged']);
    expect((await posts.list({ search: '_' })).total).toBe(0);
  });

  it('gives every page of a deep list, seeking from its marks, what OFFSET gives, in every sort, and again after a write', async () => {
    // Many posts share a created_at and titles differ only in case, so the id decides ties; 260 posts give
    // two marks (every 100th row) per filter.
    let written = 0;
    const pager = new PostStore(store.sql, () => new Date(Date.parse('2026-03-01T00:00:00Z') + Math.floor(written++ / 3) * 1000));
    const titles = ['Pager', 'pager', 'PAGER b', 'pager a', 'Ünï', '~x', 'a_b'];
    for (let i = 0; i < 260; i++) {
      await pager.create({
        title: `${titles[i % titles.length]}${i % 4 ? ` ${i % 9}` : ''}`,
        content: 'x',
        tags: i % 2 ? ['even'] : [],
        authorId: null,
        author: 'pager',
        isPublished: i % 10 !== 0,
      });
    }
    const check = async () => {
      for (const sort of ['created_at', '-created_at', 'title', '-title'] as const) {
        for (const filter of [{ author: 'pager' }, { author: 'pager', is_published: true }, { author: 'pager', tags: ['even'] }]) {
          const all = (await pager.list(filter, { sort })).posts.map((p) => p.id);
          for (const size of [20, 33]) {
            for (let offset = 0; offset <= all.length + size; offset += size) {
              const page = await pager.list(filter, { sort, limit: size, offset });
              expect(
                page.posts.map((p) => p.id),
                `${sort} ${JSON.stringify(filter)} ${size} at ${offset}`,
              ).toEqual(all.slice(offset, offset + size));
              expect(page.total).toBe(all.length);
              // The JSON page, written by the database in the page's order (read forwards or from the end).
              const { json } = await pager.listJson(filter, { sort, limit: size, offset });
              expect(
                (JSON.parse(json.toString()) as { id: number }[]).map((p) => p.id),
                `json: ${sort} ${JSON.stringify(filter)} ${size} at ${offset}`,
              ).toEqual(all.slice(offset, offset + size));
            }
          }
        }
      }
    };
    await check();
    // listJson: the same page, as the UTF-8 bytes of what JSON.stringify gives, whatever the text holds (a lone
    // surrogate is stored as U+FFFD by either backend's driver).
    const texts = ['quote " back \\ slash', 'ctl \u0001\u0008\t\n\f\r\u001f\u007f', '한국어 😀', 'sep\u2028\u2029', '</script>', 'lone \ud800 \udfff'];
    for (const [i, text] of texts.entries()) {
      await pager.create({ title: text, content: text.repeat(2), tags: [text, `t${i}`], authorId: null, author: 'pager', isPublished: i % 2 === 0 });
    }
    for (const sort of ['-created_at', 'title'] as const) {
      for (const filter of [{ author: 'pager' }, { author: 'pager', is_published: false }, { author: 'nobody' }]) {
        for (const offset of [0, 20, 240]) {
          const page = await pager.list(filter, { sort, limit: 20, offset });
          const { json, total } = await pager.listJson(filter, { sort, limit: 20, offset });
          expect(json.equals(Buffer.from(JSON.stringify(page.posts))), `${sort} ${JSON.stringify(filter)} at ${offset}`).toBe(true);
          expect(total).toBe(page.total);
        }
      }
    }
    await pager.create({ title: 'Pager', content: 'x', tags: ['even'], authorId: null, author: 'pager' });
    written = 90; // among the others' times
    await pager.create({ title: 'pager 0', content: 'x', tags: [], authorId: null, author: 'pager' });
    await check();
  });

  it('stores an image once under the hash of its bytes and finds it again, with or without its bytes', async () => {
    const bytes = png(6, 2);
    const first = await images.save(bytes);
    expect(first).toMatchObject({ width: 6, height: 2, size: bytes.length, mime: 'image/png', name: expect.stringMatching(/^[0-9a-f]{64}\.png$/) });
    expect(await images.save(bytes)).toEqual(first);
    const found = await images.find(first!.name);
    expect(found).toMatchObject({ name: first!.name, mime: 'image/png', size: bytes.length });
    expect(found!.bytes).toEqual(bytes);
    const head = await images.find(first!.name, { bytes: false });
    expect(head).toMatchObject({ mime: 'image/png', size: bytes.length });
    expect(head!.bytes).toBeUndefined();
    expect((await images.find((await images.save(webp(8, 8)))!.name))?.mime).toBe('image/webp');
    expect(await images.save(Buffer.from('not an image'))).toBeUndefined();
    expect(await images.find(`${'0'.repeat(64)}.png`)).toBeUndefined();
    expect(await images.find('../miniapp.db')).toBeUndefined();
  });
});

describe('titles sorted on both backends', () => {
  it('come in the same order, whatever the collation of the PostgreSQL database', async () => {
    // A language's collation, as managed services often create databases with: it orders "~" before letters
    // and "é" before "f", where SQLite compares code points.
    const name = `t_icu_${randomBytes(4).toString('hex')}`;
    const admin = adminSql(serverUrl());
    await admin.unsafe(`CREATE DATABASE ${name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`);
    const url = new URL(serverUrl());
    url.pathname = `/${name}`;
    const stores = [await openStore({ kind: 'memory' }), await openStore({ kind: 'postgres', url: url.href, poolSize: 2 })];
    try {
      const orders: string[][] = [];
      for (const store of stores) {
        const posts = new PostStore(store.sql);
        for (const title of ['zebra', '~tilde', 'éclair', 'Fig', 'a b', 'ab', 'A-c', '_under']) {
          await posts.create({ title, content: 'x', tags: [], authorId: null, author: 'ops' });
        }
        orders.push((await posts.list({ is_published: true }, { sort: 'title', limit: 20 })).posts.map((p) => p.title));
        expect((await posts.list({ is_published: true }, { sort: '-title', limit: 20 })).posts.map((p) => p.title)).toEqual([...orders.at(-1)!].reverse());
      }
      expect(orders[1]).toEqual(orders[0]);
      expect(orders[0]).toEqual(['_under', 'a b', 'A-c', 'ab', 'Fig', 'zebra', '~tilde', 'éclair']);
    } finally {
      for (const store of stores) await store.close();
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  });
});
