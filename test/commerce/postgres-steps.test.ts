/**
 * The checkout's steps as one statement each on PostgreSQL
 * (src/commerce/order/postgres-steps.ts and the settlement's pieces): a step
 * goes ahead with all of its writes or writes nothing, so that the general
 * way (a transaction) can then say why; and a checkout takes the round
 * trips it was built for, on PostgreSQL and on SQLite alike in what it
 * answers.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Commerce } from '../../src/commerce/commerce.js';
import { PostgresSteps } from '../../src/commerce/order/postgres-steps.js';
import type { OrderRecord } from '../../src/commerce/order/orders.js';
import type { PaymentRecord } from '../../src/commerce/payment/payments.js';
import { openStore, type Store } from '../../src/store/store.js';
import type { Param, Sql } from '../../src/store/sql.js';
import { BACKENDS } from '../helpers/postgres.js';
import { useBackendStore } from '../helpers/backend-store.js';
import { observedSql } from '../helpers/observed-sql.js';

const T0 = Date.parse('2026-11-21T12:00:00.000Z');
const ADMIN = { isAdmin: true, userId: null };

/** The store's Sql, counting what goes to the database: statements outside a transaction, and transactions. */
function counting(sql: Sql): { sql: Sql; counts: { statements: number; transactions: number } } {
  const counts = { statements: 0, transactions: 0 };
  return {
    sql: observedSql(sql, {
      statement: (_text, _params, inTransaction) => void (inTransaction || counts.statements++),
      transaction: () => void counts.transactions++,
    }),
    counts,
  };
}

describe.each(BACKENDS)('checkout round trips on %s', (backend) => {
  const location = useBackendStore(backend);
  let store: Store;
  let commerce: Commerce;
  let counts: { statements: number; transactions: number };

  beforeEach(async () => {
    store = await openStore(location.location());
    const counted = counting(store.sql);
    counts = counted.counts;
    commerce = new Commerce({ sql: counted.sql, now: () => new Date(T0), authenticate: () => Promise.reject(new Error('no calls')), sweepMs: 0 });
  });
  afterEach(async () => {
    await store.close();
  });

  it('a checkout without webhooks: on PostgreSQL one statement a step and no transaction, on SQLite a transaction a step; the same answers', async () => {
    await commerce.inventory.set({ sku: 'MUG', quantity: 5, price: 12000, reason: 'initial count', actor: 'admin' });
    await commerce.inventory.set({ sku: 'CUP', quantity: 5, price: 3000, reason: 'initial count', actor: 'admin' });
    counts.statements = counts.transactions = 0;
    const order = await commerce.orders.create(ADMIN, {
      items: [
        { sku: 'MUG', quantity: 2 },
        { sku: 'CUP', quantity: 1 },
      ],
      key: 'o1',
    });
    // PostgreSQL: the catalogue read, then the order placed. SQLite: a transaction.
    expect(counts).toEqual(backend === 'postgres' ? { statements: 2, transactions: 0 } : { statements: 0, transactions: 1 });
    counts.statements = counts.transactions = 0;
    const paid = await commerce.orders.pay(ADMIN, { orderId: order.id, key: 'p1' });
    // PostgreSQL: the payment recorded, the provider's charge, the settlement. SQLite: two transactions around the charge.
    expect(counts).toEqual(backend === 'postgres' ? { statements: 3, transactions: 0 } : { statements: 1, transactions: 2 });
    expect(order).toMatchObject({
      status: 'RESERVED',
      totalAmount: 27000,
      items: [
        { sku: 'MUG', quantity: 2, unitPrice: 12000, amount: 24000 },
        { sku: 'CUP', quantity: 1, unitPrice: 3000, amount: 3000 },
      ],
    });
    expect(paid).toMatchObject({ message: 'approved', payment: { status: 'DONE', amount: 27000, balance: 27000, orderId: order.id, refunds: [] } });
    // What the steps answered is what they wrote, and what a retry with the keys gets.
    expect(await commerce.orders.get(ADMIN, order.id)).toEqual({ ...order, status: 'PAID', paymentId: paid.payment.id, paidAt: paid.payment.approvedAt });
    expect(await commerce.payments.get(ADMIN, paid.payment.id)).toEqual(paid.payment);
    expect(
      await commerce.orders.create(ADMIN, {
        items: [
          { sku: 'CUP', quantity: 1 },
          { sku: 'MUG', quantity: 2 },
        ],
        key: 'o1',
      }),
    ).toEqual(order);
    expect(await commerce.orders.pay(ADMIN, { orderId: order.id, key: 'p1' })).toEqual(paid);
    expect(await commerce.inventory.levels(['CUP', 'MUG'])).toMatchObject([
      { sku: 'CUP', onHand: 4, reserved: 0 },
      { sku: 'MUG', onHand: 3, reserved: 0 },
    ]);
    // One ledger line a SKU, in SKU order.
    expect(
      (await store.sql.all<{ sku: string; delta: number }>("SELECT sku, delta FROM stock_movements WHERE reason LIKE 'order %' ORDER BY id")).map((m) => [
        m.sku,
        Number(m.delta),
      ]),
    ).toEqual([
      ['CUP', -1],
      ['MUG', -2],
    ]);
  });

  it('orders are priced from the catalogue as it stands: on PostgreSQL without reading it again while it does not change', async () => {
    await commerce.inventory.set({ sku: 'MUG', quantity: 5, price: 12000, reason: 'initial count', actor: 'admin' });
    await commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 1 }], key: 'o1' });
    counts.statements = counts.transactions = 0;
    expect(await commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 1 }], key: 'o2' })).toMatchObject({ totalAmount: 12000 });
    expect(counts).toEqual(backend === 'postgres' ? { statements: 1, transactions: 0 } : { statements: 0, transactions: 1 });
    // A new price: the order that finds it is priced by it (on PostgreSQL the step does not go ahead and the transaction reads it).
    await commerce.inventory.set({ sku: 'MUG', quantity: 5, price: 15000, name: 'Mug', reason: 'new price', actor: 'admin' });
    expect(await commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 1 }], key: 'o3' })).toMatchObject({
      totalAmount: 15000,
      items: [{ name: 'Mug', unitPrice: 15000 }],
    });
    counts.statements = counts.transactions = 0;
    const fourth = await commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 1 }], key: 'o4' });
    expect(fourth).toMatchObject({ totalAmount: 15000, items: [{ name: 'Mug', unitPrice: 15000 }] });
    expect(counts).toEqual(backend === 'postgres' ? { statements: 1, transactions: 0 } : { statements: 0, transactions: 1 });
    expect(await commerce.orders.get(ADMIN, fourth.id)).toEqual(fourth);
  });
});

describe('the one-statement steps on PostgreSQL', () => {
  const location = useBackendStore('postgres');
  let store: Store;
  let commerce: Commerce;
  let steps: PostgresSteps;
  let clock: number;

  beforeEach(async () => {
    clock = T0;
    store = await openStore(location.location());
    const now = () => new Date(clock);
    commerce = new Commerce({ sql: store.sql, now, authenticate: () => Promise.reject(new Error('no calls')), sweepMs: 0 });
    steps = new PostgresSteps({ sql: store.sql, now, keys: commerce.keys, inventory: commerce.inventory, payments: commerce.payments });
    await commerce.inventory.set({ sku: 'MUG', quantity: 3, price: 12000, reason: 'initial count', actor: 'admin' });
  });
  afterEach(async () => {
    await store.close();
  });

  /** Every row the steps write, counted, and the stock: what must not move when a step does not go ahead. */
  const written = async () => {
    const counts: Record<string, number> = {};
    for (const table of ['idempotency_keys', 'reservations', 'reservation_items', 'orders', 'order_items', 'payments', 'stock_movements']) {
      counts[table] = Number((await store.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))!.n);
    }
    const states = await store.sql.all<{ state: string }>('SELECT state FROM orders UNION ALL SELECT state FROM reservations ORDER BY state');
    return { counts, states: states.map((row) => row.state), stock: await commerce.inventory.levels(['MUG']) };
  };

  const order = (changes: Partial<OrderRecord> & { quantity?: number; price?: number } = {}): OrderRecord => {
    const { quantity = 1, price = 12000, ...rest } = changes;
    const at = new Date(clock).toISOString();
    return {
      id: `ord_${Math.random().toString(36).slice(2)}`,
      userId: null,
      status: 'RESERVED',
      items: [{ sku: 'MUG', name: 'MUG', quantity, unitPrice: price, amount: price * quantity }],
      totalAmount: price * quantity,
      currency: 'KRW',
      reservationId: `res_${Math.random().toString(36).slice(2)}`,
      reservationExpiresAt: new Date(clock + 15 * 60_000).toISOString(),
      paymentId: null,
      createdAt: at,
      updatedAt: at,
      paidAt: null,
      cancelledAt: null,
      cancelReason: null,
      ...rest,
    };
  };

  it('placing an order writes all of it, or nothing when a price changed, the stock is short or the key was used', async () => {
    const claim = (key: string) => ({ owner: 'admin', key, hash: `hash-${key}` });
    const before = await written();
    expect(await steps.place(claim('k1'), order({ price: 11000 }))).toBe(false);
    expect(await steps.place(claim('k1'), order({ currency: 'USD' }))).toBe(false);
    expect(await steps.place(claim('k1'), order({ quantity: 4 }))).toBe(false);
    expect(await steps.place(claim('k1'), order({ items: [{ sku: 'NOPE', name: 'NOPE', quantity: 1, unitPrice: 1, amount: 1 }] }))).toBe(false);
    expect(await written()).toEqual(before);

    const placed = order({ quantity: 3 });
    expect(await steps.place(claim('k1'), placed)).toBe(true);
    expect(await commerce.orders.get(ADMIN, placed.id)).toEqual(placed);
    expect((await commerce.keys.find('order.create', 'admin', 'k1'))!.response).toBe(JSON.stringify(placed));
    const after = await written();
    expect(after.stock).toMatchObject([{ onHand: 3, reserved: 3 }]);
    expect(after.counts).toMatchObject({ idempotency_keys: 1, reservations: 1, reservation_items: 1, orders: 1, order_items: 1 });

    // The key is taken now; and the stock is all reserved.
    await commerce.inventory.adjust('MUG', 5, 'delivery', 'admin');
    const taken = await written();
    expect(await steps.place(claim('k1'), order())).toBe(false);
    expect(await steps.place(claim('k2'), order({ quantity: 6 }))).toBe(false);
    expect(await written()).toEqual(taken);
  });

  it('orders that come while one is being placed are placed together, in one statement, each answered for itself', async () => {
    await commerce.inventory.set({ sku: 'CUP', quantity: 10, price: 3000, reason: 'initial count', actor: 'admin' });
    const counted = counting(store.sql);
    const together = new PostgresSteps({
      sql: counted.sql,
      now: () => new Date(clock),
      keys: commerce.keys,
      inventory: commerce.inventory,
      payments: commerce.payments,
    });
    const claim = (key: string) => ({ owner: 'admin', key, hash: `hash-${key}` });
    const cup = (quantity: number) =>
      order({ items: [{ sku: 'CUP', name: 'CUP', quantity, unitPrice: 3000, amount: 3000 * quantity }], totalAmount: 3000 * quantity });
    const first = order({ quantity: 1 });
    // Three MUGs are left after the first; the orders after it, in turn: 2 MUG (placed), 1 MUG and 4 CUP (placed: 3 left),
    // 1 MUG (short: the two before it took them), a price that changed (refused), 6 CUP (placed: 10 CUP in all), k2 again
    // (a key once a statement: it waits for the next, where the key is taken), and 1 CUP (short).
    const orders = [
      order({ quantity: 2 }),
      order({
        items: [
          { sku: 'MUG', name: 'MUG', quantity: 1, unitPrice: 12000, amount: 12000 },
          { sku: 'CUP', name: 'CUP', quantity: 4, unitPrice: 3000, amount: 12000 },
        ],
        totalAmount: 24000,
      }),
      order({ quantity: 1 }),
      order({ price: 11000 }),
      cup(6),
      order({ quantity: 1 }),
      cup(1),
    ];
    const keys = ['k2', 'k3', 'k4', 'k5', 'k6', 'k2', 'k7'];
    await commerce.inventory.adjust('MUG', 1, 'delivery', 'admin');
    counted.counts.statements = 0;
    const placing = [together.place(claim('k1'), first), ...orders.map((o, i) => together.place(claim(keys[i]!), o))];
    expect(await Promise.all(placing)).toEqual([true, true, true, false, false, true, false, false]);
    // The first alone; the rest together but the second k2, which went after them.
    expect(counted.counts.statements).toBe(3);
    for (const placed of [first, orders[0]!, orders[1]!, orders[4]!]) expect(await commerce.orders.get(ADMIN, placed.id)).toEqual(placed);
    expect(await commerce.inventory.levels(['CUP', 'MUG'])).toMatchObject([
      { sku: 'CUP', onHand: 10, reserved: 10 },
      { sku: 'MUG', onHand: 4, reserved: 4 },
    ]);
    expect((await commerce.keys.find('order.create', 'admin', 'k2'))!.resourceId).toBe(orders[0]!.id);
    expect(await written()).toMatchObject({ counts: { idempotency_keys: 4, reservations: 4, reservation_items: 5, orders: 4, order_items: 5 } });
  });

  it('payments settled at once are settled together, in one statement: each order PAID or PAYMENT_FAILED, and a ledger line of each sale with the on_hand it left', async () => {
    // The first settlement waits until every charge has its provider's answer, so that the others come while it is in flight.
    let charged = 0;
    let allCharged!: () => void;
    const answered = new Promise<void>((resolve) => (allCharged = resolve));
    const gated: Sql = {
      ...store.sql,
      dialect: store.sql.dialect,
      all: async <T>(text: string, params?: readonly Param[]) => {
        if (text.startsWith('WITH v AS')) await answered;
        return store.sql.all<T>(text, params);
      },
      one: async <T>(text: string, params?: readonly Param[]) => {
        const row = await store.sql.one<T>(text, params);
        if (text.includes('INSERT INTO sandbox_charges') && ++charged === 5) setImmediate(allCharged);
        return row;
      },
      run: (text: string, params?: readonly Param[]) => store.sql.run(text, params),
      exec: (text: string) => store.sql.exec(text),
      afterCommit: (hook: () => void) => store.sql.afterCommit(hook),
      transaction: <T>(work: (tx: Sql) => Promise<T>) => store.sql.transaction(work),
    };
    const counted = counting(gated);
    const together = new Commerce({ sql: counted.sql, now: () => new Date(clock), authenticate: () => Promise.reject(new Error('no calls')), sweepMs: 0 });
    await together.inventory.adjust('MUG', 7, 'delivery', 'admin');
    await together.inventory.set({ sku: 'CUP', quantity: 10, price: 3000, reason: 'initial count', actor: 'admin' });
    const methods = ['test_approve', 'test_approve', 'test_decline_card_declined', 'test_approve', 'test_approve'];
    const asked = [
      [{ sku: 'MUG', quantity: 2 }],
      [
        { sku: 'MUG', quantity: 1 },
        { sku: 'CUP', quantity: 3 },
      ],
      [{ sku: 'MUG', quantity: 4 }],
      [{ sku: 'CUP', quantity: 1 }],
      [{ sku: 'MUG', quantity: 3 }],
    ];
    const payments: PaymentRecord[] = [];
    for (const [i, items] of asked.entries()) {
      const placed = await together.orders.create(ADMIN, { items, key: `o${i}` });
      payments.push(
        (await steps.startPayment(
          ADMIN,
          { orderId: placed.id, asked: 0, currency: '', method: methods[i]! },
          { owner: 'admin', key: `p${i}`, hash: `h${i}` },
        ))!,
      );
    }
    const movementsBefore = Number((await store.sql.one<{ n: number }>('SELECT MAX(id) AS n FROM stock_movements'))!.n);
    counted.counts.statements = 0;
    // The provider's books take a statement each; the settlements two: the first alone, the four that came while it was in flight together.
    const outcomes = await Promise.all(payments.map((payment) => together.payments.charge(payment)));
    expect(counted.counts.statements).toBe(payments.length + 2);
    expect(outcomes.map((outcome) => outcome.payment.status)).toEqual(['DONE', 'DONE', 'ABORTED', 'DONE', 'DONE']);
    for (const [i, outcome] of outcomes.entries()) {
      expect(await together.payments.get(ADMIN, outcome.payment.id)).toEqual(outcome.payment);
      expect(await together.orders.get(ADMIN, outcome.payment.orderId!)).toMatchObject({
        status: i === 2 ? 'PAYMENT_FAILED' : 'PAID',
        paidAt: outcome.payment.approvedAt,
      });
      expect(JSON.parse((await together.keys.find('payment.process', 'admin', `p${i}`))!.response!)).toEqual(outcome);
    }
    // MUG 10: 2 + 1 + 3 sold, the 4 declined given back; CUP 10: 3 + 1 sold.
    expect(await together.inventory.levels(['CUP', 'MUG'])).toMatchObject([
      { sku: 'CUP', onHand: 6, reserved: 0 },
      { sku: 'MUG', onHand: 4, reserved: 0 },
    ]);
    const lines = await store.sql.all<{ sku: string; delta: number; on_hand: number }>(
      'SELECT sku, delta, on_hand FROM stock_movements WHERE id > $1 ORDER BY id',
      [movementsBefore],
    );
    const bySku = (sku: string) => lines.filter((line) => line.sku === sku).map((line) => [Number(line.delta), Number(line.on_hand)]);
    // In the order of the ledger, each line's on_hand is the one before it less its own units.
    for (const [sku, start] of [
      ['CUP', 10],
      ['MUG', 10],
    ] as const) {
      let onHand: number = start;
      for (const [delta, after] of bySku(sku)) {
        onHand += delta!;
        expect(after).toBe(onHand);
      }
    }
    expect(
      bySku('MUG')
        .map(([delta]) => delta)
        .sort(),
    ).toEqual([-1, -2, -3]);
    expect(
      bySku('CUP')
        .map(([delta]) => delta)
        .sort(),
    ).toEqual([-1, -3]);
  });

  it("placing an order waits for a SKU's stock_holds row another transaction holds, and goes by the stock that one left: short, it writes nothing and the order takes the transaction", async () => {
    const other = await openStore(location.location());
    try {
      let locked!: () => void;
      const lockTaken = new Promise<void>((resolve) => (locked = resolve));
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      // Another instance holds the SKU's stock_holds row (as whatever takes from what is available does first), then takes two of its three units away.
      const adjusting = other.sql.transaction(async (tx) => {
        await tx.one("SELECT sku FROM stock_holds WHERE sku = 'MUG' FOR UPDATE");
        locked();
        await released;
        await tx.run("UPDATE products SET on_hand = 1 WHERE sku = 'MUG'");
      });
      await lockTaken;
      const before = await written();
      const placing = steps.place({ owner: 'admin', key: 'k1', hash: 'h1' }, order({ quantity: 2 }));
      for (
        let i = 0;
        i < 500 && !(await other.sql.one("SELECT 1 AS waiting FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'WITH o AS (%'"));
        i++
      ) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      release();
      await adjusting;
      expect(await placing).toBe(false);
      expect(await written()).toEqual({ ...before, stock: [{ ...before.stock[0], onHand: 1, available: 1 }] });
      // The order as the client places it: refused by the transaction, with the stock as it is now.
      await expect(commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 2 }], key: 'k1' })).rejects.toThrow(
        'not enough stock: MUG (asked 2, available 1)',
      );
    } finally {
      await other.close();
    }
  });

  it("recording a payment writes all of it, or nothing when the key was used, the order is not payable as asked, not the caller's, or its reservation ran out", async () => {
    const placed = await commerce.orders.create({ isAdmin: false, userId: 7 }, { items: [{ sku: 'MUG', quantity: 1 }], key: 'o1' });
    const other = await commerce.orders.create({ isAdmin: false, userId: 7 }, { items: [{ sku: 'MUG', quantity: 1 }], key: 'o2' });
    const claim = { owner: 'user:7', key: 'p1', hash: 'hash-p1' };
    const ask = { orderId: placed.id, asked: 0, currency: '', method: 'test_approve' };
    expect(await steps.startPayment({ isAdmin: false, userId: 7 }, { ...ask, orderId: other.id }, { ...claim, key: 'p0' })).toBeDefined();
    const before = await written();
    expect(await steps.startPayment({ isAdmin: false, userId: 7 }, ask, { ...claim, key: 'p0' })).toBeUndefined();
    expect(await steps.startPayment({ isAdmin: false, userId: 8 }, ask, claim)).toBeUndefined();
    expect(await steps.startPayment({ isAdmin: false, userId: 7 }, { ...ask, asked: 11999 }, claim)).toBeUndefined();
    expect(await steps.startPayment({ isAdmin: false, userId: 7 }, { ...ask, currency: 'USD' }, claim)).toBeUndefined();
    expect(await steps.startPayment({ isAdmin: false, userId: 7 }, { ...ask, orderId: 'ord_none' }, claim)).toBeUndefined();
    clock += 15 * 60_000;
    expect(await steps.startPayment({ isAdmin: false, userId: 7 }, ask, claim)).toBeUndefined();
    expect(await written()).toEqual(before);

    clock -= 1;
    const payment = await steps.startPayment({ isAdmin: false, userId: 7 }, { ...ask, asked: 12000, currency: 'KRW' }, claim);
    expect(payment).toMatchObject({
      status: 'IN_PROGRESS',
      orderId: placed.id,
      userId: 7,
      amount: 12000,
      balance: 0,
      currency: 'KRW',
      method: 'test_approve',
      provider: 'sandbox',
      refunds: [],
    });
    expect(await commerce.payments.record(payment!.id)).toEqual(payment);
    expect(await written()).toMatchObject({ counts: { idempotency_keys: 4, payments: 2 }, states: ['PAYMENT_PENDING', 'PAYMENT_PENDING', 'held', 'held'] });
    expect((await commerce.keys.find('payment.process', 'user:7', 'p1'))!.resourceId).toBe(payment!.id);
    // Paid once: the order is not RESERVED any more, whatever the key.
    const recorded = await written();
    expect(await steps.startPayment({ isAdmin: false, userId: 7 }, ask, { ...claim, key: 'p2' })).toBeUndefined();
    expect(await written()).toEqual(recorded);
  });

  it('a settlement is made once: a second one, or a declined charge after an approved one, writes nothing; a decline releases the units', async () => {
    const paid = await commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 2 }], key: 'o1' });
    const payment = (await steps.startPayment(
      ADMIN,
      { orderId: paid.id, asked: 0, currency: '', method: 'test_approve' },
      { owner: 'admin', key: 'p1', hash: 'h1' },
    ))!;
    const first = await commerce.payments.charge(payment);
    expect(first).toMatchObject({ message: 'approved', payment: { status: 'DONE', balance: 24000 } });
    const settled = await written();
    expect(settled.stock).toMatchObject([{ onHand: 1, reserved: 0 }]);
    expect(settled.states).toEqual(['PAID', 'committed']);
    const again = await commerce.payments.charge(payment);
    expect(again.payment).toEqual(first.payment);
    expect(await written()).toEqual(settled);

    const declined = await commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 1 }], key: 'o2' });
    const failing = (await steps.startPayment(
      ADMIN,
      { orderId: declined.id, asked: 0, currency: '', method: 'test_decline_card_declined' },
      { owner: 'admin', key: 'p2', hash: 'h2' },
    ))!;
    expect((await commerce.payments.charge(failing)).payment).toMatchObject({ status: 'ABORTED', failureCode: 'CARD_DECLINED', balance: 0 });
    expect(await commerce.orders.get(ADMIN, declined.id)).toMatchObject({ status: 'PAYMENT_FAILED' });
    expect(await commerce.inventory.levels(['MUG'])).toMatchObject([{ onHand: 1, reserved: 0 }]);
    expect(JSON.parse((await commerce.keys.find('payment.process', 'admin', 'p2'))!.response!)).toMatchObject({
      payment: { id: failing.id, status: 'ABORTED' },
    });
  });
});
