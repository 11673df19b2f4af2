/**
 * Orders over the store, inventory and payments, one implementation for
 * both backends. The state machine (documented in proto/order/v1/
 * order.proto and the README):
 *
 *   RESERVED -> PAYMENT_PENDING -> PAID -> CANCELLED (refunded, units restocked)
 *                                      -> PARTIALLY_REFUNDED (part of the payment refunded) -> REFUNDED
 *                                      -> REFUNDED (all of it refunded, in one refund or several)
 *                               -> PAYMENT_FAILED (units released)
 *            -> EXPIRED (the reservation ran out; units released)
 *            -> CANCELLED (units released)
 *
 * PARTIALLY_REFUNDED and REFUNDED follow the payment's refunds (an admin's
 * RefundPayment, or a cancel's) as the provider makes them; they move money,
 * not stock. Either, like PAID, can still be cancelled (the rest refunded,
 * units back on hand).
 *
 * Every move is a conditional UPDATE from the state it leaves, in the
 * transaction that moves the stock (or settles the payment), so two
 * instances doing the same thing at once cannot both do it.
 *
 * Domain module: nothing here prints or reads the environment.
 */
import type { Sql } from '../../store/sql.js';
import { orderPageStart, orderPageToken } from './page-token.js';
import {
  actorOf,
  checkCurrency,
  checkItems,
  checkKey,
  checkText,
  CommerceError,
  DEFAULT_RESERVATION_TTL_MS,
  integer,
  invalid,
  mayAccess,
  MAX_AMOUNT,
  newId,
  notFound,
  num,
  precondition,
  requestHash,
  sortedItems,
  type Caller,
  type Quantity,
} from '../kernel/common.js';
import type { IdempotencyKeys, KeyedWork } from '../kernel/idempotency.js';
import { Statement } from '../kernel/statement.js';
import { ShortStock, type Inventory, type StockLevel } from '../inventory/inventory.js';
import type { CommerceObserver, NewPayment, PaymentOutcome, PaymentRecord, Payments, Publish } from '../payment/payments.js';

import { insertOrderSql, ORDER_STATUSES, settleOrderSql, type OrderItemRecord, type OrderRecord, type OrderStatus } from './order-rows.js';
import { PostgresSteps } from './postgres-steps.js';

/** Why a user token may not cancel its paid order: the cancel would refund it (payment/payments.ts, REFUND_NEEDS_ADMIN). */
const PAID_CANCEL_NEEDS_ADMIN = (id: string, status: string) =>
  `order ${id} is ${status}: cancelling a paid order refunds it, and refunds need the admin token (ask the shop to cancel it)`;

export type { OrderItemRecord, OrderRecord, OrderStatus } from './order-rows.js';

const ORDER_PAID = 'order.paid';
const ORDER_CANCELLED = 'order.cancelled';
const ORDER_REFUNDED = 'order.refunded';

/** The states of a paid order: refunds move it among them; a cancel moves it on to CANCELLED. */
const PAID_STATES: readonly OrderStatus[] = ['PAID', 'PARTIALLY_REFUNDED', 'REFUNDED'];

interface OrderRow {
  id: string;
  user_id: number | null;
  state: OrderStatus;
  currency: string;
  total_amount: number;
  reservation_id: string;
  expires_at: string;
  payment_id: string | null;
  created_at: string;
  updated_at: string;
  paid_at: string | null;
  cancelled_at: string | null;
  cancel_reason: string | null;
}

const SELECT_ORDER = `SELECT o.id, o.user_id, o.state, o.currency, o.total_amount, o.reservation_id, r.expires_at, o.payment_id,
  o.created_at, o.updated_at, o.paid_at, o.cancelled_at, o.cancel_reason
  FROM orders o JOIN reservations r ON r.id = o.reservation_id`;

/** The most catalogue entries kept (Orders.#catalogue); past them it starts again from empty. */
const CATALOGUE_KEPT = 10_000;

export interface OrdersOptions {
  sql: Sql;
  now: () => Date;
  inventory: Inventory;
  payments: Payments;
  keys: IdempotencyKeys;
  /** Webhook events, written in the transactions that make them; none without webhooks. */
  publish?: Publish | undefined;
  observe?: CommerceObserver | undefined;
  /** How long an order's reservation holds (default 15 minutes). */
  reservationTtlMs?: number | undefined;
}

export interface OrderPage {
  orders: OrderRecord[];
  nextPageToken: string;
}

export class Orders {
  readonly #sql: Sql;
  readonly #now: () => Date;
  readonly #keys: IdempotencyKeys;
  /** On PostgreSQL, placing an order and recording its payment as one statement each (postgres-steps.ts). */
  readonly #steps: PostgresSteps | undefined;
  /**
   * The catalogue (name, price, currency by SKU) as this process last read
   * it, which the PostgreSQL step prices an order from without reading it
   * first: the step checks each entry under lock, and an order priced from
   * one changed since takes the general way, which reads them afresh (and
   * keeps them here).
   */
  readonly #catalogue = new Map<string, { name: string; price: number; currency: string }>();

  constructor(private readonly options: OrdersOptions) {
    this.#sql = options.sql;
    this.#now = options.now;
    this.#keys = options.keys;
    this.#steps = options.sql.dialect === 'postgres' ? new PostgresSteps(options) : undefined;
    options.payments.onSettle({
      inTransaction: (tx, payment) => this.#settled(tx, payment),
      // An order.paid event is written in the settlement's transaction: with webhooks, the settlement is one.
      pieces: options.publish ? undefined : (s, settled) => this.#settledPieces(s, settled),
    });
    options.payments.onRefund((tx, payment) => this.#refunded(tx, payment));
  }

  async #record(id: string, sql: Sql = this.#sql): Promise<OrderRecord | undefined> {
    const row = await sql.one<OrderRow>(`${SELECT_ORDER} WHERE o.id = $1`, [id]);
    return row && this.#withItems(row, sql);
  }

  async #withItems(row: OrderRow, sql: Sql): Promise<OrderRecord> {
    const items = await sql.all<{ sku: string; name: string; quantity: number; unit_price: number; amount: number }>(
      'SELECT sku, name, quantity, unit_price, amount FROM order_items WHERE order_id = $1 ORDER BY position',
      [row.id],
    );
    return {
      id: row.id,
      userId: row.user_id === null ? null : num(row.user_id),
      status: row.state,
      items: items.map((i) => ({ sku: i.sku, name: i.name, quantity: num(i.quantity), unitPrice: num(i.unit_price), amount: num(i.amount) })),
      totalAmount: num(row.total_amount),
      currency: row.currency,
      reservationId: row.reservation_id,
      reservationExpiresAt: row.expires_at,
      paymentId: row.payment_id,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      paidAt: row.paid_at,
      cancelledAt: row.cancelled_at,
      cancelReason: row.cancel_reason,
    };
  }

  /**
   * Prices the items from the catalogue and reserves them; idempotent by
   * key. Reservations that ran out are expired where it matters: when the
   * stock is short while one was due (or units came free meanwhile), what
   * is due is expired and the order is tried once more.
   */
  async create(
    caller: Caller,
    request: { items: readonly { sku?: string; quantity?: string | number }[]; userId?: string | number; key: string },
  ): Promise<OrderRecord> {
    const items = checkItems(request.items);
    const key = checkKey(request.key);
    const named = integer('user_id', request.userId, 0, Number.MAX_SAFE_INTEGER);
    if (named !== 0 && !caller.isAdmin && named !== caller.userId)
      throw new CommerceError('PERMISSION_DENIED', 'only the admin token may order for another user');
    const userId = named !== 0 ? named : caller.userId;
    const claim = { scope: 'order.create' as const, owner: actorOf(caller), key, hash: requestHash({ userId, items: sortedItems(items) }) };
    if (caller.isAdmin && named !== 0 && !(await this.#sql.one('SELECT id FROM users WHERE id = $1', [named]))) throw notFound(`no user with id ${named}`);
    if (this.#steps) {
      const priced = await this.#price(this.#sql, items, true);
      const order = priced instanceof CommerceError ? undefined : this.#newOrder(newId('ord'), userId, priced);
      if (order && (await this.#steps.place(claim, order))) return order;
    }
    for (let expired = false; ; expired = true) {
      try {
        return await this.#keys.once(this.#sql, claim, {
          plan: async (tx) => this.#plan(tx, items, userId),
          resume: async (id) => (await this.#record(id))!,
        });
      } catch (error) {
        if (expired || !(error instanceof ShortStock) || !error.mayFree) throw error;
        await this.expireDue();
      }
    }
  }

  /**
   * A new order of `items`, priced from the catalogue as it stands in `tx`:
   * its answer (made from what will be written, not read back) and the
   * writes, or the refusal `run` throws once the key proved this request's.
   */
  async #plan(tx: Sql, items: readonly Quantity[], userId: number | null): Promise<KeyedWork<OrderRecord, void>> {
    const id = newId('ord');
    const priced = await this.#price(tx, items);
    if (priced instanceof CommerceError) {
      return {
        id,
        run: () => {
          throw priced;
        },
      };
    }
    const order = this.#newOrder(id, userId, priced);
    return {
      id,
      answer: order,
      // The order is written before the stock is taken (see Inventory.reserve).
      run: async () =>
        void (await this.options.inventory.reserve(tx, items, {
          id: order.reservationId,
          now: new Date(order.createdAt),
          expiresAt: order.reservationExpiresAt,
          orderId: id,
          skusChecked: true,
          beforeTaking: () => this.#write(tx, order),
        })),
    };
  }

  /** A new order of priced items, as it is written (RESERVED from now, its reservation named). */
  #newOrder(id: string, userId: number | null, priced: { items: OrderItemRecord[]; total: number; currency: string }): OrderRecord {
    const now = this.#now();
    const at = now.toISOString();
    return {
      id,
      userId,
      status: 'RESERVED',
      items: priced.items,
      totalAmount: priced.total,
      currency: priced.currency,
      reservationId: newId('res'),
      reservationExpiresAt: new Date(now.getTime() + (this.options.reservationTtlMs ?? DEFAULT_RESERVATION_TTL_MS)).toISOString(),
      paymentId: null,
      createdAt: at,
      updatedAt: at,
      paidAt: null,
      cancelledAt: null,
      cancelReason: null,
    };
  }

  /** The items at their catalogue prices, or why they cannot be ordered together. */
  async #price(sql: Sql, items: readonly Quantity[], guess = false): Promise<{ items: OrderItemRecord[]; total: number; currency: string } | CommerceError> {
    let levels = guess ? items.map((item) => this.#catalogue.get(item.sku)) : [];
    if (!guess || !levels.every((level) => level !== undefined)) {
      try {
        levels = await this.options.inventory.levels(
          items.map((item) => item.sku),
          sql,
        );
      } catch (error) {
        if (error instanceof CommerceError) return error;
        throw error;
      }
      if (this.#steps) {
        if (this.#catalogue.size + levels.length > CATALOGUE_KEPT) this.#catalogue.clear();
        for (const { sku, name, price, currency } of levels as StockLevel[]) this.#catalogue.set(sku, { name, price, currency });
      }
    }
    const currencies = [...new Set(levels.map((level) => level!.currency))];
    if (currencies.length > 1) return precondition(`the items are priced in different currencies (${currencies.join(', ')}): order them separately`);
    const priced = items.map((item, i) => ({
      sku: item.sku,
      name: levels[i]!.name,
      quantity: item.quantity,
      unitPrice: levels[i]!.price,
      amount: levels[i]!.price * item.quantity,
    }));
    const total = priced.reduce((sum, item) => sum + item.amount, 0);
    if (!Number.isSafeInteger(total) || total > MAX_AMOUNT) return invalid(`the order's total would be ${total}, above ${MAX_AMOUNT}`);
    return { items: priced, total, currency: currencies[0]! };
  }

  /** The rows of a new order: the order and its items, in two statements whatever their number. */
  async #write(tx: Sql, order: OrderRecord): Promise<void> {
    const row = new Statement();
    await tx.one(insertOrderSql(row, order, row.$(order.reservationId)), row.params);
    const lines = new Statement();
    const values = lines.rows(order.items.map((item, position) => [order.id, position, item.sku, item.name, item.quantity, item.unitPrice, item.amount]));
    await tx.run(`INSERT INTO order_items (order_id, position, sku, name, quantity, unit_price, amount) VALUES ${values}`, lines.params);
  }

  /** An order the caller may see (NOT_FOUND otherwise), expired first when its reservation ran out. */
  async get(caller: Caller, id: string): Promise<OrderRecord> {
    let order = id ? await this.#record(id) : undefined;
    if (!order || !mayAccess(caller, order.userId)) throw notFound(`no order with id "${id.slice(0, 64)}"`);
    if (order.status === 'RESERVED' && order.reservationExpiresAt <= this.#now().toISOString()) {
      await this.#expire(order.reservationId);
      order = (await this.#record(id))!;
    }
    return order;
  }

  async list(caller: Caller, request: { pageSize?: number; pageToken?: string; status?: string; userId?: string | number }): Promise<OrderPage> {
    const size = integer('page_size', request.pageSize ?? 0, 0, 100) || 50;
    const conditions: string[] = [];
    const params: (string | number)[] = [];
    const named = integer('user_id', request.userId, 0, Number.MAX_SAFE_INTEGER);
    if (!caller.isAdmin) {
      if (named !== 0 && named !== caller.userId) throw new CommerceError('PERMISSION_DENIED', "only the admin token may list another user's orders");
      params.push(caller.userId ?? -1);
      conditions.push(`o.user_id = $${params.length}`);
    } else if (named !== 0) {
      params.push(named);
      conditions.push(`o.user_id = $${params.length}`);
    }
    const status = request.status && request.status !== 'ORDER_STATUS_UNSPECIFIED' ? String(request.status) : '';
    if (status) {
      if (!(ORDER_STATUSES as readonly string[]).includes(status))
        throw invalid(`status must be one of ${ORDER_STATUSES.join(', ')}; got ${status.slice(0, 64)}`);
      params.push(status);
      conditions.push(`o.state = $${params.length}`);
    }
    const filter = { status, userId: named };
    if (request.pageToken) {
      const [createdAt, id] = orderPageStart(request.pageToken, filter);
      params.push(createdAt, id);
      conditions.push(`(o.created_at < $${params.length - 1} OR (o.created_at = $${params.length - 1} AND o.id < $${params.length}))`);
    }
    params.push(size + 1);
    const where = conditions.length > 0 ? ` WHERE ${conditions.join(' AND ')}` : '';
    const rows = await this.#sql.all<OrderRow>(
      `${SELECT_ORDER}${where} ORDER BY o.created_at DESC, o.id DESC LIMIT CAST($${params.length} AS INTEGER)`,
      params,
    );
    const page = rows.slice(0, size);
    const orders: OrderRecord[] = [];
    for (const row of page) orders.push(await this.#withItems(row, this.#sql));
    const last = page.at(-1);
    return { orders, nextPageToken: rows.length > size && last ? orderPageToken(last.created_at, last.id, filter) : '' };
  }

  /**
   * Pays an order's total (OrderService.ProcessPayment, and
   * PaymentService.ProcessPayment with an order_id). A payment of the order
   * still in progress is reconciled first; the order moves to
   * PAYMENT_PENDING in the transaction that records the new payment.
   */
  async pay(caller: Caller, request: { orderId: string; amount?: string | number; currency?: string; method?: string; key: string }): Promise<PaymentOutcome> {
    const key = checkKey(request.key);
    if (!request.orderId) throw invalid('order_id is required');
    const asked = integer('amount', request.amount, 0, MAX_AMOUNT);
    const currency = checkCurrency(request.currency, '');
    const payments = this.options.payments;
    const method = payments.checkMethod(request.method);
    const hash = requestHash({ order: request.orderId, amount: asked, currency, method });
    if (this.#steps) {
      const payment = await this.#steps.startPayment(caller, { orderId: request.orderId, asked, currency, method }, { owner: actorOf(caller), key, hash });
      if (payment) return payments.charge(payment);
    }
    for (let caughtUp = false; ; caughtUp = true) {
      try {
        return await payments.process(caller, key, hash, (tx, paymentId) =>
          this.#startPayment(tx, caller, { orderId: request.orderId, asked, currency, method }, paymentId, caughtUp),
        );
      } catch (error) {
        if (!(error instanceof Behind)) throw error;
        // Brought up to date outside the payment's transaction, then tried once more (which refuses it as it now stands).
        if (error.paymentId) await payments.reconcile(error.paymentId);
        else await this.#expire(error.reservationId);
      }
    }
  }

  /**
   * The order's side of a new payment, in the transaction that records it:
   * the checks against the order as it stands, and its move to
   * PAYMENT_PENDING with its reservation held. An order whose reservation
   * ran out unexpired, or whose payment is still in progress, is `Behind`
   * (unless `caughtUp`): it is expired, or its payment reconciled, first.
   */
  async #startPayment(
    tx: Sql,
    caller: Caller,
    ask: { orderId: string; asked: number; currency: string; method: string },
    paymentId: string,
    caughtUp: boolean,
  ): Promise<NewPayment> {
    const row = await tx.one<OrderRow>(`${SELECT_ORDER} WHERE o.id = $1`, [ask.orderId]);
    const userId = row && row.user_id !== null ? num(row.user_id) : null;
    if (!row || !mayAccess(caller, userId)) throw notFound(`no order with id "${ask.orderId.slice(0, 64)}"`);
    const now = this.#now().toISOString();
    if (!caughtUp && row.state === 'RESERVED' && row.expires_at <= now) throw new Behind(row.reservation_id);
    if (!caughtUp && row.state === 'PAYMENT_PENDING' && row.payment_id) throw new Behind(row.reservation_id, row.payment_id);
    const total = num(row.total_amount);
    if (ask.asked !== 0 && ask.asked !== total) {
      throw precondition(
        `amount ${ask.asked} is not the order's total ${total} ${row.currency}: an order is paid in full, at its catalogue prices (give 0 or the total)`,
      );
    }
    if (ask.currency && ask.currency !== row.currency) throw precondition(`currency ${ask.currency} is not the order's currency ${row.currency}`);
    if (row.state !== 'RESERVED') throw precondition(`order ${row.id} is ${row.state}: only a RESERVED order can be paid`);
    // The order's row first, then its reservation's: every transaction that moves both takes them in this order, so none deadlocks.
    const moved = await tx.run("UPDATE orders SET state = 'PAYMENT_PENDING', payment_id = $2, updated_at = $3 WHERE id = $1 AND state = 'RESERVED'", [
      row.id,
      paymentId,
      now,
    ]);
    if (moved === 0) throw new CommerceError('ABORTED', `order ${row.id} changed meanwhile; try again`);
    if (!(await this.options.inventory.hold(tx, row.reservation_id))) {
      throw precondition(`the reservation of order ${row.id} expired at ${row.expires_at}: place the order again`);
    }
    return { orderId: row.id, userId, amount: total, currency: row.currency, method: ask.method };
  }

  /** The order side of a settled payment: PAID with the units committed, or PAYMENT_FAILED with them released. */
  async #settled(tx: Sql, payment: PaymentRecord): Promise<void> {
    if (!payment.orderId) return;
    const paid = payment.status === 'DONE';
    // The order first, then its reservation, the stock last (see pay).
    const s = new Statement();
    const moved = await tx.one<{ reservation_id: string }>(settleOrderSql(s, s.$(payment.orderId), paid, this.#now().toISOString()), s.params);
    // The order moved to PAYMENT_PENDING with the payment (pay), so it has moved now; had it not, its reservation ends with the payment still.
    const reservationId =
      moved?.reservation_id ?? (await tx.one<{ reservation_id: string }>('SELECT reservation_id FROM orders WHERE id = $1', [payment.orderId]))!.reservation_id;
    if (paid) {
      await this.options.publish?.(ORDER_PAID, async () => this.#record(payment.orderId!, tx), tx);
      await this.options.inventory.commit(tx, reservationId, `order ${payment.orderId} paid`, 'system');
    } else {
      await this.options.inventory.release(tx, reservationId);
    }
  }

  /**
   * The same as #settled, as pieces of one statement on PostgreSQL settling
   * payments together (`settled`: their rows once settled, with id,
   * order_id, status and at; a payment of no order has nothing here).
   */
  #settledPieces(s: Statement, settled: string): string[] {
    const paid = "st.status = 'DONE'";
    return [
      `moved AS (UPDATE orders SET state = CASE WHEN ${paid} THEN 'PAID' ELSE 'PAYMENT_FAILED' END, paid_at = CASE WHEN ${paid} THEN st.at ELSE orders.paid_at END,
        updated_at = st.at FROM ${settled} st WHERE orders.id = st.order_id AND orders.state = 'PAYMENT_PENDING')`,
      // The order moved to PAYMENT_PENDING with the payment (pay), so it moves now; had it not, its reservation ends with the payment still.
      ...this.options.inventory.endAllPieces(
        s,
        `SELECT o.reservation_id AS id, ${paid} AS sold, 'order ' || o.id || ' paid' AS reason, st.at FROM ${settled} st JOIN orders o ON o.id = st.order_id`,
      ),
    ];
  }

  /**
   * The order side of a refund the provider made (in its transaction): the
   * order is REFUNDED once its payment is refunded in full (balance 0 and no
   * refund still awaiting the provider), PARTIALLY_REFUNDED before, with
   * order.refunded written as it becomes REFUNDED. An order that is not
   * paid any more (cancelled meanwhile) stays as it is.
   */
  async #refunded(tx: Sql, payment: PaymentRecord): Promise<void> {
    if (!payment.orderId) return;
    const full = payment.balance === 0 && payment.refunds.every((refund) => refund.status === 'DONE');
    const state = full ? 'REFUNDED' : 'PARTIALLY_REFUNDED';
    const moved = await tx.run("UPDATE orders SET state = $2, updated_at = $3 WHERE id = $1 AND state IN ('PAID', 'PARTIALLY_REFUNDED') AND payment_id = $4", [
      payment.orderId,
      state,
      this.#now().toISOString(),
      payment.id,
    ]);
    if (moved === 1 && full) await this.options.publish?.(ORDER_REFUNDED, async () => this.#record(payment.orderId!, tx), tx);
  }

  /**
   * Cancels a RESERVED order (units released) or, with the admin token, a
   * paid one (PAID, PARTIALLY_REFUNDED or REFUNDED: what is left refunded in
   * full under a key of its own, so a retried cancel refunds once; units
   * back on hand). A CANCELLED order is returned as it is.
   */
  async cancel(caller: Caller, id: string, reasonText: string | undefined): Promise<OrderRecord> {
    const reason = checkText('reason', reasonText) || 'cancelled';
    let order = await this.get(caller, id);
    if (order.status === 'PAYMENT_PENDING' && order.paymentId) {
      await this.options.payments.reconcile(order.paymentId);
      order = await this.get(caller, id);
    }
    if (order.status === 'CANCELLED') return order;
    const paid = PAID_STATES.includes(order.status);
    // Cancelling a paid order refunds it and puts its units back on sale: the merchant's act, as a refund is.
    if (paid && !caller.isAdmin) throw new CommerceError('PERMISSION_DENIED', PAID_CANCEL_NEEDS_ADMIN(order.id, order.status));
    if (paid && order.paymentId) {
      const payment = await this.options.payments.record(order.paymentId);
      if (payment && payment.balance > 0) {
        await this.options.payments.refund(
          { isAdmin: true, userId: null },
          { paymentId: payment.id, amount: 0, reason: `order cancelled: ${reason}`, key: `order-cancel:${order.id}` },
          'system',
        );
      }
    } else if (order.status !== 'RESERVED') {
      throw precondition(`order ${order.id} is ${order.status}: only a RESERVED, PAID, PARTIALLY_REFUNDED or REFUNDED order can be cancelled`);
    }
    const moved = await this.#sql.transaction(async (tx) => {
      const at = this.#now().toISOString();
      // From where it stood, or for a paid order from any paid state: the cancel's own refund has just moved it among them.
      const from = paid ? `state IN (${PAID_STATES.map((state) => `'${state}'`).join(', ')})` : "state = 'RESERVED'";
      const changed = await tx.run(`UPDATE orders SET state = 'CANCELLED', cancelled_at = $2, cancel_reason = $3, updated_at = $2 WHERE id = $1 AND ${from}`, [
        order.id,
        at,
        reason,
      ]);
      if (changed === 0) return false;
      await this.options.publish?.(ORDER_CANCELLED, async () => this.#record(order.id, tx), tx);
      if (!paid) await this.options.inventory.release(tx, order.reservationId);
      else await this.options.inventory.restock(tx, order.items, `order ${order.id} cancelled`, actorOf(caller));
      return true;
    });
    const now = await this.get(caller, id);
    if (!moved && now.status !== 'CANCELLED') throw new CommerceError('ABORTED', `order ${id} changed meanwhile (now ${now.status}); try again`);
    return now;
  }

  /** Expires one reservation that ran out (and its order); false when it was not due or not active. */
  async #expire(reservationId: string): Promise<boolean> {
    const expired = await this.#sql
      .transaction(async (tx) => {
        // The order first, then its reservation (see pay); a reservation that is not due, or not active, undoes the order's move.
        await tx.run("UPDATE orders SET state = 'EXPIRED', updated_at = $2 WHERE reservation_id = $1 AND state = 'RESERVED'", [
          reservationId,
          this.#now().toISOString(),
        ]);
        if (!(await this.options.inventory.release(tx, reservationId, 'expired'))) throw new NotExpired();
        return true;
      })
      .catch((error: unknown) => {
        if (error instanceof NotExpired) return false;
        throw error;
      });
    if (expired) this.options.observe?.expiries?.(1);
    return expired;
  }

  /** Expires every reservation past its time (their orders become EXPIRED, their units available). */
  async expireDue(): Promise<number> {
    let count = 0;
    for (;;) {
      const due = await this.options.inventory.due();
      for (const id of due) if (await this.#expire(id)) count++;
      if (due.length < 100) return count;
    }
  }

  /** How many orders are in each status (for the metrics). */
  async countByStatus(): Promise<Record<OrderStatus, number>> {
    const rows = await this.#sql.all<{ state: OrderStatus; count: number }>('SELECT state, COUNT(*) AS count FROM orders GROUP BY state');
    const counts = Object.fromEntries(ORDER_STATUSES.map((status) => [status, 0])) as Record<OrderStatus, number>;
    for (const row of rows) counts[row.state] = num(row.count);
    return counts;
  }
}

/** Rolls back an expiry whose reservation was not due or not active any more. */
class NotExpired extends Error {}

/** An order to bring up to date before it is paid: its reservation ran out unexpired, or it has a payment in progress. */
class Behind extends Error {
  constructor(
    readonly reservationId: string,
    readonly paymentId?: string,
  ) {
    super('the order is to be brought up to date first');
  }
}
