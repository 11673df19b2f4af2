/**
 * RefundPayment is the merchant's act (Stripe's rule), through grpc-js
 * against a running serve on both backends: a user token is
 * PERMISSION_DENIED, for its own payment as for another's, and nothing
 * moves (payment, order, provider, outbox); the admin's refunds move the
 * order to PARTIALLY_REFUNDED, then REFUNDED once the payment is refunded in
 * full (in one refund or several), with an order.refunded webhook delivered
 * and signed as the others; a refund above the balance is refused precisely;
 * a REFUNDED order is still cancelled (units back on hand, nothing refunded
 * twice); and a database made before these states keeps its orders.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { verifySignature } from '../../src/webhooks/signature.js';
import { databasePath, MIGRATIONS } from '../../src/store/database.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres-schema.js';
import { openStore, type StoreLocation } from '../../src/store/store.js';
import { startTestServe } from '../helpers/serve.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { BACKENDS, createTestDatabase } from '../helpers/postgres.js';
import { useBackendStore } from '../helpers/backend-store.js';
import { adminSql, migrateUpTo } from '../helpers/pg-admin.js';
import { CommerceClients, refused } from '../helpers/commerce-client.js';
import type { RunningServe } from '../../src/server/serve.js';

const SECRET = 'whsec-refunds';
const NEEDS_ADMIN = "refunds need the admin token: a refund is the merchant's act, not the buyer's (ask the shop to refund)";

describe.each(BACKENDS)('RefundPayment on %s', (backend) => {
  const store = useBackendStore(backend);
  let receiver: WebhookReceiver;
  let running: RunningServe;
  let c: CommerceClients;

  beforeEach(async () => {
    receiver = await startWebhookReceiver();
    running = await startTestServe({
      store: store.location(),
      grpc: { host: '127.0.0.1', port: 0 },
      webhooks: { urls: [receiver.url], secret: SECRET },
      commerceSweepMs: 0,
    });
    c = new CommerceClients(running);
  });
  afterEach(async () => {
    c.close();
    await running.close();
    await receiver.close();
  });

  const count = async (table: string) => Number((await running.commerce.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))!.n);

  /** A PAID order of `token`'s user (the admin's without one) for 30,000 KRW, and its payment. */
  async function paidOrder(key: string, token?: string): Promise<{ order: any; payment: any }> {
    const order = await c.call('order', 'CreateOrder', { items: [{ sku: 'LAMP', quantity: 1 }], idempotency_key: `o-${key}` }, token);
    const { payment } = await c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: `p-${key}` }, token);
    expect(payment.status).toBe('DONE');
    return { order: await c.call('order', 'GetOrder', { order_id: order.id }, token), payment };
  }

  /** The webhooks received, in the order they were enqueued, once `n` have arrived. */
  async function events(n: number): Promise<{ event: string; data: any; valid: boolean }[]> {
    for (let i = 0; i < 500 && receiver.received.length < n; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    const rows = await running.commerce.sql.all<{ id: number; delivery_key: string }>('SELECT id, delivery_key FROM webhook_deliveries');
    const idOf = new Map(rows.map((row) => [row.delivery_key, Number(row.id)]));
    return [...receiver.received]
      .sort((x, y) => idOf.get(String(x.headers['x-webhook-delivery']))! - idOf.get(String(y.headers['x-webhook-delivery']))!)
      .map((r) => ({
        event: JSON.parse(r.body).event,
        data: JSON.parse(r.body).data,
        valid: verifySignature(r.body, SECRET, String(r.headers['x-webhook-signature'])),
      }));
  }

  it("a user token is PERMISSION_DENIED, for its own payment and for another's, and nothing changes", async () => {
    await c.call('inventory', 'SetStock', { sku: 'LAMP', quantity: 5, price: 30000, has_price: true });
    const [ann, ben] = [await c.user(1), await c.user(2)];
    const { order, payment } = await paidOrder('ann', ann.token);
    const before = {
      order: await c.call('order', 'GetOrder', { order_id: order.id }),
      payment: await c.call('payment', 'GetPayment', { payment_id: payment.id }),
    };
    const deliveries = await count('webhook_deliveries');

    for (const request of [
      { payment_id: payment.id, amount: 0, reason: 'changed my mind', idempotency_key: 'r1' },
      { payment_id: payment.id, amount: 10000, reason: 'part of it', idempotency_key: 'r2' },
    ]) {
      expect(await refused(c.call('payment', 'RefundPayment', request, ann.token))).toEqual({ code: 'PERMISSION_DENIED', details: NEEDS_ADMIN });
    }
    // Another user's payment, and one that does not exist, are refused alike: a user learns nothing of either.
    expect(await refused(c.call('payment', 'RefundPayment', { payment_id: payment.id, reason: 'x', idempotency_key: 'r3' }, ben.token))).toEqual({
      code: 'PERMISSION_DENIED',
      details: NEEDS_ADMIN,
    });
    expect(await refused(c.call('payment', 'RefundPayment', { payment_id: 'pay_none', reason: 'x', idempotency_key: 'r4' }, ben.token))).toEqual({
      code: 'PERMISSION_DENIED',
      details: NEEDS_ADMIN,
    });

    expect(await c.call('order', 'GetOrder', { order_id: order.id })).toEqual(before.order);
    expect(before.order.status).toBe('PAID');
    expect(await c.call('payment', 'GetPayment', { payment_id: payment.id })).toEqual(before.payment);
    expect(before.payment).toMatchObject({ status: 'DONE', balance: '30000', refunds: [] });
    expect(await count('refunds')).toBe(0);
    expect(await count('sandbox_refunds')).toBe(0);
    expect(await count("idempotency_keys WHERE scope = 'payment.refund'")).toBe(0);
    expect(await count('webhook_deliveries')).toBe(deliveries);

    // Nor through CancelOrder, which would refund the paid order in full: the buyer cancels only what is not paid yet.
    expect(await refused(c.call('order', 'CancelOrder', { order_id: order.id, reason: 'changed my mind' }, ann.token))).toEqual({
      code: 'PERMISSION_DENIED',
      details: `order ${order.id} is PAID: cancelling a paid order refunds it, and refunds need the admin token (ask the shop to cancel it)`,
    });
    expect(await c.call('order', 'GetOrder', { order_id: order.id })).toEqual(before.order);
    expect(await count('refunds')).toBe(0);
    expect(await count('webhook_deliveries')).toBe(deliveries);
    const reserved = await c.call('order', 'CreateOrder', { items: [{ sku: 'LAMP', quantity: 1 }], idempotency_key: 'o-ann-2' }, ann.token);
    expect((await c.call('order', 'CancelOrder', { order_id: reserved.id, reason: 'not yet paid' }, ann.token)).status).toBe('CANCELLED');
  });

  it("the admin's partial refunds make the order PARTIALLY_REFUNDED, then REFUNDED with order.refunded; past the balance is refused", async () => {
    await c.call('inventory', 'SetStock', { sku: 'LAMP', quantity: 5, price: 30000, has_price: true });
    const ann = await c.user(1);
    const { order, payment } = await paidOrder('ann', ann.token);

    const first = await c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 10000, reason: 'scratched', idempotency_key: 'r1' });
    expect(first.payment).toMatchObject({ status: 'PARTIAL_CANCELED', balance: '20000' });
    expect(first.refund).toMatchObject({ amount: '10000', status: 'DONE' });
    // The buyer sees their order's new state.
    expect((await c.call('order', 'GetOrder', { order_id: order.id }, ann.token)).status).toBe('PARTIALLY_REFUNDED');

    expect(await refused(c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 20001, reason: 'too much', idempotency_key: 'r2' }))).toEqual({
      code: 'FAILED_PRECONDITION',
      details: `a refund of 20001 KRW is more than the balance of payment ${payment.id} (20000 KRW)`,
    });
    expect((await c.call('order', 'GetOrder', { order_id: order.id })).status).toBe('PARTIALLY_REFUNDED');

    const rest = await c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 20000, reason: 'returned', idempotency_key: 'r3' });
    expect(rest.payment).toMatchObject({ status: 'CANCELED', balance: '0' });
    const refunded = await c.call('order', 'GetOrder', { order_id: order.id });
    expect(refunded).toMatchObject({ status: 'REFUNDED', paid_at: order.paid_at });
    // The same key again refunds nothing more and sends nothing more.
    expect((await c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 20000, reason: 'returned', idempotency_key: 'r3' })).refund.id).toBe(
      rest.refund.id,
    );
    expect(await refused(c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 0, reason: 'again', idempotency_key: 'r4' }))).toEqual({
      code: 'FAILED_PRECONDITION',
      details: `payment ${payment.id} is CANCELED: only a DONE or PARTIAL_CANCELED payment can be refunded`,
    });
    expect((await c.call('order', 'ListOrders', { status: 'REFUNDED' })).orders.map((o: any) => o.id)).toEqual([order.id]);
    expect((await c.call('order', 'ListOrders', { status: 'PAID' })).orders).toEqual([]);

    const got = await events(4);
    expect(got.map((e) => e.event)).toEqual(['order.paid', 'payment.refunded', 'payment.refunded', 'order.refunded']);
    expect(got.every((e) => e.valid)).toBe(true);
    expect(got[3]!.data).toMatchObject({ id: order.id, userId: ann.id, status: 'REFUNDED', totalAmount: 30000, paymentId: payment.id });
    expect(await count('webhook_deliveries')).toBe(4);
    expect(receiver.received).toHaveLength(4);

    // Counted by status in the metrics.
    const { body } = await running.app.inject({ method: 'GET', url: '/metrics' });
    expect(body).toMatch(/^miniapp_orders\{status="REFUNDED"\} 1$/m);
    expect(body).toMatch(/^miniapp_orders\{status="PARTIALLY_REFUNDED"\} 0$/m);
  });

  it('a full refund at once makes the order REFUNDED; cancelling it then restocks and refunds nothing more', async () => {
    await c.call('inventory', 'SetStock', { sku: 'LAMP', quantity: 5, price: 30000, has_price: true });
    const { order, payment } = await paidOrder('admin');
    await c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 0, reason: 'never arrived', idempotency_key: 'r1' });
    expect((await c.call('order', 'GetOrder', { order_id: order.id })).status).toBe('REFUNDED');
    expect((await c.call('inventory', 'CheckStock', { skus: ['LAMP'] })).items[0]).toMatchObject({ on_hand: '4', available: '4' });

    const cancelled = await c.call('order', 'CancelOrder', { order_id: order.id, reason: 'returned to the shelf' });
    expect(cancelled).toMatchObject({ status: 'CANCELLED', cancel_reason: 'returned to the shelf' });
    expect((await c.call('inventory', 'CheckStock', { skus: ['LAMP'] })).items[0]).toMatchObject({ on_hand: '5', available: '5' });
    expect((await c.call('payment', 'GetPayment', { payment_id: payment.id })).refunds).toHaveLength(1);
    const got = await events(4);
    expect(got.map((e) => e.event)).toEqual(['order.paid', 'payment.refunded', 'order.refunded', 'order.cancelled']);
  });
});

describe('a database made before REFUNDED and PARTIALLY_REFUNDED', () => {
  const ORDER = `INSERT INTO reservations (id, order_id, state, expires_at, created_at, updated_at) VALUES ('res_1', 'ord_1', 'committed', 'x', 'x', 'x');
    INSERT INTO orders (id, user_id, state, currency, total_amount, reservation_id, created_at, updated_at, paid_at) VALUES ('ord_1', NULL, 'PAID', 'KRW', 10, 'res_1', 'a', 'b', 'c');
    INSERT INTO order_items (order_id, position, sku, name, quantity, unit_price, amount) VALUES ('ord_1', 0, 'MUG', 'Mug', 1, 10, 10);`;

  async function keepsItsOrders(location: StoreLocation): Promise<void> {
    const store = await openStore(location);
    try {
      expect(await store.sql.all('SELECT id, state, paid_at FROM orders')).toEqual([{ id: 'ord_1', state: 'PAID', paid_at: 'c' }]);
      expect(await store.sql.all('SELECT order_id, sku FROM order_items')).toEqual([{ order_id: 'ord_1', sku: 'MUG' }]);
      await store.sql.run("UPDATE orders SET state = 'PARTIALLY_REFUNDED'");
      await store.sql.run("UPDATE orders SET state = 'REFUNDED'");
      await expect(store.sql.run("UPDATE orders SET state = 'GONE'")).rejects.toThrow(/check/i);
      // Its items still need their order.
      await expect(
        store.sql.run("INSERT INTO order_items (order_id, position, sku, name, quantity, unit_price, amount) VALUES ('ord_2', 0, 'MUG', 'Mug', 1, 10, 10)"),
      ).rejects.toThrow(/foreign key/i);
    } finally {
      await store.close();
    }
  }

  it('on SQLite keeps its orders and their items, and takes the new states', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'miniapp-refunded-'));
    try {
      const db = new Database(databasePath(dataDir));
      for (const migration of MIGRATIONS.filter((m) => m.version <= 15)) {
        db.exec(migration.sql);
        db.pragma(`user_version = ${migration.version}`);
      }
      db.exec(ORDER);
      db.close();
      await keepsItsOrders({ kind: 'sqlite', dataDir });
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('on PostgreSQL keeps its orders and their items, and takes the new states', async () => {
    const database = await createTestDatabase();
    const admin = adminSql(database.url);
    try {
      await migrateUpTo(admin, POSTGRES_MIGRATIONS.find((m) => m.description.includes('REFUNDED'))!.version - 1);
      await admin.unsafe(ORDER);
      await keepsItsOrders({ kind: 'postgres', url: database.url, poolSize: 2 });
    } finally {
      await admin.end();
      await database.drop();
    }
  });
});
