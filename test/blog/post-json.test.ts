/**
 * PostgreSQL keeps each post's JSON as the API answers it (posts.answer_json,
 * written by a trigger: store/postgres-schema.ts, migration 11), and a list
 * page joins those. What a page answers must stay the bytes of
 * JSON.stringify of the same posts whoever wrote them: the blog, SQL run by
 * hand, or a database made before the column, whose posts the migration
 * fills in.
 */
import { describe, expect, it } from 'vitest';
import { adminSql, migrateUpTo } from '../helpers/pg-admin.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { openStore, type Store } from '../../src/store/store.js';
import { PostStore } from '../../src/blog/posts.js';

/** Every page of `posts` (published or not, both sorts) is JSON.stringify's bytes of the posts the list reads. */
async function pagesMatch(posts: PostStore): Promise<void> {
  for (const sort of ['-created_at', 'title'] as const) {
    for (const filter of [{}, { is_published: true }, { is_published: false }, { tags: ['kept'] }]) {
      const page = await posts.list(filter, { sort, limit: 20 });
      const { json } = await posts.listJson(filter, { sort, limit: 20 });
      expect(json.toString(), `${sort} ${JSON.stringify(filter)}`).toBe(JSON.stringify(page.posts));
    }
  }
}

async function withStore(url: string, work: (store: Store, posts: PostStore) => Promise<void>): Promise<void> {
  const store = await openStore({ kind: 'postgres', url, poolSize: 2 });
  try {
    await work(store, new PostStore(store.sql));
  } finally {
    await store.close();
  }
}

describe('the JSON PostgreSQL keeps of each post', () => {
  it('follows every write: an update through the blog, and SQL run by hand', async () => {
    const database = await createTestDatabase();
    try {
      await withStore(database.url, async (store, posts) => {
        const draft = await posts.create({ title: 'Draft "one"', content: 'a\nb', tags: ['kept'], authorId: null, author: 'ops', isPublished: false });
        await posts.create({ title: '둘 \\ two', content: 'x', tags: [], authorId: null, author: 'ops' });
        await pagesMatch(posts);
        await posts.update(draft.id, { title: 'Published </script>', tags: ['kept', 'new'], is_published: true });
        await pagesMatch(posts);
        // As an operator would (or `db copy`): the trigger writes the JSON, not the blog's code.
        await store.sql.run("UPDATE posts SET content = 'by hand \u0001', updated_at = '2026-11-28T00:00:00.000Z' WHERE id = $1", [draft.id]);
        await store.sql.run(
          "INSERT INTO posts (title, content, author, tags, is_published, created_at, updated_at) VALUES ('inserted', 'by SQL', 'ops', '[\"kept\"]', TRUE, $1, $1)",
          ['2026-11-28T00:00:01.000Z'],
        );
        await pagesMatch(posts);
        const page = JSON.parse((await posts.listJson({}, { limit: 20 })).json.toString()) as { title: string; content: string }[];
        expect(page.map((post) => post.title)).toContain('inserted');
        expect(page.find((post) => post.title === 'Published </script>')?.content).toBe('by hand \u0001');
      });
    } finally {
      await database.drop();
    }
  });

  it('is filled in for the posts of a database made before it', async () => {
    const database = await createTestDatabase();
    const admin = adminSql(database.url);
    try {
      await migrateUpTo(admin, 10);
      await admin.unsafe(`INSERT INTO posts (title, content, author, tags, is_published, created_at, updated_at) VALUES
        ('old "one"', 'tab\there', 'ops', '["kept"]', TRUE, '2026-11-01T00:00:00.000Z', '2026-11-01T00:00:00.000Z'),
        ('old draft', '한국어 😀', 'ops', '[]', FALSE, '2026-11-02T00:00:00.000Z', '2026-11-03T00:00:00.000Z')`);
      await admin.unsafe(
        "INSERT INTO post_tags (post_id, tag, is_published, created_at) SELECT id, 'kept', TRUE, created_at FROM posts WHERE title = 'old \"one\"'",
      );
      await withStore(database.url, async (store, posts) => {
        expect(await store.sql.one<{ n: number }>('SELECT count(*)::int AS n FROM posts WHERE answer_json IS NULL')).toEqual({ n: 0 });
        await pagesMatch(posts);
        expect((await posts.list({}, { limit: 20 })).posts.map((post) => post.title)).toEqual(['old draft', 'old "one"']);
      });
    } finally {
      await admin.end();
      await database.drop();
    }
  });
});
