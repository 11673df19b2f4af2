/**
 * Two instances of `miniapp serve`, A and B, on one PostgreSQL (issue 13):
 * the stock is safe by the database alone. 100 concurrent orders of one unit
 * for a SKU with 10 in stock, sent to both instances, give exactly 10 PAID
 * and 90 FAILED_PRECONDITION, and the stock ends at 0, never below.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startTestServe } from '../helpers/serve.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { CommerceClients } from '../helpers/commerce-client.js';
import type { RunningServe } from '../../src/server/serve.js';

let database: TestDatabase;
let instances: RunningServe[] = [];
let clients: CommerceClients[] = [];

beforeEach(async () => {
  database = await createTestDatabase();
  const store = { kind: 'postgres' as const, url: database.url, poolSize: 5 };
  instances = await Promise.all([0, 1].map(() => startTestServe({ store, grpc: { host: '127.0.0.1', port: 0 }, commerceSweepMs: 0 })));
  clients = instances.map((running) => new CommerceClients(running));
});
afterEach(async () => {
  for (const c of clients) c.close();
  for (const running of instances) await running.close();
  await database.drop();
});

describe('two instances on one PostgreSQL', () => {
  it('100 concurrent one-unit orders over both instances for a SKU with 10 in stock: exactly 10 PAID, 90 FAILED_PRECONDITION, stock 0', async () => {
    const [a, b] = clients as [CommerceClients, CommerceClients];
    await a.call('inventory', 'SetStock', { sku: 'MUG', quantity: 10, price: 12000, has_price: true });
    // The stock never goes below zero while the orders run: a watcher on the side reads it all along.
    let lowest = Infinity;
    let running = true;
    const watcher = (async () => {
      while (running) {
        const level = (await b.call('inventory', 'CheckStock', { skus: ['MUG'] })).items[0];
        lowest = Math.min(lowest, Number(level.available), Number(level.on_hand));
      }
    })();
    const results = await Promise.allSettled(
      Array.from({ length: 100 }, async (_, i) => {
        const c = i % 2 === 0 ? a : b;
        const order = await c.call('order', 'CreateOrder', { items: [{ sku: 'MUG', quantity: 1 }], idempotency_key: `order-${i}` });
        // Paid through the other instance than the one that took the order.
        return (i % 2 === 0 ? b : a).call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: `pay-${i}` });
      }),
    );
    running = false;
    await watcher;
    const paid = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(paid).toHaveLength(10);
    expect(refused.map((r) => r.reason.code)).toEqual(Array(90).fill(9));
    expect(paid.every((r) => (r as PromiseFulfilledResult<any>).value.payment.status === 'DONE')).toBe(true);
    expect((await a.call('inventory', 'CheckStock', { skus: ['MUG'] })).items[0]).toMatchObject({ on_hand: '0', reserved: '0', available: '0' });
    expect(lowest).toBeGreaterThanOrEqual(0);
    const orders = await b.call('order', 'ListOrders', { page_size: 100 });
    expect(orders.orders.map((o: any) => o.status)).toEqual(Array(10).fill('PAID'));
  });
});
