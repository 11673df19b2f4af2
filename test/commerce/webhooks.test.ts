/**
 * order.paid, order.refunded, order.cancelled and payment.refunded as signed webhooks, on
 * both backends: serve's own outbox and dispatcher, a real receiver on
 * 127.0.0.1 that checks every signature as post.created's receivers do.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { IncomingHttpHeaders } from 'node:http';
import { verifySignature } from '../../src/webhooks/signature.js';
import { startTestServe } from '../helpers/serve.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { BACKENDS } from '../helpers/postgres.js';
import { useBackendStore } from '../helpers/backend-store.js';
import { CommerceClients } from '../helpers/commerce-client.js';
import type { RunningServe } from '../../src/server/serve.js';

const SECRET = 'whsec-commerce';

describe.each(BACKENDS)('commerce webhooks on %s', (backend) => {
  const store = useBackendStore(backend);
  let receiver: WebhookReceiver;
  let received: WebhookReceiver['received'];
  let running: RunningServe;
  let c: CommerceClients;

  beforeEach(async () => {
    receiver = await startWebhookReceiver();
    received = receiver.received;
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

  async function events(count: number): Promise<{ event: string; data: any; headers: IncomingHttpHeaders; valid: boolean }[]> {
    for (let i = 0; i < 500 && received.length < count; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    // In the order they were enqueued (the delivery ids), whatever order the sends overlapped in.
    const rows = await running.commerce.sql.all<{ id: number; delivery_key: string }>('SELECT id, delivery_key FROM webhook_deliveries');
    const idOf = new Map(rows.map((row) => [row.delivery_key, Number(row.id)]));
    const ordered = [...received].sort((x, y) => idOf.get(String(x.headers['x-webhook-delivery']))! - idOf.get(String(y.headers['x-webhook-delivery']))!);
    return ordered.map((r) => {
      const payload = JSON.parse(r.body);
      return { event: payload.event, data: payload.data, headers: r.headers, valid: verifySignature(r.body, SECRET, String(r.headers['x-webhook-signature'])) };
    });
  }

  it('paying, refunding and cancelling send order.paid, payment.refunded, order.refunded and order.cancelled, signed', async () => {
    await c.call('inventory', 'SetStock', { sku: 'LAMP', quantity: 3, price: 30000, has_price: true });
    const order = await c.call('order', 'CreateOrder', { items: [{ sku: 'LAMP', quantity: 1 }], idempotency_key: 'o1' });
    const { payment } = await c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: 'p1' });
    await c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 10000, reason: 'scratched', idempotency_key: 'r1' });
    await c.call('order', 'CancelOrder', { order_id: order.id, reason: 'returned' });
    // A declined payment and a retried refund send nothing more.
    const declined = await c.call('order', 'CreateOrder', { items: [{ sku: 'LAMP', quantity: 1 }], idempotency_key: 'o2' });
    await c.call('order', 'ProcessPayment', { order_id: declined.id, method: 'test_decline_card_declined', idempotency_key: 'p2' });
    await c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 10000, reason: 'scratched', idempotency_key: 'r1' });

    // The cancel refunds the rest: the order is REFUNDED (order.refunded) before it is CANCELLED.
    const got = await events(5);
    expect(got.map((e) => e.event)).toEqual(['order.paid', 'payment.refunded', 'payment.refunded', 'order.refunded', 'order.cancelled']);
    expect(got.every((e) => e.valid)).toBe(true);
    expect(got.map((e) => e.headers['x-webhook-event'])).toEqual(['order.paid', 'payment.refunded', 'payment.refunded', 'order.refunded', 'order.cancelled']);
    expect(got[0]!.data).toMatchObject({ id: order.id, status: 'PAID', totalAmount: 30000, currency: 'KRW' });
    expect(got[1]!.data).toMatchObject({
      payment: { id: payment.id, status: 'PARTIAL_CANCELED', balance: 20000 },
      refund: { amount: 10000, reason: 'scratched' },
    });
    expect(got[2]!.data).toMatchObject({ payment: { status: 'CANCELED', balance: 0 }, refund: { amount: 20000, reason: 'order cancelled: returned' } });
    expect(got[3]!.data).toMatchObject({ id: order.id, status: 'REFUNDED' });
    expect(got[4]!.data).toMatchObject({ id: order.id, status: 'CANCELLED', cancelReason: 'returned' });
    expect(new Set(got.map((e) => e.headers['x-webhook-delivery'])).size).toBe(5);
    // Nothing else was enqueued, so nothing else will arrive.
    expect(Number((await running.commerce.sql.one<{ n: number }>('SELECT COUNT(*) AS n FROM webhook_deliveries'))!.n)).toBe(5);
    expect(received).toHaveLength(5);
  });
});
