/**
 * `miniapp db copy` never merges two deployments' data by accident (issue
 * 19, finding 3): into a database that holds anything else it refuses and
 * writes nothing; `--merge` adds the data beside the other deployment's so
 * that every id, token, post and tag keeps its meaning; a second copy
 * checks content, not keys, and a resumed copy completes what is missing.
 * Through the real CLI, with SQLite and PostgreSQL filled by real serves,
 * and checked as a user would: by logging in and calling the APIs.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { Sandbox, plain } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/postgres.js';
import { adminSql } from '../helpers/pg-admin.js';
import { startTestServe } from '../helpers/serve.js';
import type { RunningServe } from '../../src/server/serve.js';

async function call(base: string, method: string, path: string, json?: unknown, token?: string) {
  const response = await request(`${base}${path}`, {
    method: method as 'POST',
    headers: { ...(json === undefined ? {} : { 'content-type': 'application/json' }), ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: json === undefined ? undefined : JSON.stringify(json),
  });
  const text = await response.body.text();
  return { status: response.statusCode, body: text ? JSON.parse(text) : undefined };
}

/** Signs `name` up and logs in: the user's id and token. */
async function person(base: string, name: string): Promise<{ id: number; token: string }> {
  const made = await call(base, 'POST', '/api/v2/users', { username: name, email: `${name}@example.com`, password: `${name}-password` });
  expect(made.status).toBe(201);
  const login = await call(base, 'POST', '/api/v2/auth/login', { email: `${name}@example.com`, password: `${name}-password` });
  return { id: made.body.id, token: login.body.access_token };
}

let holder: Sandbox;
let dataDir: string;
let sourceAdmin: string;
/** What the source holds: olga (1) with two posts and a token, oscar (2) with one post. */
const source = { olga: { id: 0, token: '' }, oscar: { id: 0, token: '' }, posts: [] as { id: number; title: string; author: string; tags: string[] }[] };

beforeAll(async () => {
  holder = new Sandbox();
  dataDir = join(holder.root, 'data');
  const running: RunningServe = await startTestServe({ store: { kind: 'sqlite', dataDir } });
  source.olga = await person(running.url, 'olga');
  source.oscar = await person(running.url, 'oscar');
  for (const [who, title, tags] of [
    ['olga', 'First', ['ops']],
    ['olga', 'Second', ['db', 'ops']],
    ['oscar', 'Third', ['misc']],
  ] as const) {
    const made = await call(running.url, 'POST', '/api/v2/blog/posts', { title, content: `by ${who}`, tags }, source[who].token);
    expect(made.status).toBe(201);
    source.posts.push({ id: made.body.id, title, author: who, tags: [...tags] });
  }
  sourceAdmin = running.adminToken;
  await running.close();
  expect(readFileSync(join(dataDir, 'admin-token'), 'utf8').trim()).toBe(sourceAdmin);
});
afterAll(() => holder.dispose());

const database = useTestDatabase();
let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => {
  sb.dispose();
});

async function counts(): Promise<Record<string, number>> {
  const admin = adminSql(database.url);
  try {
    const out: Record<string, number> = {};
    for (const table of ['users', 'posts', 'post_tags', 'api_tokens', 'server_secrets'])
      out[table] = (await admin.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`))[0]!.n;
    return out;
  } finally {
    await admin.end();
  }
}

/** Another deployment on the database: a serve on PostgreSQL with users of its own (pete is id 1) and a post. */
async function anotherDeployment(): Promise<{ admin: string; pete: { id: number; token: string } }> {
  const other = await startTestServe({ store: { kind: 'postgres', url: database.url, poolSize: 2 } });
  try {
    const pete = await person(other.url, 'pete');
    await person(other.url, 'petra');
    expect((await call(other.url, 'POST', '/api/v2/blog/posts', { title: 'Pete writes', content: 'hello', tags: ['ops'] }, pete.token)).status).toBe(201);
    return { admin: other.adminToken, pete };
  } finally {
    await other.close();
  }
}

describe('db copy into a database that is not empty', () => {
  it("refuses another deployment's database, says what it found, writes nothing, and exits 1", async () => {
    await anotherDeployment();
    const before = await counts();
    const result = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url]);
    expect(result.code).toBe(1);
    const text = plain(result.stderr);
    expect(text).toContain('nothing was written');
    // pete and petra hold the ids of olga and oscar.
    expect(text).toContain('users: 2 rows in conflict (id 1: the target holds it with other username, email');
    expect(text).toContain('posts: 1 row in conflict (id 1: the target holds it with other title');
    expect(text).toContain('server_secrets: 1 row not in');
    expect(text).toContain('--merge');
    expect(result.stdout).toBe('');
    expect(await counts()).toEqual(before);

    const json = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url, '--json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stderr)).toMatchObject({ error: { code: 'COPY_REFUSED', exitCode: 1 } });
  });

  it("refuses a database where serve only signed one user up (the finding's case): the SQLite user 1 is not silently dropped", async () => {
    const other = await startTestServe({ store: { kind: 'postgres', url: database.url, poolSize: 2 } });
    await person(other.url, 'newcomer');
    await other.close();
    const result = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url]);
    expect(result.code).toBe(1);
    expect(plain(result.stderr)).toContain('users: 1 row in conflict (id 1: the target holds it with other username, email');
    expect((await counts()).posts).toBe(0);
  });

  it("merges with --merge: every id keeps its meaning, tokens authenticate as their own users, and the data dir's admin token is no admin", async () => {
    const other = await anotherDeployment();
    const result = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url, '--merge', '--json']);
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout);
    const byTable = Object.fromEntries(report.tables.map((t: { table: string }) => [t.table, t]));
    expect(byTable.users).toMatchObject({ source: 2, copied: 2, renumbered: 2, verified: true });
    expect(byTable.posts).toMatchObject({ source: 3, copied: 3, renumbered: 1, verified: true });
    expect(byTable.api_tokens).toMatchObject({ skipped: 1, verified: true });
    expect(report.adminToken).toBe('kept');

    const serve = await startTestServe({ store: { kind: 'postgres', url: database.url, poolSize: 2 } });
    try {
      expect(serve.adminToken).toBe(other.admin);
      // Each token, old or new, is still its own user's: a post made with it is written as that user.
      for (const [token, name] of [
        [source.olga.token, 'olga'],
        [source.oscar.token, 'oscar'],
        [other.pete.token, 'pete'],
      ] as const) {
        const made = await call(serve.url, 'POST', '/api/v2/blog/posts', { title: `again by ${name}`, content: 'x' }, token);
        expect(made.status, name).toBe(201);
        expect(made.body.author).toBe(name);
      }
      // Old passwords log in.
      expect((await call(serve.url, 'POST', '/api/v2/auth/login', { email: 'olga@example.com', password: 'olga-password' })).status).toBe(200);
      // The data dir's admin token is not an admin here; the target's is.
      expect((await call(serve.url, 'POST', '/api/v2/blog/posts', { title: 'admin?', content: 'x' }, sourceAdmin)).status).toBe(401);
      expect((await call(serve.url, 'POST', '/api/v2/blog/posts', { title: 'admin', content: 'x' }, other.admin)).status).toBe(201);
      // Every post keeps its author and its tags.
      const list = await call(serve.url, 'GET', '/api/v2/blog/posts?page_size=100');
      const byTitle = new Map((list.body.results as { title: string; author: string; tags: string[] }[]).map((p) => [p.title, p]));
      for (const post of source.posts) expect(byTitle.get(post.title), post.title).toMatchObject({ author: post.author, tags: post.tags });
      expect(byTitle.get('Pete writes')).toMatchObject({ author: 'pete', tags: ['ops'] });
      const admin = adminSql(database.url);
      try {
        const owners = await admin<{
          title: string;
          username: string;
        }>`SELECT p.title, u.username FROM posts p JOIN users u ON u.id = p.author_id ORDER BY p.id`;
        for (const { title, username } of owners) expect(byTitle.get(title)?.author ?? username, title).toBe(username);
        const tagged = await admin<{
          title: string;
          tag: string;
        }>`SELECT p.title, t.tag FROM post_tags t JOIN posts p ON p.id = t.post_id ORDER BY p.title, t.tag`;
        expect(tagged.filter((row) => row.title === 'Pete writes').map((row) => row.tag)).toEqual(['ops']);
        expect(tagged.filter((row) => row.title === 'Third').map((row) => row.tag)).toEqual(['misc']);
      } finally {
        await admin.end();
      }
    } finally {
      await serve.close();
    }
  });

  it('refuses a merge that would give a username to two users, and writes nothing', async () => {
    const other = await startTestServe({ store: { kind: 'postgres', url: database.url, poolSize: 2 } });
    await call(other.url, 'POST', '/api/v2/users', { username: 'olga', email: 'another-olga@example.com', password: 'another-password' });
    await other.close();
    const before = await counts();
    const result = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url, '--merge']);
    expect(result.code).toBe(1);
    expect(plain(result.stderr)).toContain('users: 1 row in conflict (id 1: its username "olga" belongs to a different row of the target');
    expect(await counts()).toEqual(before);
  });

  it('a second copy checks content: a post edited since in PostgreSQL makes it refuse, naming the row, and the edit stays', async () => {
    expect((await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url])).code).toBe(0);
    const again = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url, '--json']);
    expect(again.code, again.stderr).toBe(0);
    for (const table of JSON.parse(again.stdout).tables) expect(table, table.table).toMatchObject({ copied: 0, verified: true });

    const admin = adminSql(database.url);
    await admin.unsafe("UPDATE posts SET title = 'Edited on PostgreSQL' WHERE id = 1");
    await admin.end();
    const result = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url]);
    expect(result.code).toBe(1);
    expect(plain(result.stderr)).toContain('posts: 1 row in conflict (id 1: the target holds it with other title)');
    expect(plain(result.stderr)).not.toContain('verified');
    const check = adminSql(database.url);
    expect((await check.unsafe<{ title: string }>('SELECT title FROM posts WHERE id = 1'))[0]!.title).toBe('Edited on PostgreSQL');
    await check.end();
  });

  it("rolls a copy back when the count of users did not follow it (its trigger turned off), so that ListUsers' total cannot drift", async () => {
    expect((await sb.run(['db', 'migrate', '--database', database.url])).code).toBe(0);
    const admin = adminSql(database.url);
    await admin.unsafe('ALTER TABLE users DISABLE TRIGGER users_counted_on_insert');
    await admin.end();
    const result = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url]);
    expect(result.code).toBe(1);
    expect(plain(result.stderr)).toContain('the copy did not verify, so it was rolled back: counters: the count of users went from 0 to 0 for 2 users written');
    expect((await counts()).users).toBe(0);
  });

  it('completes a copy that holds part of this data dir, and says what was already there', async () => {
    expect((await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url])).code).toBe(0);
    // What an interrupted copy of an earlier version left: the users and tokens, no posts yet.
    const admin = adminSql(database.url);
    await admin.unsafe('DELETE FROM post_tags');
    await admin.unsafe('DELETE FROM posts');
    await admin.end();
    const result = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url, '--json']);
    expect(result.code, result.stderr).toBe(0);
    const byTable = Object.fromEntries(JSON.parse(result.stdout).tables.map((t: { table: string }) => [t.table, t]));
    expect(byTable.users).toMatchObject({ copied: 0, alreadyThere: 2, verified: true });
    expect(byTable.posts).toMatchObject({ copied: 3, alreadyThere: 0, verified: true });
    expect(byTable.post_tags).toMatchObject({ copied: 4, verified: true });
  });
});
