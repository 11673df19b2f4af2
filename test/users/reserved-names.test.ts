/**
 * Issue 39, item 9, through serve's real doors (the blog's HTTP API with
 * undici, the user service with grpc-js), on both backends: the names the
 * system goes by (admin, administrator, root, system, miniapp, in any case
 * or width) cannot be taken at sign-up or by a rename, by anyone; an
 * account that holds one from before still loads and keeps it; and the
 * admin token's posts say so (author_is_admin), which no account's can.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import { collect, failure, login, newUser, unary, UserClients, type AnyClient } from '../helpers/user-client.js';
import { useBackendStore } from '../helpers/backend-store.js';
import { adminSql, migrateUpTo } from '../helpers/pg-admin.js';
import { BACKENDS, useFileDatabase } from '../helpers/postgres.js';
import { startTestServe } from '../helpers/serve.js';
import { DATABASE_FILE, MIGRATIONS } from '../../src/store/database.js';
import type { StoreLocation } from '../../src/store/store.js';

const RESERVED = ['admin', 'Admin', 'ADMIN', '\uFF21\uFF24\uFF2D\uFF29\uFF2E', 'administrator', 'Root', 'system', 'MiniApp'];

describe.each(BACKENDS)('reserved usernames on %s', (backend) => {
  let dataDir = '';
  const store = useBackendStore(backend, () => ({ kind: 'sqlite', dataDir }));
  let serve: UserClients;
  let c: AnyClient;

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'miniapp-reserved-'));
    serve = await UserClients.start(store.location());
    c = serve.client();
  });
  afterEach(async () => {
    await serve.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  async function http(method: string, path: string, json?: unknown, token?: string) {
    const headers: Record<string, string> = {};
    if (json !== undefined) headers['content-type'] = 'application/json';
    if (token) headers.authorization = `Bearer ${token}`;
    const response = await request(`${serve.running.url}${path}`, {
      method: method as 'GET',
      headers,
      body: json === undefined ? undefined : JSON.stringify(json),
    });
    return { status: response.statusCode, body: (await response.body.json()) as any };
  }

  /** A stored username changed from outside serve: an account that took the name before it was reserved. */
  async function renameInDatabase(id: string, username: string) {
    if (backend === 'postgres') {
      const admin = adminSql(store.url);
      await admin`UPDATE users SET username = ${username} WHERE id = ${Number(id)}`;
      await admin.end();
      return;
    }
    const db = new Database(serve.running.databaseFile!);
    db.prepare('UPDATE users SET username = ? WHERE id = ?').run(username, Number(id));
    db.close();
  }

  function sync(metadata: grpc.Metadata, requests: unknown[]): Promise<any[]> {
    const call = c.SyncUsers(metadata) as grpc.ClientDuplexStream<any, any>;
    const answers = collect(call);
    for (const r of requests) call.write(r);
    call.end();
    return answers;
  }

  it('refuses them at sign-up: POST /users (v1, v2) 400 naming username, CreateUser, BulkCreateUsers and SyncUsers INVALID_ARGUMENT, admin token included', async () => {
    for (const username of RESERVED) {
      for (const path of ['/api/users', '/api/v1/users']) {
        const res = await http('POST', path, { username, email: `${path.length}${username.length}x@example.com`, password: 'password123' });
        expect(res.status, `${path} ${username}`).toBe(400);
        expect(res.body).toMatchObject({ code: 'VALIDATION_ERROR', error: 'Validation Error' });
        expect(Object.keys(res.body.detail)).toEqual(['username']);
        expect(res.body.detail.username[0]).toContain('is reserved');
      }
      for (const metadata of [new grpc.Metadata(), serve.auth()]) {
        const refused = await failure(unary(c, 'CreateUser', newUser('x', { username }), metadata));
        expect(refused, username).toMatchObject({ code: 'INVALID_ARGUMENT', details: expect.stringContaining(`username "${username}" is reserved`) });
      }
    }
    const bulk = await new Promise<any>((resolve, reject) => {
      const call = c.BulkCreateUsers(serve.auth(), (error: grpc.ServiceError | null, response: unknown) => (error ? reject(error) : resolve(response)));
      call.write(newUser('ok'));
      call.write(newUser('root', { username: 'root' }));
      call.end();
    });
    expect(bulk.created_count).toBe(1);
    expect(bulk.failures).toEqual([{ index: 1, status: 'INVALID_ARGUMENT', message: expect.stringContaining('username "root" is reserved') }]);
    const [created] = await sync(serve.auth(), [
      {
        client_ref: 'new',
        upsert: { user: { id: '0', username: 'System', email: 'sys@example.com', full_name: '', is_active: true, roles: [] }, password: 'password123' },
      },
    ]);
    expect(created).toMatchObject({ client_ref: 'new', failure: { status: 'INVALID_ARGUMENT', message: expect.stringContaining('is reserved') } });
    // Nothing reserved was stored.
    const all = await collect(c.ListUsers({ page: 1, page_size: 100, filter: '' }, serve.auth()));
    expect(all.map((u) => u.username)).toEqual(['userok']);
  });

  it('refuses a rename to one: UpdateUser (own or by the admin) and SyncUsers upserts INVALID_ARGUMENT, the name unchanged', async () => {
    const alice = (await unary(c, 'CreateUser', newUser('alice'))).user;
    const aliceAuth = serve.auth(await login(serve.running, 'useralice'));
    for (const metadata of [aliceAuth, serve.auth()]) {
      for (const username of RESERVED) {
        const masked = await failure(unary(c, 'UpdateUser', { user_id: alice.id, user: { username }, update_mask: { paths: ['username'] } }, metadata));
        expect(masked).toMatchObject({ code: 'INVALID_ARGUMENT', details: expect.stringContaining('is reserved') });
        // Without a mask the non-empty fields replace the stored ones.
        expect((await failure(unary(c, 'UpdateUser', { user_id: alice.id, user: { username } }, metadata)))?.code).toBe('INVALID_ARGUMENT');
      }
      const [renamed] = await sync(metadata, [{ client_ref: 'r', upsert: { user: { ...alice, username: 'administrator' }, password: '' } }]);
      expect(renamed).toMatchObject({ failure: { status: 'INVALID_ARGUMENT', message: expect.stringContaining('username "administrator" is reserved') } });
    }
    expect((await unary(c, 'GetUser', { user_id: alice.id }, serve.auth())).username).toBe('useralice');
    // Other renames go through.
    expect(
      (await unary(c, 'UpdateUser', { user_id: alice.id, user: { username: 'admins-friend' }, update_mask: { paths: ['username'] } }, aliceAuth)).username,
    ).toBe('admins-friend');
  });

  it("keeps an account that holds one from before; the admin token's posts alone carry author_is_admin, and ?author=admin lists them alone", async () => {
    const legacy = (await unary(c, 'CreateUser', newUser('legacy'))).user;
    await renameInDatabase(legacy.id, 'admin');
    // It loads, logs in, and may keep its name through a whole replacement.
    expect((await unary(c, 'GetUser', { user_id: legacy.id }, serve.auth())).username).toBe('admin');
    const legacyToken = await login(serve.running, 'admin');
    const kept = await unary(
      c,
      'UpdateUser',
      { user_id: legacy.id, user: { ...legacy, username: 'admin', full_name: 'Still me' }, update_mask: { paths: ['username', 'full_name'] } },
      serve.auth(legacyToken),
    );
    expect(kept).toMatchObject({ username: 'admin', full_name: 'Still me' });
    const [synced] = await sync(serve.auth(legacyToken), [{ client_ref: 's', upsert: { user: { ...kept, full_name: 'Synced' }, password: '' } }]);
    expect(synced.user).toMatchObject({ username: 'admin', full_name: 'Synced' });
    // ... but not respelled as another reserved form.
    expect(
      (
        await failure(
          unary(c, 'UpdateUser', { user_id: legacy.id, user: { username: 'Admin' }, update_mask: { paths: ['username'] } }, serve.auth(legacyToken)),
        )
      )?.code,
    ).toBe('INVALID_ARGUMENT');

    const byAdmin = await http('POST', '/api/v2/blog/posts', { title: 'From the system', content: 'Maintenance tonight.' }, serve.running.adminToken);
    const byAccount = await http('POST', '/api/v2/blog/posts', { title: 'From an account', content: 'Send me your password.' }, legacyToken);
    expect([byAdmin.status, byAccount.status]).toEqual([201, 201]);
    expect(byAdmin.body).toMatchObject({ author: 'admin', author_is_admin: true });
    expect(byAccount.body).toMatchObject({ author: 'admin', author_is_admin: false });
    const bob = await (async () => {
      await unary(c, 'CreateUser', newUser('bob'));
      return login(serve.running, 'userbob');
    })();
    expect((await http('POST', '/api/v1/blog/posts', { title: 'From bob', content: 'Hi.' }, bob)).body).toMatchObject({
      author: 'userbob',
      author_is_admin: false,
    });

    const check = async () => {
      for (const mount of ['/api/v1', '/api/v2']) {
        expect((await http('GET', `${mount}/blog/posts/${byAdmin.body.id}`)).body).toMatchObject({ author: 'admin', author_is_admin: true });
        expect((await http('GET', `${mount}/blog/posts/${byAccount.body.id}`)).body).toMatchObject({ author: 'admin', author_is_admin: false });
      }
      const v1 = (await http('GET', '/api/v1/blog/posts')).body as any[];
      expect(v1.map((p) => [p.title, p.author_is_admin])).toEqual([
        ['From bob', false],
        ['From an account', false],
        ['From the system', true],
      ]);
      for (const author of ['admin', 'ADMIN', encodeURIComponent('\uFF41\uFF44\uFF4D\uFF49\uFF4E')]) {
        const listed = await http('GET', `/api/v2/blog/posts?author=${author}`);
        expect(
          listed.body.results.map((p: any) => p.title),
          author,
        ).toEqual(['From the system']);
        expect(listed.body.count).toBe(1);
      }
      expect((await http('GET', '/api/v2/blog/posts?author=userbob')).body.results.map((p: any) => p.title)).toEqual(['From bob']);
    };
    await check();
    // Deleted, the account's posts lose their author_id: they still do not pass for the admin's.
    await unary(c, 'DeleteUser', { user_id: legacy.id }, serve.auth());
    await check();
  });
});

describe.each(BACKENDS)('posts written before author_is_admin, on %s', (backend) => {
  const files = useFileDatabase();
  let dataDir = '';
  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'miniapp-author-kind-'));
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  it("are the admin's when the admin token wrote them (no author_id, author admin), an account's otherwise, once serve has migrated", async () => {
    const at = '2026-01-01T00:00:00.000Z';
    const setup = [
      `INSERT INTO users (username, email, full_name, is_active, roles, password_hash, created_at, updated_at) VALUES ('admin', 'old@example.com', '', ${backend === 'postgres' ? 'TRUE' : '1'}, '[]', 'x', '${at}', '${at}')`,
      ...[
        ['by the admin token', 'NULL', 'admin'],
        ['by the account named admin', '1', 'admin'],
        ['by an account deleted since', 'NULL', 'gone'],
      ].map(
        ([title, authorId, author], i) =>
          `INSERT INTO posts (title, content, author_id, author, tags, is_published, created_at, updated_at, published_at) VALUES ('${title}', 'x', ${authorId}, '${author}', '[]', ${backend === 'postgres' ? 'TRUE' : '1'}, '2026-01-0${i + 1}T00:00:00.000Z', '${at}', '${at}')`,
      ),
    ];
    let store: StoreLocation;
    if (backend === 'postgres') {
      await migrateUpTo(files.admin, 12);
      for (const statement of setup) await files.admin.unsafe(statement);
      store = { kind: 'postgres', url: files.url, poolSize: 2 };
    } else {
      const db = new Database(join(dataDir, DATABASE_FILE));
      for (const m of MIGRATIONS.filter((m) => m.version <= 15)) {
        db.exec(m.sql);
        db.pragma(`user_version = ${m.version}`);
      }
      for (const statement of setup) db.exec(statement);
      db.close();
      store = { kind: 'sqlite', dataDir };
    }
    const running = await startTestServe({ store });
    try {
      const answer = await request(`${running.url}/api/v2/blog/posts?sort=created_at`);
      const body = (await answer.body.json()) as any;
      expect(body.results.map((p: any) => [p.title, p.author, p.author_is_admin])).toEqual([
        ['by the admin token', 'admin', true],
        ['by the account named admin', 'admin', false],
        ['by an account deleted since', 'gone', false],
      ]);
      const one = await request(`${running.url}/api/v2/blog/posts/${body.results[0].id}`);
      expect(await one.body.json()).toEqual(body.results[0]);
      const listed = await request(`${running.url}/api/v2/blog/posts?author=admin`);
      expect(((await listed.body.json()) as any).results.map((p: any) => p.title)).toEqual(['by the admin token']);
    } finally {
      await running.close();
    }
  });
});
