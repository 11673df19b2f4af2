/**
 * The commerce services through their gRPC port, on both backends: stock
 * that never goes negative under 100 concurrent orders, payments that are
 * charged and refunded once per idempotency key (also after a provider
 * time-out), refunds down to CANCELED, declines, expiry on an injected
 * clock, and who may see what.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startTestServe } from '../helpers/serve.js';
import { BACKENDS } from '../helpers/postgres.js';
import { useBackendStore } from '../helpers/backend-store.js';
import { CommerceClients, refused } from '../helpers/commerce-client.js';
import type { RunningServe } from '../../src/server/serve.js';
import { checkMetrics, parseText } from '../helpers/promlint.js';

const T0 = Date.parse('2026-11-21T12:00:00.000Z');
const MINUTE = 60_000;

describe.each(BACKENDS)('commerce on %s', (backend) => {
  const store = useBackendStore(backend);
  let running: RunningServe;
  let c: CommerceClients;
  let clock: number;

  beforeEach(async () => {
    clock = T0;
    running = await startTestServe({ store: store.location(), grpc: { host: '127.0.0.1', port: 0 }, now: () => new Date(clock), commerceSweepMs: 0 });
    c = new CommerceClients(running);
  });
  afterEach(async () => {
    c.close();
    await running.close();
  });

  const setStock = (sku: string, quantity: number, price = 1000, extra: object = {}) =>
    c.call('inventory', 'SetStock', { sku, quantity, price, has_price: true, reason: 'initial count', ...extra });
  const stock = async (sku: string) => (await c.call('inventory', 'CheckStock', { skus: [sku] })).items[0];
  const count = async (table: string) => Number((await running.commerce.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))!.n);

  it('100 concurrent orders of one unit for a SKU with 10 in stock: exactly 10 PAID, 90 FAILED_PRECONDITION, stock 0', async () => {
    await setStock('MUG', 10, 12000);
    const results = await Promise.allSettled(
      Array.from({ length: 100 }, async (_, i) => {
        const order = await c.call('order', 'CreateOrder', { items: [{ sku: 'MUG', quantity: 1 }], idempotency_key: `order-${i}` });
        const paid = await c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: `pay-${i}` });
        return { order, paid };
      }),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(ok).toHaveLength(10);
    expect(failed).toHaveLength(90);
    for (const f of failed) {
      expect(f.reason.code).toBe(9); // FAILED_PRECONDITION
      expect(f.reason.details).toContain('MUG (asked 1, available 0)');
    }
    for (const r of ok) expect((r as PromiseFulfilledResult<any>).value.paid.payment.status).toBe('DONE');
    const listed = await c.call('order', 'ListOrders', { page_size: 100 });
    expect(listed.orders.filter((o: any) => o.status === 'PAID')).toHaveLength(10);
    expect(listed.orders).toHaveLength(10);
    expect(await stock('MUG')).toMatchObject({ on_hand: '0', reserved: '0', available: '0' });
    const ledger = await c.call('inventory', 'ListStockMovements', { sku: 'MUG', page_size: 100 });
    expect(ledger.movements).toHaveLength(11);
    expect(ledger.movements.at(-1)).toMatchObject({ delta: '10', on_hand: '10', reason: 'initial count', actor: 'admin' });
    expect(ledger.movements.slice(0, 10).every((m: any) => m.delta === '-1' && m.actor === 'system')).toBe(true);
  });

  it('an order is priced from the catalogue, reserved, paid (PAID, units committed) and named SKUs that are short are listed', async () => {
    await setStock('TEA', 5, 4500);
    await setStock('CUP', 1, 3000);
    const short = await refused(
      c.call('order', 'CreateOrder', {
        items: [
          { sku: 'TEA', quantity: 6 },
          { sku: 'CUP', quantity: 2 },
        ],
        idempotency_key: 'k-short',
      }),
    );
    expect(short).toEqual({ code: 'FAILED_PRECONDITION', details: 'not enough stock: CUP (asked 2, available 1), TEA (asked 6, available 5)' });
    expect(await stock('TEA')).toMatchObject({ reserved: '0', available: '5' });

    const order = await c.call('order', 'CreateOrder', {
      items: [
        { sku: 'TEA', quantity: 2 },
        { sku: 'CUP', quantity: 1 },
      ],
      idempotency_key: 'k1',
    });
    expect(order).toMatchObject({ status: 'RESERVED', total_amount: '12000', currency: 'KRW', user_id: '0', payment_id: '' });
    expect(order.items).toEqual([
      { sku: 'TEA', name: 'TEA', quantity: '2', unit_price: '4500', amount: '9000' },
      { sku: 'CUP', name: 'CUP', quantity: '1', unit_price: '3000', amount: '3000' },
    ]);
    expect(Number(order.reservation_expires_at.seconds) * 1000).toBe(T0 + 15 * MINUTE);
    expect(await stock('TEA')).toMatchObject({ on_hand: '5', reserved: '2', available: '3' });
    // The same key and items: the stored order, nothing reserved twice; other items: refused.
    expect(
      (
        await c.call('order', 'CreateOrder', {
          items: [
            { sku: 'CUP', quantity: 1 },
            { sku: 'TEA', quantity: 2 },
          ],
          idempotency_key: 'k1',
        })
      ).id,
    ).toBe(order.id);
    expect(await stock('TEA')).toMatchObject({ reserved: '2' });
    const other = await refused(c.call('order', 'CreateOrder', { items: [{ sku: 'TEA', quantity: 1 }], idempotency_key: 'k1' }));
    expect(other.code).toBe('FAILED_PRECONDITION');
    expect(other.details).toContain('was used with a different CreateOrder request');

    expect((await refused(c.call('order', 'ProcessPayment', { order_id: order.id, amount: 1, idempotency_key: 'p0' }))).details).toContain(
      "is not the order's total 12000",
    );
    const paid = await c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: 'p1' });
    expect(paid.payment).toMatchObject({ status: 'DONE', amount: '12000', balance: '12000', method: 'test_approve', provider: 'sandbox', order_id: order.id });
    expect(await c.call('order', 'GetOrder', { order_id: order.id })).toMatchObject({ status: 'PAID', payment_id: paid.payment.id });
    expect(await stock('TEA')).toMatchObject({ on_hand: '3', reserved: '0', available: '3' });
    expect(await stock('CUP')).toMatchObject({ on_hand: '0', reserved: '0' });
    const again = await refused(c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: 'p2' }));
    expect(again).toEqual({ code: 'FAILED_PRECONDITION', details: `order ${order.id} is PAID: only a RESERVED order can be paid` });
  });

  it('a ProcessPayment retried with its key after a provider time-out charges once; a reused key with another amount is FAILED_PRECONDITION', async () => {
    await setStock('LAMP', 3, 25000);
    const order = await c.call('order', 'CreateOrder', { items: [{ sku: 'LAMP', quantity: 1 }], idempotency_key: 'o1' });
    const first = await c.call('order', 'ProcessPayment', { order_id: order.id, method: 'test_timeout', idempotency_key: 'pay-1' });
    expect(first.payment.status).toBe('IN_PROGRESS');
    expect(first.message).toContain('retry with it');
    expect((await c.call('order', 'GetOrder', { order_id: order.id })).status).toBe('PAYMENT_PENDING');
    // A new attempt with another key while the first is unknown: the first is reconciled first, so it is not charged again.
    const other = await refused(c.call('order', 'ProcessPayment', { order_id: order.id, method: 'test_approve', idempotency_key: 'pay-2' }));
    expect(other).toEqual({ code: 'FAILED_PRECONDITION', details: `order ${order.id} is PAID: only a RESERVED order can be paid` });
    const retried = await c.call('order', 'ProcessPayment', { order_id: order.id, method: 'test_timeout', idempotency_key: 'pay-1' });
    expect(retried.payment).toMatchObject({ id: first.payment.id, status: 'DONE', balance: '25000' });
    const mismatch = await refused(c.call('order', 'ProcessPayment', { order_id: order.id, method: 'test_timeout', amount: 24000, idempotency_key: 'pay-1' }));
    expect(mismatch.code).toBe('FAILED_PRECONDITION');
    expect(mismatch.details).toContain('idempotency_key "pay-1" was used with a different ProcessPayment request');
    expect(await count('sandbox_charges')).toBe(1);
    expect(await count('payments')).toBe(1);
    expect((await c.call('order', 'GetOrder', { order_id: order.id })).status).toBe('PAID');
  });

  it('a retry with the same key after the time-out settles the payment itself (charged once)', async () => {
    await setStock('LAMP', 3, 25000);
    const order = await c.call('order', 'CreateOrder', { items: [{ sku: 'LAMP', quantity: 1 }], idempotency_key: 'o1' });
    const first = await c.call('order', 'ProcessPayment', { order_id: order.id, method: 'test_timeout', idempotency_key: 'pay-1' });
    expect(first.payment.status).toBe('IN_PROGRESS');
    const [a, b] = await Promise.all([
      c.call('order', 'ProcessPayment', { order_id: order.id, method: 'test_timeout', idempotency_key: 'pay-1' }),
      c.call('payment', 'ProcessPayment', { order_id: order.id, method: 'test_timeout', idempotency_key: 'pay-1' }),
    ]);
    expect([a.payment.status, b.payment.status]).toEqual(['DONE', 'DONE']);
    expect(await count('sandbox_charges')).toBe(1);
    expect(await stock('LAMP')).toMatchObject({ on_hand: '2', reserved: '0' });
  });

  it('a key is kept 15 days: until then another request with it is refused, afterwards it is a new key', async () => {
    await setStock('INK', 5, 3000);
    const first = await c.call('order', 'CreateOrder', { items: [{ sku: 'INK', quantity: 1 }], idempotency_key: 'kept' });
    await c.call('order', 'CreateOrder', { items: [{ sku: 'INK', quantity: 1 }], idempotency_key: 'forgotten' });
    clock += 15 * 24 * 60 * MINUTE - 1;
    expect((await refused(c.call('order', 'CreateOrder', { items: [{ sku: 'INK', quantity: 2 }], idempotency_key: 'kept' }))).code).toBe('FAILED_PRECONDITION');
    expect((await c.call('order', 'CreateOrder', { items: [{ sku: 'INK', quantity: 1 }], idempotency_key: 'kept' })).id).toBe(first.id);
    clock += 1;
    const second = await c.call('order', 'CreateOrder', { items: [{ sku: 'INK', quantity: 2 }], idempotency_key: 'kept' });
    expect(second.id).not.toBe(first.id);
    // The housekeeping forgets the keys past their 15 days.
    expect(await count('idempotency_keys')).toBe(2);
    await running.commerce.sweep();
    expect(await count('idempotency_keys')).toBe(1);
  });

  it('a decline leaves the order PAYMENT_FAILED with its units released; the payment is ABORTED with the reason code', async () => {
    await setStock('BAG', 2, 9900);
    const order = await c.call('order', 'CreateOrder', { items: [{ sku: 'BAG', quantity: 2 }], idempotency_key: 'o1' });
    const declined = await c.call('order', 'ProcessPayment', { order_id: order.id, method: 'test_decline_insufficient_funds', idempotency_key: 'p1' });
    expect(declined.payment).toMatchObject({ status: 'ABORTED', failure_code: 'INSUFFICIENT_FUNDS', balance: '0' });
    expect(declined.message).toContain('declined: INSUFFICIENT_FUNDS');
    expect((await c.call('order', 'GetOrder', { order_id: order.id })).status).toBe('PAYMENT_FAILED');
    expect(await stock('BAG')).toMatchObject({ on_hand: '2', reserved: '0', available: '2' });
    const bad = await refused(c.call('order', 'ProcessPayment', { order_id: order.id, method: 'visa', idempotency_key: 'p2' }));
    expect(bad.code).toBe('INVALID_ARGUMENT');
    expect(bad.details).toContain('test_approve');
  });

  it('a partial refund then a refund of the rest leaves the payment CANCELED with balance 0; more than the balance is refused; a retried refund refunds once', async () => {
    await setStock('PEN', 4, 5000);
    const order = await c.call('order', 'CreateOrder', { items: [{ sku: 'PEN', quantity: 2 }], idempotency_key: 'o1' });
    const { payment } = await c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: 'p1' });
    const part = await c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 3000, reason: 'one pen broken', idempotency_key: 'r1' });
    expect(part.payment).toMatchObject({ status: 'PARTIAL_CANCELED', balance: '7000' });
    expect(part.refund).toMatchObject({ amount: '3000', reason: 'one pen broken', status: 'DONE' });
    const retried = await c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 3000, reason: 'one pen broken', idempotency_key: 'r1' });
    expect(retried.refund.id).toBe(part.refund.id);
    expect((await c.call('payment', 'GetPayment', { payment_id: payment.id })).balance).toBe('7000');
    const reused = await refused(c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 2000, reason: 'one pen broken', idempotency_key: 'r1' }));
    expect(reused.code).toBe('FAILED_PRECONDITION');
    expect(reused.details).toContain('different RefundPayment request');
    const above = await refused(c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 7001, reason: 'too much', idempotency_key: 'r2' }));
    expect(above).toEqual({ code: 'FAILED_PRECONDITION', details: `a refund of 7001 KRW is more than the balance of payment ${payment.id} (7000 KRW)` });
    const rest = await c.call('payment', 'RefundPayment', { payment_id: payment.id, reason: 'customer returned the rest', idempotency_key: 'r3' });
    expect(rest.payment).toMatchObject({ status: 'CANCELED', balance: '0' });
    expect(rest.payment.refunds.map((r: any) => r.amount)).toEqual(['3000', '7000']);
    expect((await refused(c.call('payment', 'RefundPayment', { payment_id: payment.id, reason: 'again', idempotency_key: 'r4' }))).code).toBe(
      'FAILED_PRECONDITION',
    );
    expect(await count('sandbox_refunds')).toBe(2);
  });

  it('a reservation left unpaid past its lifetime (the clock advanced) releases its stock and the order is EXPIRED', async () => {
    await setStock('SOCK', 3, 2000);
    const order = await c.call('order', 'CreateOrder', { items: [{ sku: 'SOCK', quantity: 3 }], idempotency_key: 'o1' });
    expect(await stock('SOCK')).toMatchObject({ available: '0' });
    clock += 15 * MINUTE - 1;
    expect(await stock('SOCK')).toMatchObject({ available: '0' });
    expect((await c.call('order', 'GetOrder', { order_id: order.id })).status).toBe('RESERVED');
    clock += 1;
    expect(await stock('SOCK')).toMatchObject({ on_hand: '3', reserved: '0', available: '3' });
    expect((await c.call('order', 'GetOrder', { order_id: order.id })).status).toBe('EXPIRED');
    const late = await refused(c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: 'p1' }));
    expect(late.details).toBe(`order ${order.id} is EXPIRED: only a RESERVED order can be paid`);
    expect(await count('sandbox_charges')).toBe(0);
    const scrape = await running.app.inject({ method: 'GET', url: '/metrics' });
    expect(scrape.body).toContain('miniapp_reservation_expiries_total 1');
    expect(scrape.body).toContain('miniapp_orders{status="EXPIRED"} 1');
  });

  it('CreateOrder expires the reservations that ran out when it finds the stock short, and takes their units; with stock to spare it leaves them to the sweep', async () => {
    await setStock('SOCK', 3, 2000);
    const first = await c.call('order', 'CreateOrder', { items: [{ sku: 'SOCK', quantity: 2 }], idempotency_key: 'o1' });
    clock += 15 * MINUTE;
    // One unit is free: enough for this order, so the reservation past its time is not touched.
    const second = await c.call('order', 'CreateOrder', { items: [{ sku: 'SOCK', quantity: 1 }], idempotency_key: 'o2' });
    const state = async (id: string) => (await running.commerce.sql.one<{ state: string }>('SELECT state FROM orders WHERE id = $1', [id]))!.state;
    expect(await state(first.id)).toBe('RESERVED');
    // Short by two units, held by the reservation that ran out: it is expired, and the order gets them.
    const third = await c.call('order', 'CreateOrder', { items: [{ sku: 'SOCK', quantity: 2 }], idempotency_key: 'o3' });
    expect(third).toMatchObject({ status: 'RESERVED', total_amount: '4000' });
    expect(await state(first.id)).toBe('EXPIRED');
    expect(await state(second.id)).toBe('RESERVED');
    expect(await stock('SOCK')).toMatchObject({ on_hand: '3', reserved: '3', available: '0' });
    // Short with nothing due: refused as before, nothing expired.
    expect(await refused(c.call('order', 'CreateOrder', { items: [{ sku: 'SOCK', quantity: 1 }], idempotency_key: 'o4' }))).toEqual({
      code: 'FAILED_PRECONDITION',
      details: 'not enough stock: SOCK (asked 1, available 0)',
    });
    expect(await state(second.id)).toBe('RESERVED');
    const { body } = await running.app.inject({ method: 'GET', url: '/metrics' });
    expect(body).toContain('miniapp_reservation_expiries_total 1');
  });

  it('ProcessPayment of an order whose reservation ran out (not yet expired by anyone) expires it and refuses it, charging nothing', async () => {
    await setStock('SOCK', 3, 2000);
    const order = await c.call('order', 'CreateOrder', { items: [{ sku: 'SOCK', quantity: 3 }], idempotency_key: 'o1' });
    clock += 15 * MINUTE;
    expect(await refused(c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: 'p1' }))).toEqual({
      code: 'FAILED_PRECONDITION',
      details: `order ${order.id} is EXPIRED: only a RESERVED order can be paid`,
    });
    expect(await stock('SOCK')).toMatchObject({ on_hand: '3', reserved: '0', available: '3' });
    expect(await count('sandbox_charges')).toBe(0);
    expect(await count('payments')).toBe(0);
    // The refusal kept nothing under the key: the order placed again is paid with it.
    const again = await c.call('order', 'CreateOrder', { items: [{ sku: 'SOCK', quantity: 3 }], idempotency_key: 'o2' });
    expect((await c.call('order', 'ProcessPayment', { order_id: again.id, idempotency_key: 'p1' })).payment.status).toBe('DONE');
  });

  it('metrics count orders by status, payments by outcome and amount, refunds and expiries; promtool has nothing to say', async () => {
    await setStock('GEM', 5, 50000);
    const order = (key: string) => c.call('order', 'CreateOrder', { items: [{ sku: 'GEM', quantity: 1 }], idempotency_key: key });
    const paid = await order('o1');
    const { payment } = await c.call('order', 'ProcessPayment', { order_id: paid.id, idempotency_key: 'p1' });
    await c.call('payment', 'RefundPayment', { payment_id: payment.id, amount: 20000, reason: 'chipped', idempotency_key: 'r1' });
    await c.call('order', 'ProcessPayment', { order_id: (await order('o2')).id, method: 'test_decline_card_declined', idempotency_key: 'p2' });
    await c.call('order', 'ProcessPayment', { order_id: (await order('o3')).id, method: 'test_timeout', idempotency_key: 'p3' });
    await order('o4');
    clock += 15 * MINUTE;
    await c.call('inventory', 'CheckStock', {});
    const { body } = await running.app.inject({ method: 'GET', url: '/metrics' });
    expect(checkMetrics(body)).toEqual([]);
    const samples = Object.fromEntries(
      parseText(body)
        .filter((f) => /^miniapp_(orders|payments_total|payment_amount_total|refund_amount_total|reservation_expiries_total)$/.test(f.name))
        .flatMap((f) =>
          f.samples.map((s) => [
            `${s.name}{${Object.entries(s.labels)
              .map(([k, v]) => `${k}=${v}`)
              .join(',')}}`,
            s.value,
          ]),
        ),
    );
    expect(samples).toEqual({
      'miniapp_orders{status=RESERVED}': 0,
      'miniapp_orders{status=PAYMENT_PENDING}': 1,
      // The paid order was refunded in part.
      'miniapp_orders{status=PAID}': 0,
      'miniapp_orders{status=PAYMENT_FAILED}': 1,
      'miniapp_orders{status=EXPIRED}': 1,
      'miniapp_orders{status=CANCELLED}': 0,
      'miniapp_orders{status=REFUNDED}': 0,
      'miniapp_orders{status=PARTIALLY_REFUNDED}': 1,
      'miniapp_payments_total{outcome=approved,currency=KRW}': 1,
      'miniapp_payments_total{outcome=declined,currency=KRW}': 1,
      'miniapp_payments_total{outcome=unknown,currency=KRW}': 1,
      'miniapp_payment_amount_total{outcome=approved,currency=KRW}': 50000,
      'miniapp_payment_amount_total{outcome=declined,currency=KRW}': 50000,
      'miniapp_payment_amount_total{outcome=unknown,currency=KRW}': 50000,
      'miniapp_refund_amount_total{currency=KRW}': 20000,
      'miniapp_reservation_expiries_total{}': 1,
    });
  });

  it('cancelling a paid order refunds it in full and puts the units back; a reserved one releases them', async () => {
    await setStock('HAT', 2, 15000);
    const paidOrder = await c.call('order', 'CreateOrder', { items: [{ sku: 'HAT', quantity: 1 }], idempotency_key: 'o1' });
    const { payment } = await c.call('order', 'ProcessPayment', { order_id: paidOrder.id, idempotency_key: 'p1' });
    const reserved = await c.call('order', 'CreateOrder', { items: [{ sku: 'HAT', quantity: 1 }], idempotency_key: 'o2' });
    expect(await stock('HAT')).toMatchObject({ on_hand: '1', reserved: '1', available: '0' });
    const cancelled = await c.call('order', 'CancelOrder', { order_id: paidOrder.id, reason: 'changed my mind' });
    expect(cancelled).toMatchObject({ status: 'CANCELLED', cancel_reason: 'changed my mind' });
    expect(await c.call('payment', 'GetPayment', { payment_id: payment.id })).toMatchObject({ status: 'CANCELED', balance: '0' });
    expect((await c.call('order', 'CancelOrder', { order_id: paidOrder.id })).status).toBe('CANCELLED');
    expect(await count('sandbox_refunds')).toBe(1);
    expect(await c.call('order', 'CancelOrder', { order_id: reserved.id })).toMatchObject({ status: 'CANCELLED' });
    expect(await stock('HAT')).toMatchObject({ on_hand: '2', reserved: '0', available: '2' });
  });

  it('paying and cancelling the same orders at once: no call fails otherwise than by a status of the rules, every order ends CANCELLED, every unit back', async () => {
    await setStock('PLATE', 20, 8000);
    const orders = await Promise.all(
      Array.from({ length: 20 }, (_, i) => c.call('order', 'CreateOrder', { items: [{ sku: 'PLATE', quantity: 1 }], idempotency_key: `o-${i}` })),
    );
    const outcomes = await Promise.allSettled(
      orders.flatMap((order, i) => [
        c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: `p-${i}` }),
        c.call('order', 'CancelOrder', { order_id: order.id, reason: 'raced' }),
      ]),
    );
    const codes = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected').map((o) => o.reason.code);
    // FAILED_PRECONDITION (paid after the cancel, or cancelled mid-payment) and ABORTED (changed meanwhile) only.
    expect(codes.filter((code) => code !== 9 && code !== 10)).toEqual([]);
    for (const order of orders) {
      const now = await c.call('order', 'GetOrder', { order_id: order.id });
      if (now.status !== 'CANCELLED') await c.call('order', 'CancelOrder', { order_id: order.id });
      expect((await c.call('order', 'GetOrder', { order_id: order.id })).status).toBe('CANCELLED');
    }
    expect(await stock('PLATE')).toMatchObject({ on_hand: '20', reserved: '0', available: '20' });
    const charged = Number(
      (await running.commerce.sql.one<{ n: number }>(
        "SELECT COALESCE(SUM(amount), 0) AS n FROM payments WHERE status IN ('DONE', 'PARTIAL_CANCELED', 'CANCELED')",
      ))!.n,
    );
    const refunded = Number((await running.commerce.sql.one<{ n: number }>('SELECT COALESCE(SUM(amount), 0) AS n FROM sandbox_refunds'))!.n);
    expect(refunded).toBe(charged);
  });

  it('orders of several SKUs named in any order, placed, paid and cancelled at once: no call fails but by a rule, no deadlock, every unit accounted for', async () => {
    const skus = ['PAD', 'PEN', 'PIN', 'POT'];
    for (const sku of skus) await setStock(sku, 30, 1000);
    const orderOf = (i: number) =>
      [0, 1, 2]
        .map((k) => ({ sku: skus[(i + k * (1 + (i % 3))) % 4]!, quantity: 1 + ((i + k) % 2) }))
        .filter((item, k, all) => all.findIndex((other) => other.sku === item.sku) === k);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 24 }, async (_, i) => {
        const order = await c.call('order', 'CreateOrder', { items: orderOf(i), idempotency_key: `o-${i}` });
        const [paid] = await Promise.allSettled([
          c.call('order', 'ProcessPayment', {
            order_id: order.id,
            idempotency_key: `p-${i}`,
            method: i % 5 === 0 ? 'test_decline_card_declined' : 'test_approve',
          }),
          i % 4 === 0 ? c.call('order', 'CancelOrder', { order_id: order.id, reason: 'raced' }) : Promise.resolve(),
        ]);
        if (paid.status === 'rejected') throw paid.reason;
      }),
    );
    const codes = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected').map((o) => o.reason.code);
    // FAILED_PRECONDITION (short, or cancelled first) and ABORTED (changed meanwhile) only: a deadlock would be INTERNAL.
    expect(codes.filter((code) => code !== 9 && code !== 10)).toEqual([]);
    const listed = (await c.call('order', 'ListOrders', { page_size: 100 })).orders;
    // Paid orders took their units (cancelled ones put them back); orders still reserved hold theirs.
    const units = (sku: string, statuses: string[]) =>
      listed
        .filter((o: any) => statuses.includes(o.status))
        .reduce((sum: number, o: any) => sum + Number(o.items.find((item: any) => item.sku === sku)?.quantity ?? 0), 0);
    for (const sku of skus) {
      const sold = units(sku, ['PAID']);
      expect(await stock(sku), sku).toMatchObject({ on_hand: String(30 - sold), reserved: String(units(sku, ['RESERVED', 'PAYMENT_PENDING'])) });
    }
    expect(listed.map((o: any) => o.status).filter((status: string) => status === 'PAID').length).toBeGreaterThan(0);
  });

  it('users see only their own orders and payments; only the admin manages stock', async () => {
    await setStock('BOOK', 5, 18000);
    const [ann, ben] = [await c.user(1), await c.user(2)];
    const order = await c.call('order', 'CreateOrder', { items: [{ sku: 'BOOK', quantity: 1 }], idempotency_key: 'same-key' }, ann.token);
    expect(order.user_id).toBe(String(ann.id));
    // Keys are per caller: Ben's "same-key" is his own.
    const bens = await c.call('order', 'CreateOrder', { items: [{ sku: 'BOOK', quantity: 2 }], idempotency_key: 'same-key' }, ben.token);
    expect(bens.id).not.toBe(order.id);
    expect(await refused(c.call('order', 'GetOrder', { order_id: order.id }, ben.token))).toEqual({
      code: 'NOT_FOUND',
      details: `no order with id "${order.id}"`,
    });
    expect((await refused(c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: 'x' }, ben.token))).code).toBe('NOT_FOUND');
    const { payment } = await c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: 'x' }, ann.token);
    expect(payment.user_id).toBe(String(ann.id));
    expect((await refused(c.call('payment', 'GetPayment', { payment_id: payment.id }, ben.token))).code).toBe('NOT_FOUND');
    expect((await c.call('payment', 'GetPayment', { payment_id: payment.id }, ann.token)).status).toBe('DONE');
    expect((await c.call('order', 'ListOrders', {}, ben.token)).orders.map((o: any) => o.id)).toEqual([bens.id]);
    expect((await c.call('order', 'ListOrders', {})).orders).toHaveLength(2);
    expect(
      (await refused(c.call('order', 'CreateOrder', { items: [{ sku: 'BOOK', quantity: 1 }], user_id: ben.id, idempotency_key: 'y' }, ann.token))).code,
    ).toBe('PERMISSION_DENIED');
    expect((await c.call('order', 'CreateOrder', { items: [{ sku: 'BOOK', quantity: 1 }], user_id: ben.id, idempotency_key: 'y' })).user_id).toBe(
      String(ben.id),
    );
    expect((await refused(c.call('inventory', 'SetStock', { sku: 'BOOK', quantity: 50 }, ann.token))).code).toBe('PERMISSION_DENIED');
    expect((await refused(c.call('inventory', 'AdjustStock', { sku: 'BOOK', delta: 1, reason: 'found one' }, ann.token))).code).toBe('PERMISSION_DENIED');
    expect((await c.call('inventory', 'CheckStock', { skus: ['BOOK'] }, ann.token)).items[0].available).toBe('1');
    // The ledger names every user's orders: Ann may not read Ben's there either.
    expect(await refused(c.call('inventory', 'ListStockMovements', { sku: 'BOOK' }, ann.token))).toEqual({
      code: 'PERMISSION_DENIED',
      details: 'reading the stock ledger needs the admin token',
    });
    expect((await c.call('inventory', 'ListStockMovements', { sku: 'BOOK' })).movements.length).toBeGreaterThan(0);
    expect((await refused(c.call('order', 'GetOrder', { order_id: order.id }, 'mat_not-a-token'))).code).toBe('UNAUTHENTICATED');
  });

  it("a payment without an order is the admin's: charged once per key, refundable; a user is refused", async () => {
    const ann = await c.user(1);
    expect((await refused(c.call('payment', 'ProcessPayment', { amount: 5000, idempotency_key: 'manual-1' }, ann.token))).code).toBe('PERMISSION_DENIED');
    const first = await c.call('payment', 'ProcessPayment', { amount: 5000, currency: 'USD', idempotency_key: 'manual-1' });
    expect(first.payment).toMatchObject({ status: 'DONE', amount: '5000', currency: 'USD', order_id: '', user_id: '0' });
    expect((await c.call('payment', 'ProcessPayment', { amount: 5000, currency: 'USD', idempotency_key: 'manual-1' })).payment.id).toBe(first.payment.id);
    expect((await refused(c.call('payment', 'ProcessPayment', { amount: 5000, currency: 'usd', idempotency_key: 'manual-2' }))).code).toBe('INVALID_ARGUMENT');
    expect((await c.call('payment', 'RefundPayment', { payment_id: first.payment.id, reason: 'goodwill', idempotency_key: 'r' })).payment).toMatchObject({
      status: 'CANCELED',
      balance: '0',
    });
    expect((await refused(c.call('payment', 'GetPayment', { payment_id: first.payment.id }, ann.token))).code).toBe('NOT_FOUND');
    expect(await count('sandbox_charges')).toBe(1);
  });

  it('ListOrders pages newest first with a token, filters by status, and refuses a token it did not give', async () => {
    await setStock('PIN', 10, 500);
    const made = [];
    for (let i = 0; i < 5; i++) {
      made.push(await c.call('order', 'CreateOrder', { items: [{ sku: 'PIN', quantity: 1 }], idempotency_key: `o-${i}` }));
      clock += 1000;
    }
    await c.call('order', 'ProcessPayment', { order_id: made[1].id, idempotency_key: 'p' });
    const first = await c.call('order', 'ListOrders', { page_size: 2 });
    const second = await c.call('order', 'ListOrders', { page_size: 2, page_token: first.next_page_token });
    const third = await c.call('order', 'ListOrders', { page_size: 2, page_token: second.next_page_token });
    expect([...first.orders, ...second.orders, ...third.orders].map((o: any) => o.id)).toEqual(made.map((o) => o.id).reverse());
    expect(third.next_page_token).toBe('');
    expect((await c.call('order', 'ListOrders', { status: 'PAID' })).orders.map((o: any) => o.id)).toEqual([made[1].id]);
    expect((await refused(c.call('order', 'ListOrders', { page_token: 'bm9wZQ' }))).code).toBe('INVALID_ARGUMENT');
  });

  it('ListOrders refuses a page token made under another filter, naming page_token; page_size may change', async () => {
    await setStock('CAP', 10, 500);
    const made = [];
    for (let i = 0; i < 4; i++) {
      made.push(await c.call('order', 'CreateOrder', { items: [{ sku: 'CAP', quantity: 1 }], idempotency_key: `cap-${i}` }));
      clock += 1000;
    }
    for (const order of made.slice(0, 3)) await c.call('order', 'ProcessPayment', { order_id: order.id, idempotency_key: `pay-${order.id}` });
    const paid = await c.call('order', 'ListOrders', { status: 'PAID', page_size: 1 });
    expect(paid.next_page_token).not.toBe('');
    for (const other of [{}, { status: 'RESERVED' }, { status: 'PAID', user_id: '1' }]) {
      const answer = await refused(c.call('order', 'ListOrders', { ...other, page_size: 1, page_token: paid.next_page_token }));
      expect(answer, JSON.stringify(other)).toEqual({
        code: 'INVALID_ARGUMENT',
        details:
          'page_token belongs to a list with another filter (status, user_id): send the filter of the page it came with, or start again without page_token',
      });
    }
    const next = await c.call('order', 'ListOrders', { status: 'PAID', page_size: 5, page_token: paid.next_page_token });
    expect([...paid.orders, ...next.orders].map((o: any) => o.id)).toEqual(
      made
        .slice(0, 3)
        .map((o) => o.id)
        .reverse(),
    );
  });

  it('bad input is INVALID_ARGUMENT naming the field, and writes nothing', async () => {
    await setStock('KEY', 1, 100);
    const cases: [string, string, object, string][] = [
      ['order', 'CreateOrder', { items: [], idempotency_key: 'k' }, 'items must name at least one SKU'],
      ['order', 'CreateOrder', { items: [{ sku: 'KEY', quantity: 0 }], idempotency_key: 'k' }, 'items[0].quantity must be a whole number from 1'],
      [
        'order',
        'CreateOrder',
        {
          items: [
            { sku: 'KEY', quantity: 1 },
            { sku: 'KEY', quantity: 1 },
          ],
          idempotency_key: 'k',
        },
        'names SKU KEY twice',
      ],
      ['order', 'CreateOrder', { items: [{ sku: 'K Y', quantity: 1 }], idempotency_key: 'k' }, 'items[0].sku must be 1 to 64'],
      ['order', 'CreateOrder', { items: [{ sku: 'KEY', quantity: 1 }] }, 'idempotency_key is required'],
      ['order', 'CreateOrder', { items: [{ sku: 'KEY', quantity: 1 }], idempotency_key: 'a b' }, 'idempotency_key must be 1 to 64'],
      ['inventory', 'SetStock', { sku: 'NEW', quantity: -1, price: 1, has_price: true }, 'quantity must be a whole number from 0'],
      ['inventory', 'SetStock', { sku: 'NEW', quantity: 1, price: 1, has_price: true, currency: 'won' }, 'currency must be an ISO 4217 code'],
      ['inventory', 'AdjustStock', { sku: 'KEY', delta: 0, reason: 'x' }, 'delta must not be 0'],
      ['inventory', 'AdjustStock', { sku: 'KEY', delta: 1 }, 'reason is required'],
      ['payment', 'RefundPayment', { payment_id: 'pay_x', reason: '', idempotency_key: 'k' }, 'reason is required'],
      ['payment', 'ProcessPayment', { amount: 0, idempotency_key: 'k' }, 'amount must be a whole number from 1'],
      // A missing id is a missing field, not a record that is not there; OrderService pays orders only (its contract).
      ['order', 'ProcessPayment', { amount: 5000, idempotency_key: 'k' }, 'order_id is required'],
      ['order', 'GetOrder', {}, 'order_id is required'],
      ['order', 'CancelOrder', { reason: 'x' }, 'order_id is required'],
      ['payment', 'GetPayment', {}, 'payment_id is required'],
      ['payment', 'RefundPayment', { reason: 'x', idempotency_key: 'k' }, 'payment_id is required'],
      ['inventory', 'ReleaseReservation', {}, 'reservation_id is required'],
      ['inventory', 'CommitReservation', {}, 'reservation_id is required'],
    ];
    for (const [service, method, request, message] of cases) {
      const answer = await refused(c.call(service as never, method, request));
      expect(answer.code, `${method} ${JSON.stringify(request)}`).toBe('INVALID_ARGUMENT');
      expect(answer.details).toContain(message);
    }
    for (const table of ['orders', 'payments', 'reservations', 'idempotency_keys', 'refunds', 'sandbox_charges']) expect(await count(table), table).toBe(0);
    // A user token asking OrderService to pay without an order hears the same, not PERMISSION_DENIED.
    const ann = await c.user(1);
    expect(await refused(c.call('order', 'ProcessPayment', { amount: 5000, idempotency_key: 'k' }, ann.token))).toEqual({
      code: 'INVALID_ARGUMENT',
      details: 'order_id is required',
    });
    expect((await c.call('inventory', 'CheckStock', {})).items.map((i: any) => i.sku)).toEqual(['KEY']);
    expect(await refused(c.call('inventory', 'CheckStock', { skus: ['NOPE'] }))).toEqual({ code: 'NOT_FOUND', details: 'no such SKU: NOPE' });
  });

  it('stock is set and adjusted with a reason, kept as a ledger; never below what is reserved', async () => {
    await setStock('CAP', 5, 7000, { name: 'Cap', currency: 'USD' });
    await c.call('order', 'CreateOrder', { items: [{ sku: 'CAP', quantity: 4 }], idempotency_key: 'o1' });
    expect(await refused(c.call('inventory', 'AdjustStock', { sku: 'CAP', delta: -2, reason: 'broken' }))).toEqual({
      code: 'FAILED_PRECONDITION',
      details: 'SKU CAP has 5 on hand, 4 reserved: removing 2 would leave less than is reserved (at most 1 can be removed)',
    });
    expect((await refused(setStock('CAP', 3))).details).toContain('has 4 units reserved');
    expect(await c.call('inventory', 'AdjustStock', { sku: 'CAP', delta: -1, reason: 'broken' })).toMatchObject({
      on_hand: '4',
      reserved: '4',
      available: '0',
      currency: 'USD',
      name: 'Cap',
    });
    const ledger = await c.call('inventory', 'ListStockMovements', { sku: 'CAP' });
    expect(ledger.movements.map((m: any) => [m.delta, m.on_hand, m.reason])).toEqual([
      ['-1', '4', 'broken'],
      ['5', '5', 'initial count'],
    ]);
    expect((await refused(c.call('inventory', 'ReserveItems', { items: [{ sku: 'CAP', quantity: 1 }] }))).code).toBe('FAILED_PRECONDITION');
    await c.call('inventory', 'AdjustStock', { sku: 'CAP', delta: 2, reason: 'delivery' });
    const held = await c.call('inventory', 'ReserveItems', { items: [{ sku: 'CAP', quantity: 2 }], ttl_seconds: 60 });
    expect(held.reservation).toMatchObject({ state: 'ACTIVE', order_id: '' });
    expect(await c.call('inventory', 'CommitReservation', { reservation_id: held.reservation.id })).toMatchObject({ state: 'COMMITTED' });
    expect(await stock('CAP')).toMatchObject({ on_hand: '4', reserved: '4' });
    expect((await refused(c.call('inventory', 'ReleaseReservation', { reservation_id: held.reservation.id }))).details).toContain('is COMMITTED');
  });

  it('a change of currency needs the price in the new currency: 12,000 won never become $120.00', async () => {
    await setStock('MUG', 10, 12000);
    expect(await refused(c.call('inventory', 'SetStock', { sku: 'MUG', quantity: 10, currency: 'USD' }))).toEqual({
      code: 'FAILED_PRECONDITION',
      details: 'SKU MUG is priced in KRW: give its price in USD (minor units) with the new currency',
    });
    expect(await stock('MUG')).toMatchObject({ price: '12000', currency: 'KRW' });
    // The same currency again, or none, keeps the price; with the price in the new currency it changes.
    expect(await c.call('inventory', 'SetStock', { sku: 'MUG', quantity: 9, currency: 'KRW' })).toMatchObject({
      price: '12000',
      currency: 'KRW',
      on_hand: '9',
    });
    expect(await setStock('MUG', 9, 900, { currency: 'USD' })).toMatchObject({ price: '900', currency: 'USD' });
  });
});
