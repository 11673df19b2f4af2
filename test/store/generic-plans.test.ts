/**
 * The statements PostgreSQL runs on every call are planned once, not at each
 * call: the bearer token's lookup, GetUser's read by id, and the blog's first
 * page. A prepared statement keeps its generic plan only when PostgreSQL
 * judges it no dearer than a plan for the values at hand; `= ANY($1)` and a
 * `LIMIT $n` made it plan every call again, at more than the cost of running
 * the statement. pg_prepared_statements counts the plans of each statement
 * on its connection; the store here has one connection, so every call of
 * the test runs on it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/store.js';
import { TokenService } from '../../src/auth/tokens.js';
import { UserStore } from '../../src/users/user-store.js';
import { UserChangeLog } from '../../src/users/change-log.js';
import { PostStore } from '../../src/blog/posts.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

const CALLS = 12;

describe('statements planned once on PostgreSQL', () => {
  let database: TestDatabase;
  let store: Store;

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true });
    store = await openStore({ kind: 'postgres', url: database.url, poolSize: 1 });
  });
  afterAll(async () => {
    await store?.close();
    await database?.drop();
  });

  /** The plans made so far of the prepared statement whose text contains `fragment` (one statement only). */
  async function plans(fragment: string): Promise<{ generic: number; custom: number }> {
    const rows = await store.sql.all<{ statement: string; generic_plans: number; custom_plans: number }>(
      'SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE $1',
      [`%${fragment}%`],
    );
    expect(rows, `prepared statements with "${fragment}"`).toHaveLength(1);
    return { generic: Number(rows[0]!.generic_plans), custom: Number(rows[0]!.custom_plans) };
  }

  it('looks tokens and users up with their generic plans', async () => {
    const users = new UserStore(store.sql, new UserChangeLog(store.sql, store.signals));
    const user = await users.create({ username: 'planned', email: 'planned@example.com', fullName: 'P', passwordHash: 'x' });
    const tokens = new TokenService(store.sql);
    const { token } = await tokens.issueUserToken(user.id, 3600);
    for (let i = 0; i < CALLS; i++) {
      expect((await tokens.authenticate(token))?.username).toBe('planned');
      expect((await users.get(user.id))?.username).toBe('planned');
    }
    const lookup = await plans('t.token_hash IN (');
    const byId = await plans('FROM users WHERE id IN (');
    for (const counted of [lookup, byId]) {
      // PostgreSQL tries five custom plans before it compares; after that, the generic plan every time.
      expect(counted.custom).toBeLessThanOrEqual(5);
      expect(counted.generic).toBeGreaterThanOrEqual(CALLS - 5);
    }
  });

  it('reads the first page of the blog with its generic plan', async () => {
    const posts = new PostStore(store.sql);
    await posts.create({ title: 'Planned', content: 'once', tags: [], authorId: null, author: 'p' });
    for (let i = 0; i < CALLS; i++) {
      const page = await posts.page({}, { limit: 20, offset: 0 });
      expect(page.total).toBe(1);
    }
    const page = await plans('LIMIT 20');
    expect(page.custom).toBeLessThanOrEqual(5);
    expect(page.generic).toBeGreaterThanOrEqual(CALLS - 5);
  });
});
