/**
 * An order as the order services answer it, and the SQL of its rows that
 * is written both statement by statement in a transaction (orders.ts) and
 * as pieces of one statement on PostgreSQL (postgres-steps.ts): the same
 * SQL either way, with what the other pieces give as SQL expressions.
 *
 * Domain module: nothing here prints or reads the environment.
 */
import type { Statement } from '../kernel/statement.js';

export const ORDER_STATUSES = ['RESERVED', 'PAYMENT_PENDING', 'PAID', 'PAYMENT_FAILED', 'EXPIRED', 'CANCELLED', 'REFUNDED', 'PARTIALLY_REFUNDED'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

export interface OrderItemRecord {
  sku: string;
  name: string;
  quantity: number;
  unitPrice: number;
  amount: number;
}

export interface OrderRecord {
  id: string;
  userId: number | null;
  status: OrderStatus;
  items: OrderItemRecord[];
  totalAmount: number;
  currency: string;
  reservationId: string;
  reservationExpiresAt: string;
  paymentId: string | null;
  createdAt: string;
  updatedAt: string;
  paidAt: string | null;
  cancelledAt: string | null;
  cancelReason: string | null;
}

const INSERT_ORDER = 'INSERT INTO orders (id, user_id, state, currency, total_amount, reservation_id, created_at, updated_at)';

/** The INSERT of a new order's row (RETURNING its id); its reservation's id is an SQL expression. */
export function insertOrderSql(s: Statement, order: OrderRecord, reservation: string): string {
  const at = s.$(order.createdAt);
  return `${INSERT_ORDER} SELECT ${s.$(order.id)}, ${s.$(order.userId)}, 'RESERVED', ${s.$(order.currency)}, ${s.$(order.totalAmount)}, ${reservation}, ${at}, ${at} RETURNING id`;
}

/** The INSERT of new orders' rows (RETURNING their ids), from the rows of `from` (a FROM clause with its WHERE, whose rows have the columns of OrderRows). */
export function insertOrdersSql(from: string): string {
  return `${INSERT_ORDER} SELECT id, user_id, 'RESERVED', currency, total_amount, reservation_id, created_at, created_at FROM ${from} RETURNING id`;
}

/** An order's move as its payment settles (from PAYMENT_PENDING): PAID, or PAYMENT_FAILED. `order` is an SQL expression giving its id. */
export function settleOrderSql(s: Statement, order: string, paid: boolean, at: string): string {
  const now = s.$(at);
  return paid
    ? `UPDATE orders SET state = 'PAID', paid_at = ${now}, updated_at = ${now} WHERE id = ${order} AND state = 'PAYMENT_PENDING' RETURNING reservation_id`
    : `UPDATE orders SET state = 'PAYMENT_FAILED', updated_at = ${now} WHERE id = ${order} AND state = 'PAYMENT_PENDING' RETURNING reservation_id`;
}
