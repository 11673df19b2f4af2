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
import { isCheckViolation } from '../../store/errors.js';
import { rowCheck, type Sql } from '../../store/sql.js';
import { newId, type Caller } from '../kernel/common.js';
import type { IdempotencyKeys } from '../kernel/idempotency.js';
import { Statement } from '../kernel/statement.js';
import { Together } from '../kernel/together.js';
import type { Inventory } from '../inventory/inventory.js';
import { paymentRecord, type PaymentRecord, type PaymentRow, type Payments } from '../payment/payments.js';
import { insertOrdersSql, type OrderRecord } from './order-rows.js';

/** A key's claim: its scope and owner, the key and the request's hash. */
interface Claim {
  owner: string;
  key: string;
  hash: string;
}

export class PostgresSteps {
  constructor(private readonly options: { sql: Sql; now: () => Date; keys: IdempotencyKeys; inventory: Inventory; payments: Payments }) {}

  /**
   * Places `order`, priced from the catalogue as it was read just before:
   * its key claimed with it as the answer, its reservation and rows
   * written, its units taken; true when it went ahead. It goes ahead only
   * where each SKU is priced as it was and has enough.
   *
   * Orders are placed together (kernel/together.ts): while a statement
   * placing some is in flight, the orders that come wait, and the next
   * statement places them all (each key once).
   */
  place(claim: Claim, order: OrderRecord): Promise<boolean> {
    return this.#placing.add({ claim, order });
  }

  readonly #placing = new Together<{ claim: Claim; order: OrderRecord }, boolean>(
    async (batch) => {
      const placed = await this.#placeAll(batch);
      return batch.map(({ order }) => placed.has(order.id));
    },
    ({ claim }) => [JSON.stringify([claim.owner, claim.key])],
  );

  /**
   * One statement placing `batch`: the ids of the orders it placed. The
   * SKUs' stock_holds rows are locked first (in SKU order), then an order
   * goes ahead when each of its SKUs is priced as it was and has enough for
   * it and for every order before it in the batch that is priced as it was
   * (whether or not that one's key turns out to be free: an order refused
   * for stock it might have had takes the general way, which places it).
   */
  async #placeAll(batch: readonly { claim: Claim; order: OrderRecord }[]): Promise<Set<string>> {
    const s = new Statement();
    const orders = batch.map((placing) => placing.order);
    const items = orders.flatMap((order, ord) => order.items.map((item, position) => ({ ord, position, ...item })));
    const pieces = [
      `o AS (${s.unnest({
        ord: [orders.map((_, ord) => ord), 'int'],
        id: [orders.map((order) => order.id), 'text'],
        user_id: [orders.map((order) => order.userId), 'bigint'],
        currency: [orders.map((order) => order.currency), 'text'],
        total_amount: [orders.map((order) => order.totalAmount), 'bigint'],
        reservation_id: [orders.map((order) => order.reservationId), 'text'],
        expires_at: [orders.map((order) => order.reservationExpiresAt), 'text'],
        created_at: [orders.map((order) => order.createdAt), 'text'],
        items: [orders.map((order) => order.items.length), 'int'],
        owner: [batch.map((placing) => placing.claim.owner), 'text'],
        key: [batch.map((placing) => placing.claim.key), 'text'],
        request_hash: [batch.map((placing) => placing.claim.hash), 'text'],
        answer: [orders.map((order) => JSON.stringify(order)), 'text'],
      })})`,
      // The items, each in its order's position.
      `item AS (${s.unnest({
        ord: [items.map((item) => item.ord), 'int'],
        position: [items.map((item) => item.position), 'int'],
        sku: [items.map((item) => item.sku), 'text'],
        quantity: [items.map((item) => item.quantity), 'bigint'],
        name: [items.map((item) => item.name), 'text'],
        unit_price: [items.map((item) => item.unitPrice), 'bigint'],
        amount: [items.map((item) => item.amount), 'bigint'],
      })})`,
      // The SKUs' stock_holds rows locked, in SKU order (inventory.ts): their products rows are read as they are, without waiting for a settlement.
      `stock AS (SELECT h.sku, p.on_hand - (h.reserved_total - p.released_total) AS available, p.name, p.price, p.currency
        FROM stock_holds h JOIN products p ON p.sku = h.sku WHERE h.sku IN (SELECT sku FROM item) ORDER BY h.sku FOR UPDATE OF h)`,
      `priced AS (SELECT o.ord FROM o JOIN item i ON i.ord = o.ord JOIN stock s ON s.sku = i.sku
        GROUP BY o.ord, o.items HAVING COUNT(*) = o.items AND bool_and(s.name = i.name AND s.price = i.unit_price AND s.currency = o.currency))`,
      // What the priced orders up to each one take of each SKU.
      `taking AS (SELECT i.ord, i.sku, SUM(i.quantity) OVER (PARTITION BY i.sku ORDER BY i.ord, i.position) AS upto FROM item i WHERE i.ord IN (SELECT ord FROM priced))`,
      `go AS (SELECT t.ord FROM taking t JOIN stock s ON s.sku = t.sku GROUP BY t.ord HAVING bool_and(t.upto <= s.available))`,
      `claim AS (${this.options.keys.claimAllSql(s, 'order.create', '(SELECT owner, key, request_hash, id AS resource_id, answer FROM o WHERE ord IN (SELECT ord FROM go)) AS asked')})`,
      'claimed AS (SELECT * FROM o WHERE o.id IN (SELECT resource_id FROM claim))',
      ...this.options.inventory.reserveAllPieces(s, this.options.now().toISOString()),
      `placed AS (${insertOrdersSql('claimed c WHERE c.reservation_id IN (SELECT id FROM reservation)')})`,
      `order_item AS (INSERT INTO order_items (order_id, position, sku, name, quantity, unit_price, amount)
        SELECT c.id, i.position, i.sku, i.name, i.quantity, i.unit_price, i.amount FROM claimed c JOIN item i ON i.ord = c.ord)`,
    ];
    try {
      const rows = await this.options.sql.all<{ id: string }>(`WITH ${pieces.join(',\n')}\nSELECT id FROM placed`, s.params);
      return new Set(rows.map((row) => row.id));
    } catch (error) {
      // The stock rule's trigger refused it: on_hand was set down after the statement began, by a
      // change that held a SKU's stock_holds row before this one did. Nothing was written; the general way says why.
      if (isCheckViolation(error)) return new Set();
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
  async startPayment(
    caller: Caller,
    ask: { orderId: string; asked: number; currency: string; method: string },
    claim: Claim,
  ): Promise<PaymentRecord | undefined> {
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
      `holdable AS (SELECT id FROM reservations WHERE id = (SELECT reservation_id FROM payable) AND ${rowCheck(`state = 'active' AND expires_at > ${now}`)} FOR UPDATE)`,
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
