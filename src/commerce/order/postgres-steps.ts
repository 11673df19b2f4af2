/**
 * Two steps of a checkout on PostgreSQL as one statement each, sent outside
 * a transaction (one statement is atomic by itself): placing an order, and
 * recording a payment of one before the provider is asked. The third, the
 * settlement, is Payments' own, with the order's pieces (orders.ts).
 *
 * Statement by statement in a transaction, a step cost six to eight round
 * trips to the server with BEGIN and COMMIT, and the rows it locked stayed
 * locked across them; here it is one, and the locks last as long as the
 * statement. The rows a step changes are locked by its first pieces, in the
 * order every transaction takes them (the SKUs' rows in SKU order; an
 * order's row, then its reservation's), and every write waits on what was
 * found in them: a step goes ahead with all of its writes or writes
 * nothing (the CHECKs stand behind that). Only the way everything goes as
 * planned is written here: a step that does not go ahead (a key used
 * before, stock short, a price changed since it was read, an order not
 * payable as asked) answers nothing, and the caller takes the step's
 * general way, a transaction on either backend, which says why.
 *
 * Domain module: nothing here prints or reads the environment.
 */
import type { Sql } from '../../store/sql.js';
import { newId, num, type Caller } from '../kernel/common.js';
import type { IdempotencyKeys } from '../kernel/idempotency.js';
import { Statement } from '../kernel/statement.js';
import type { Inventory } from '../inventory/inventory.js';
import { paymentRecord, type PaymentRecord, type PaymentRow, type Payments } from '../payment/payments.js';
import { insertOrderSql, type OrderRecord } from './order-rows.js';

/** A key's claim: its scope and owner, the key and the request's hash. */
interface Claim {
  owner: string;
  key: string;
  hash: string;
}

export class PostgresSteps {
  constructor(
    private readonly options: { sql: Sql; now: () => Date; keys: IdempotencyKeys; inventory: Inventory; payments: Payments },
  ) {}

  /**
   * Places `order`, priced from the catalogue as it was read just before:
   * its key claimed with it as the answer, its reservation and rows
   * written, its units taken; true when it went ahead. The SKUs'
   * stock_holds rows are locked first, and it goes ahead only where each is
   * priced as it was and has enough.
   */
  async place(claim: Claim, order: OrderRecord): Promise<boolean> {
    const s = new Statement();
    const skus = s.$(order.items.map((item) => item.sku));
    const when = '(SELECT go FROM go)';
    const pieces = [
      // The items in the order's positions.
      `item AS (SELECT * FROM unnest(${s.$(order.items.map((_, position) => position))}::int[], ${skus}::text[], ${s.$(order.items.map((item) => item.quantity))}::bigint[],
        ${s.$(order.items.map((item) => item.name))}::text[], ${s.$(order.items.map((item) => item.unitPrice))}::bigint[], ${s.$(order.items.map((item) => item.amount))}::bigint[])
        AS i (position, sku, quantity, name, unit_price, amount))`,
      // The SKUs' stock_holds rows locked, in SKU order (inventory.ts): their products rows are read as they are, without waiting for a settlement.
      `stock AS (SELECT h.sku, p.on_hand - (h.reserved_total - p.released_total) AS available, p.name, p.price, p.currency
        FROM stock_holds h JOIN products p ON p.sku = h.sku WHERE h.sku = ANY(${skus}::text[]) ORDER BY h.sku FOR UPDATE OF h)`,
      `go AS (SELECT COUNT(*) = ${s.$(order.items.length)} AND bool_and(s.available >= i.quantity AND s.name = i.name AND s.price = i.unit_price AND s.currency = ${s.$(order.currency)}) AS go
        FROM item i JOIN stock s ON s.sku = i.sku)`,
      `claim AS (${this.options.keys.claimSql(s, { scope: 'order.create', ...claim, resourceId: order.id, answer: order }, when)})`,
      ...this.options.inventory.reservePieces(s, 'EXISTS (SELECT 1 FROM claim)', {
        id: order.reservationId,
        orderId: order.id,
        expiresAt: order.reservationExpiresAt,
        now: new Date(order.createdAt),
      }),
      `placed AS (${insertOrderSql(s, order, 'r.id', ' FROM reservation r')})`,
      `order_item AS (INSERT INTO order_items (order_id, position, sku, name, quantity, unit_price, amount)
        SELECT o.id, i.position, i.sku, i.name, i.quantity, i.unit_price, i.amount FROM placed o CROSS JOIN item i)`,
    ];
    try {
      const row = await this.options.sql.one<{ placed: number }>(`WITH ${pieces.join(',\n')}\nSELECT COUNT(*) AS placed FROM placed`, s.params);
      return num(row!.placed) === 1;
    } catch (error) {
      // The stock rule's trigger refused it (check_violation): on_hand was set down after the statement began, by a
      // change that held the SKU's stock_holds row before this one did. Nothing was written; the general way says why.
      if ((error as { code?: unknown }).code === '23514') return false;
      throw error;
    }
  }

  /**
   * Records a payment IN_PROGRESS of the order `ask` names, under its key,
   * with the order moved to PAYMENT_PENDING and its reservation held: the
   * payment as written, or nothing when the order is not RESERVED, not the
   * caller's, not payable as asked, or its reservation has run out, or
   * when the key was used before.
   */
  async startPayment(caller: Caller, ask: { orderId: string; asked: number; currency: string; method: string }, claim: Claim): Promise<PaymentRecord | undefined> {
    const s = new Statement();
    const id = newId('pay');
    const now = s.$(this.options.now().toISOString());
    const conditions = [`id = ${s.$(ask.orderId)}`, "state = 'RESERVED'"];
    if (!caller.isAdmin) conditions.push(`user_id = ${s.$(caller.userId ?? -1)}`);
    if (ask.asked !== 0) conditions.push(`total_amount = ${s.$(ask.asked)}`);
    if (ask.currency) conditions.push(`currency = ${s.$(ask.currency)}`);
    const claimed = 'EXISTS (SELECT 1 FROM claim)';
    const pieces = [
      `payable AS (SELECT id, user_id, total_amount, currency, reservation_id FROM orders WHERE ${conditions.join(' AND ')} FOR UPDATE)`,
      `holdable AS (SELECT id FROM reservations WHERE id = (SELECT reservation_id FROM payable) AND state = 'active' AND expires_at > ${now} FOR UPDATE)`,
      `claim AS (${this.options.keys.claimSql(s, { scope: 'payment.process', ...claim, resourceId: id }, 'EXISTS (SELECT 1 FROM holdable)')})`,
      `moved AS (UPDATE orders SET state = 'PAYMENT_PENDING', payment_id = ${s.$(id)}, updated_at = ${now} WHERE id = (SELECT id FROM payable) AND ${claimed})`,
      `held AS (UPDATE reservations SET state = 'held', updated_at = ${now} WHERE id = (SELECT id FROM holdable) AND ${claimed})`,
      `payment AS (${this.options.payments.recordSql(
        s,
        id,
        ask.method,
        { orderId: 'id', userId: 'user_id', amount: 'total_amount', currency: 'currency' },
        ` FROM payable WHERE ${claimed}`,
      )})`,
    ];
    const row = await this.options.sql.one<PaymentRow>(`WITH ${pieces.join(',\n')}\nSELECT * FROM payment`, s.params);
    return row && paymentRecord(row, []);
  }
}
