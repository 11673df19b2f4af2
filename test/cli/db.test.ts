/**
 * `miniapp db status | migrate | copy` against a real PostgreSQL and a SQLite
 * data dir that a real `serve` filled.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FormData, request } from 'undici';
import { join } from 'node:path';
import postgres from 'postgres';
import { Sandbox } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { startServe, type RunningServe } from '../../src/server/serve.js';
import { png } from '../helpers/images.js';

let sb: Sandbox;
let database: TestDatabase;

beforeEach(async () => {
  sb = new Sandbox();
  database = await createTestDatabase();
});
afterEach(async () => {
  sb.dispose();
  await database.drop();
});

describe('miniapp db status and migrate', () => {
  it('migrates an empty PostgreSQL and says it is up to date', async () => {
    const before = await sb.run(['db', 'status', '--database', database.url, '--json']);
    // status itself opens (and so migrates) the store: what it reports is the state after opening.
    expect(before.code, before.stderr).toBe(0);
    const migrate = await sb.run(['db', 'migrate', '--database', database.url]);
    expect(migrate.code, migrate.stderr).toBe(0);
    expect(migrate.stderr).toContain('up to date');
    const status = JSON.parse((await sb.run(['db', 'status', '--database', database.url, '--json'])).stdout);
    expect(status.pending).toBe(0);
    expect(status.migrations.every((m: { applied: boolean }) => m.applied)).toBe(true);
    expect(status.database).not.toContain('miniapp-tests');
  });

  it('reads the URL from MINIAPP_DATABASE_URL, and reports a SQLite data dir that serve has not created', async () => {
    const fromEnv = await sb.run(['db', 'status'], { env: { MINIAPP_DATABASE_URL: database.url } });
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
    const none = await sb.run(['db', 'status']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no database at');
  });

  it('refuses a URL that is not PostgreSQL, without echoing it', async () => {
    const result = await sb.run(['db', 'status', '--database', 'mysql://root:hunter2@db/x']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('postgres://');
    expect(result.stderr).not.toContain('hunter2');
  });
});

describe('miniapp db copy', () => {
  let dataDir: string;
  let running: RunningServe;
  let userToken: string;
  let holder: Sandbox;

  beforeAll(async () => {
    holder = new Sandbox();
    dataDir = join(holder.root, 'data');
    running = await startServe({
      host: '127.0.0.1',
      port: 0,
      store: { kind: 'sqlite', dataDir },
      decrypt: {},
      logger: false,
      version: 'test',
      now: () => new Date(),
      grpc: false,
      hashCost: 10,
      // A receiver nobody listens on: the delivery stays pending, to be copied.
      webhooks: { urls: ['http://127.0.0.1:1/hook'], secret: 's3cret' },
    });
    const call = async (method: string, path: string, json?: unknown, token?: string, form?: FormData) => {
      const response = await request(`${running.url}${path}`, {
        method: method as 'POST',
        headers: { ...(json === undefined ? {} : { 'content-type': 'application/json' }), ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: form ?? (json === undefined ? undefined : JSON.stringify(json)),
      });
      const text = await response.body.text();
      return { status: response.statusCode, body: text ? JSON.parse(text) : undefined };
    };
    for (const name of ['olga', 'oscar']) await call('POST', '/api/users', { username: name, email: `${name}@example.com`, password: `${name}-password` });
    userToken = (await call('POST', '/api/v2/auth/login', { email: 'olga@example.com', password: 'olga-password' })).body.access_token;
    await call('POST', '/api/v2/blog/posts', { title: 'Moving house', content: 'to PostgreSQL', tags: ['Ops', 'db'] }, userToken);
    const form = new FormData();
    form.append('file', new Blob([png(3, 2)], { type: 'image/png' }), 'a.png');
    expect((await call('POST', '/api/v2/upload/image', undefined, userToken, form)).status).toBe(200);
    await call('GET', '/api/auth/unlink-callback?userKey=77&referrer=UNLINK');
    await running.close();
  });
  afterAll(() => holder.dispose());

  it('copies every table, images and the admin token, verifies, and changes nothing the second time', async () => {
    const first = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url, '--json']);
    expect(first.code, first.stderr).toBe(0);
    const report = JSON.parse(first.stdout);
    const byTable = Object.fromEntries(report.tables.map((t: { table: string }) => [t.table, t]));
    expect(byTable.users).toMatchObject({ source: 2, copied: 2, verified: true });
    expect(byTable.posts).toMatchObject({ source: 1, copied: 1, verified: true });
    expect(byTable.post_tags).toMatchObject({ source: 2, copied: 2, verified: true });
    expect(byTable.images).toMatchObject({ source: 1, copied: 1, verified: true });
    expect(byTable.unlink_events).toMatchObject({ source: 1, copied: 1 });
    expect(byTable.webhook_deliveries).toMatchObject({ source: 1, copied: 1 });
    expect(byTable.api_tokens.copied).toBeGreaterThanOrEqual(2);
    expect(report.adminToken).toBe('copied');

    const second = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url, '--json']);
    expect(second.code, second.stderr).toBe(0);
    for (const table of JSON.parse(second.stdout).tables) expect(table, table.table).toMatchObject({ copied: 0, verified: true });

    const sql = postgres(database.url, { max: 1, onnotice: () => undefined });
    try {
      const users = await sql`SELECT username, password_hash, is_active FROM users ORDER BY id`;
      expect(users.map((u) => u.username)).toEqual(['olga', 'oscar']);
      expect(users[0]!.password_hash).toMatch(/^scrypt\$/);
      expect(users[0]!.is_active).toBe(true);
      const tags = await sql`SELECT tag FROM post_tags ORDER BY tag`;
      expect(tags.map((t) => t.tag)).toEqual(['db', 'ops']);
      // New rows get ids after the copied ones.
      const next = await sql`INSERT INTO unlink_events (received_at, user_key, method) VALUES ('now', 1, 'GET') RETURNING id`;
      expect(Number(next[0]!.id)).toBe(2);
    } finally {
      await sql.end();
    }
  });

  it('shows progress on a terminal and a summary', async () => {
    const result = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url], { tty: true });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('every row of');
    expect(result.stdout).toMatch(/users\s+│\s+2/);
  });

  it('says what is missing when the source is not a data dir', async () => {
    const result = await sb.run(['db', 'copy', '--from', join(sb.root, 'nowhere'), '--to', database.url]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('no SQLite database at');
  });
});
