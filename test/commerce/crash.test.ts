/**
 * `serve` killed with SIGKILL between charging and committing (issue 13): a
 * serve process (test/fixtures/commerce-instance.mjs) whose provider has
 * charged is killed before it records the outcome. After a restart on the
 * same store the order ends PAID exactly once, no stock is lost, and nothing
 * is charged twice, also when the client retries with its key.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { serviceDefinition } from '../../src/grpc/protos.js';
import { unary, type AnyClient } from '../helpers/user-client.js';
import { startTestServe } from '../helpers/serve.js';
import { CommerceClients } from '../helpers/commerce-client.js';
import { BACKENDS, createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import type { StoreLocation } from '../../src/store/store.js';

const INSTANCE = fileURLToPath(new URL('../fixtures/commerce-instance.mjs', import.meta.url));

describe.each(BACKENDS)('a crash between the charge and its commit, on %s', (backend) => {
  let child: ChildProcess | undefined;
  let database: TestDatabase | undefined;
  let dataDir: string | undefined;
  const cleanups: (() => Promise<void> | void)[] = [];

  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await database?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  async function location(): Promise<StoreLocation> {
    if (backend === 'postgres') {
      database = await createTestDatabase();
      return { kind: 'postgres', url: database.url, poolSize: 3 };
    }
    dataDir = mkdtempSync(join(tmpdir(), 'miniapp-crash-'));
    return { kind: 'sqlite', dataDir };
  }

  it('after a restart the order ends PAID exactly once, no stock is lost, nothing is charged twice', async () => {
    const store = await location();
    child = fork(INSTANCE, [JSON.stringify({ store, haltAfterCharge: true })], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const messages: Record<string, any>[] = [];
    child.on('message', (message: Record<string, any>) => messages.push(message));
    const next = async (key: string) => {
      for (let i = 0; i < 1000 && !messages.some((m) => key in m); i++) {
        if (child!.exitCode !== null) throw new Error(`the instance exited: ${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return messages.find((m) => key in m)![key];
    };
    const { address, adminToken } = await next('ready');
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${adminToken}`);
    const client = (name: 'inventory.v1.InventoryService' | 'order.v1.OrderService') => {
      const { Client } = serviceDefinition(name);
      const made = new Client(address, grpc.credentials.createInsecure()) as AnyClient;
      cleanups.push(() => made.close());
      return made;
    };
    const [inventory, orders] = [client('inventory.v1.InventoryService'), client('order.v1.OrderService')];
    await unary(inventory, 'SetStock', { sku: 'DESK', quantity: 5, price: 150000, has_price: true }, metadata);
    const order = await unary(orders, 'CreateOrder', { items: [{ sku: 'DESK', quantity: 2 }], idempotency_key: 'order-1' }, metadata);
    const paying = unary(orders, 'ProcessPayment', { order_id: order.id, idempotency_key: 'pay-1' }, metadata).catch((error: grpc.ServiceError) => error);
    const charged = await next('charged');
    child.kill('SIGKILL');
    await new Promise((resolve) => child!.once('exit', resolve));
    expect(((await paying) as grpc.ServiceError).code).toBe(grpc.status.UNAVAILABLE);

    // The restart reconciles the payment left in progress before it takes any call.
    const running = await startTestServe({ store, grpc: { host: '127.0.0.1', port: 0 }, commerceSweepMs: 0 });
    cleanups.push(() => running.close());
    const c = new CommerceClients(running);
    cleanups.push(() => c.close());
    const count = async (sql: string) => Number((await running.commerce.sql.one<{ n: number }>(sql))!.n);
    const after = await c.call('order', 'GetOrder', { order_id: order.id });
    expect(after).toMatchObject({ status: 'PAID', payment_id: charged });
    expect(await c.call('payment', 'GetPayment', { payment_id: charged })).toMatchObject({ status: 'DONE', amount: '300000', balance: '300000' });
    expect((await c.call('inventory', 'CheckStock', { skus: ['DESK'] })).items[0]).toMatchObject({ on_hand: '3', reserved: '0', available: '3' });
    // The client's retry with its key gets the payment that was made, not a second charge.
    const retried = await c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: 'pay-1' });
    expect(retried.payment).toMatchObject({ id: charged, status: 'DONE' });
    expect(await count('SELECT COUNT(*) AS n FROM sandbox_charges')).toBe(1);
    expect(await count('SELECT COUNT(*) AS n FROM payments')).toBe(1);
    expect(await count("SELECT COUNT(*) AS n FROM stock_movements WHERE sku = 'DESK' AND delta = -2")).toBe(1);
  });
});
