/**
 * `miniapp db status | migrate | copy` against a real PostgreSQL and a SQLite
 * data dir that a real `serve` filled.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FormData, request } from 'undici';
import { join } from 'node:path';
import { adminSql } from '../helpers/pg-admin.js';
import { Sandbox } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/postgres.js';
import type { RunningServe } from '../../src/server/serve.js';
import { png } from '../helpers/images.js';
import { startTestServe } from '../helpers/serve.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { readFileSync } from 'node:fs';
import { openStore } from '../../src/store/store.js';
import { Commerce } from '../../src/commerce/commerce.js';

const ADMIN = { isAdmin: true, userId: null };

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`never saw ${what}`);
}

const database = useTestDatabase();
let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => {
  sb.dispose();
});

describe('miniapp db status and migrate', () => {
  it('reports every migration pending on an empty PostgreSQL without applying any, then migrates it and says it is up to date', async () => {
    const before = await sb.run(['db', 'status', '--database', database.url, '--json']);
    expect(before.code, before.stderr).toBe(0);
    const pending = JSON.parse(before.stdout);
    expect(pending.pending).toBeGreaterThanOrEqual(3);
    expect(pending.migrations.every((m: { applied: boolean }) => !m.applied)).toBe(true);
    const text = await sb.run(['db', 'status', '--database', database.url]);
    expect(text.stderr).toContain(`${pending.pending} migrations to apply (\`miniapp db migrate\`)`);
    // Looking changed nothing: no table of migrations, and the read commands find no database of serve there.
    const sql = adminSql(database.url);
    try {
      expect((await sql`SELECT to_regclass('schema_migrations')::text AS found`)[0]!.found).toBeNull();
    } finally {
      await sql.end();
    }
    const callbacks = await sb.run(['callbacks', 'list', '--database', database.url]);
    expect(callbacks.code, callbacks.stderr).toBe(0);
    expect(callbacks.stderr).toContain('no database at postgres://');
    expect(callbacks.stderr).toContain('has recorded nothing there');
    const migrate = await sb.run(['db', 'migrate', '--database', database.url]);
    expect(migrate.code, migrate.stderr).toBe(0);
    // How many it applied, and which: not the line of a run that applied none.
    const latest = pending.migrations.at(-1).version as number;
    expect(migrate.stderr).toMatch(new RegExp(`: applied ${pending.pending} migrations \\(1-${latest}\\); now at schema ${latest}\\n$`));
    const again = await sb.run(['db', 'migrate', '--database', database.url]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(new RegExp(`is at schema ${latest}, up to date: nothing to apply\\n$`));
    expect(JSON.parse((await sb.run(['db', 'migrate', '--database', database.url, '--json'])).stdout)).toMatchObject({ schema: latest, applied: [] });
    const status = JSON.parse((await sb.run(['db', 'status', '--database', database.url, '--json'])).stdout);
    expect(status.pending).toBe(0);
    expect(status.migrations.every((m: { applied: boolean }) => m.applied)).toBe(true);
    expect(status.database).not.toContain('miniapp-tests');
  });

  it('says how many migrations it applied to a new SQLite data dir, and which', async () => {
    const first = await sb.run(['db', 'migrate', '--json']);
    expect(first.code, first.stderr).toBe(0);
    const made = JSON.parse(first.stdout) as { schema: number; applied: number[] };
    expect(made.applied).toEqual(Array.from({ length: made.schema }, (_, i) => i + 1));
    const again = await sb.run(['db', 'migrate']);
    expect(again.stderr).toContain(`is at schema ${made.schema}, up to date: nothing to apply`);
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
  let receiver: WebhookReceiver;
  let orderId = '';
  let paymentId = '';
  let postUrl: string;
  let imageUrl: string;

  beforeAll(async () => {
    receiver = await startWebhookReceiver(200);
    holder = new Sandbox();
    dataDir = join(holder.root, 'data');
    running = await startTestServe({
      store: { kind: 'sqlite', dataDir },
      // The receiver is down while the data lives in SQLite: the delivery stays pending, to be copied.
      webhooks: { urls: [receiver.url], secret: 's3cret' },
      webhookSend: async () => {
        throw new Error('connection refused');
      },
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
    const created = await call('POST', '/api/v2/blog/posts', { title: 'Moving house', content: 'to PostgreSQL', tags: ['Ops', 'db'] }, userToken);
    postUrl = `/api/v2/blog/posts/${created.body.id}`;
    const form = new FormData();
    form.append('file', new Blob([png(3, 2)], { type: 'image/png' }), 'a.png');
    const uploaded = await call('POST', '/api/v2/upload/image', undefined, userToken, form);
    expect(uploaded.status).toBe(200);
    imageUrl = new URL(uploaded.body.url, running.url).pathname;
    // The one attempt failed; the delivery waits for its next.
    expect((await running.webhooks!.outbox.list()).map((d) => d.state)).toEqual(['pending']);
    await call('GET', '/api/auth/unlink-callback?userKey=77&referrer=UNLINK');
    await running.close();
    // An order paid and partly refunded, written by the commerce services over the same data dir.
    const store = await openStore({ kind: 'sqlite', dataDir });
    const commerce = new Commerce({ sql: store.sql, now: () => new Date(), authenticate: () => Promise.reject(new Error('no calls')), sweepMs: 0 });
    await commerce.inventory.set({ sku: 'MUG', quantity: 5, price: 12000, reason: 'initial count', actor: 'admin' });
    const order = await commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 2 }], key: 'copy-order' });
    const { payment } = await commerce.orders.pay(ADMIN, { orderId: order.id, key: 'copy-pay' });
    await commerce.payments.refund(ADMIN, { paymentId: payment.id, amount: 1000, reason: 'chipped', key: 'copy-refund' });
    [orderId, paymentId] = [order.id, payment.id];
    await store.close();
  });
  afterAll(async () => {
    holder.dispose();
    await receiver.close();
  });

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
    for (const [table, rows] of Object.entries({
      products: 1,
      stock_movements: 2,
      reservations: 1,
      reservation_items: 1,
      orders: 1,
      order_items: 1,
      payments: 1,
      refunds: 1,
      idempotency_keys: 3,
      sandbox_charges: 1,
      sandbox_refunds: 1,
    })) {
      expect(byTable[table], table).toMatchObject({ source: rows, copied: rows, verified: true });
    }
    expect(report.adminToken).toBe('copied');

    const second = await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url, '--json']);
    expect(second.code, second.stderr).toBe(0);
    for (const table of JSON.parse(second.stdout).tables) expect(table, table.table).toMatchObject({ copied: 0, verified: true });

    const sql = adminSql(database.url);
    try {
      const users = await sql`SELECT username, password_hash, is_active FROM users ORDER BY id`;
      expect(users.map((u) => u.username)).toEqual(['olga', 'oscar']);
      expect(users[0]!.password_hash).toMatch(/^scrypt\$/);
      expect(users[0]!.is_active).toBe(true);
      // The triggers counted every copied user once, the second copy none again.
      expect((await sql`SELECT value FROM counters WHERE name = 'users'`).map((row) => Number(row.value))).toEqual([2]);
      const tags = await sql`SELECT tag, is_published, created_at FROM post_tags ORDER BY tag`;
      expect(tags.map((t) => t.tag)).toEqual(['db', 'ops']);
      const [post] = await sql`SELECT is_published, created_at FROM posts`;
      for (const tag of tags)
        expect({ is_published: tag.is_published, created_at: tag.created_at }).toEqual({ is_published: post!.is_published, created_at: post!.created_at });
      // The kept counts of the lists followed the copied rows (store/blog-listing-schema.ts), once, not twice.
      const kept = await sql`SELECT name, value FROM counters WHERE name LIKE 'posts.%' ORDER BY name`;
      expect(kept.map((row) => [row.name, Number(row.value)])).toEqual([
        ['posts.drafts', 0],
        ['posts.published', 1],
      ]);
      const perTag = await sql`SELECT tag, published, drafts FROM tag_counts ORDER BY tag`;
      expect(perTag.map((row) => [row.tag, Number(row.published), Number(row.drafts)])).toEqual([
        ['db', 1, 0],
        ['ops', 1, 0],
      ]);
      // New rows get ids after the copied ones.
      const next = await sql`INSERT INTO unlink_events (received_at, user_key, method) VALUES ('now', 1, 'GET') RETURNING id`;
      expect(Number(next[0]!.id)).toBe(2);
    } finally {
      await sql.end();
    }
  });

  it('leaves a PostgreSQL that serve runs on: old users log in with their old passwords, posts and images are served, the pending delivery goes out', async () => {
    expect((await sb.run(['db', 'copy', '--from', dataDir, '--to', database.url])).code).toBe(0);
    const adminToken = readFileSync(join(dataDir, 'admin-token'), 'utf8').trim();
    // A day later: the delivery's next attempt is due.
    const onPostgres = await startTestServe(
      {
        store: { kind: 'postgres', url: database.url, poolSize: 2 },
        webhooks: { urls: [receiver.url], secret: 's3cret' },
        now: () => new Date(Date.now() + 24 * 3600_000),
      },
      'postgres',
    );
    try {
      expect(onPostgres.adminToken).toBe(adminToken);
      const login = await request(`${onPostgres.url}/api/v2/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'oscar@example.com', password: 'oscar-password' }),
      });
      expect(login.statusCode).toBe(200);
      const token = ((await login.body.json()) as { access_token: string }).access_token;
      const post = await request(`${onPostgres.url}${postUrl}`);
      expect(post.statusCode).toBe(200);
      expect(await post.body.json()).toMatchObject({ title: 'Moving house', author: 'olga', tags: ['Ops', 'db'] });
      const list = await request(`${onPostgres.url}/api/v2/blog/posts?tags=ops`);
      expect(((await list.body.json()) as { results: { title: string }[] }).results.map((p) => p.title)).toEqual(['Moving house']);
      const image = await request(`${onPostgres.url}${imageUrl}`);
      expect(image.statusCode).toBe(200);
      expect(image.headers['content-type']).toBe('image/png');
      expect(Buffer.from(await image.body.arrayBuffer()).equals(png(3, 2))).toBe(true);
      await until(() => receiver.received.length === 1, 'the copied delivery');
      expect(JSON.parse(receiver.received[0]!.body)).toMatchObject({ event: 'post.created', data: { title: 'Moving house' } });
      // A new post by an old user gets an id after the copied ones, and its own delivery.
      const next = await request(`${onPostgres.url}/api/v2/blog/posts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ title: 'Settled in', content: 'on PostgreSQL' }),
      });
      expect(next.statusCode).toBe(201);
      expect(((await next.body.json()) as { id: number }).id).toBeGreaterThan(Number(postUrl.split('/').at(-1)));
      await until(() => receiver.received.length === 2, 'the new delivery');
      expect(JSON.parse(receiver.received[1]!.body)).toMatchObject({ data: { title: 'Settled in', author: 'oscar' } });
      await until(async () => (await onPostgres.webhooks!.outbox.list()).every((d) => d.state === 'delivered'), 'the deliveries recorded');
      // The order, its payment and the stock carry on: the copied key answers the copied payment, a new order takes the rest.
      const { commerce } = onPostgres;
      expect(await commerce.orders.get(ADMIN, orderId)).toMatchObject({ status: 'PARTIALLY_REFUNDED', totalAmount: 24000, paymentId });
      expect(await commerce.payments.get(ADMIN, paymentId)).toMatchObject({ status: 'PARTIAL_CANCELED', balance: 23000 });
      expect((await commerce.orders.pay(ADMIN, { orderId, key: 'copy-pay' })).payment.id).toBe(paymentId);
      const more = await commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 3 }], key: 'after-copy' });
      await commerce.orders.pay(ADMIN, { orderId: more.id, key: 'after-copy-pay' });
      expect((await commerce.inventory.levels(['MUG']))[0]).toMatchObject({ onHand: 0, reserved: 0 });
      expect((await commerce.inventory.movements('MUG', 10)).map((m) => m.id)).toEqual([3, 2, 1]);
    } finally {
      await onPostgres.close();
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
