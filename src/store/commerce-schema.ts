/**
 * The tables of the commerce services (inventory, orders, payments), one
 * text for both backends: SQLite migration 8 and PostgreSQL migration 4.
 * Only the type of an increasing id differs. Amounts and quantities are
 * integers (minor units of the currency, units of stock); timestamps are
 * ISO 8601 text, as everywhere in the store.
 *
 * The CHECKs are the last line of defence of the stock rules: a change that
 * would take on_hand below reserved, or either below zero, fails in the
 * database whatever the code above it does. (Since SQLite 14 / PostgreSQL 10
 * what is reserved is kept in stock_holds, and the rule across the two rows
 * by a trigger on each: shared-migrations.ts, stockHolds.)
 */
import type { Dialect } from './sql.js';

export function commerceSchema(dialect: Dialect): string {
  const serial = dialect === 'postgres' ? 'BIGSERIAL PRIMARY KEY' : 'INTEGER PRIMARY KEY AUTOINCREMENT';
  return `
    CREATE TABLE products (
      sku TEXT PRIMARY KEY,
      name TEXT NOT NULL,
      price BIGINT NOT NULL CHECK (price >= 0),
      currency TEXT NOT NULL,
      on_hand BIGINT NOT NULL CHECK (on_hand >= 0),
      reserved BIGINT NOT NULL DEFAULT 0 CHECK (reserved >= 0 AND reserved <= on_hand),
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    );
    -- The stock ledger: every change of on_hand, with its reason and who made it.
    CREATE TABLE stock_movements (
      id ${serial},
      sku TEXT NOT NULL REFERENCES products (sku),
      delta BIGINT NOT NULL,
      on_hand BIGINT NOT NULL,
      reason TEXT NOT NULL,
      actor TEXT NOT NULL,
      at TEXT NOT NULL
    );
    CREATE INDEX stock_movements_sku ON stock_movements (sku, id);
    CREATE TABLE reservations (
      id TEXT PRIMARY KEY,
      order_id TEXT,
      state TEXT NOT NULL CHECK (state IN ('active', 'held', 'committed', 'released', 'expired')),
      expires_at TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    );
    CREATE INDEX reservations_due ON reservations (state, expires_at);
    CREATE TABLE reservation_items (
      reservation_id TEXT NOT NULL REFERENCES reservations (id),
      sku TEXT NOT NULL REFERENCES products (sku),
      quantity BIGINT NOT NULL CHECK (quantity > 0),
      PRIMARY KEY (reservation_id, sku)
    );
    CREATE TABLE orders (
      id TEXT PRIMARY KEY,
      user_id BIGINT,
      state TEXT NOT NULL CHECK (state IN ('RESERVED', 'PAYMENT_PENDING', 'PAID', 'PAYMENT_FAILED', 'EXPIRED', 'CANCELLED')),
      currency TEXT NOT NULL,
      total_amount BIGINT NOT NULL,
      reservation_id TEXT NOT NULL REFERENCES reservations (id),
      payment_id TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      paid_at TEXT,
      cancelled_at TEXT,
      cancel_reason TEXT
    );
    CREATE INDEX orders_user ON orders (user_id, created_at);
    CREATE INDEX orders_created ON orders (created_at, id);
    CREATE INDEX orders_reservation ON orders (reservation_id);
    CREATE TABLE order_items (
      order_id TEXT NOT NULL REFERENCES orders (id),
      position INTEGER NOT NULL,
      sku TEXT NOT NULL,
      name TEXT NOT NULL,
      quantity BIGINT NOT NULL,
      unit_price BIGINT NOT NULL,
      amount BIGINT NOT NULL,
      PRIMARY KEY (order_id, position)
    );
    CREATE TABLE payments (
      id TEXT PRIMARY KEY,
      order_id TEXT,
      user_id BIGINT,
      status TEXT NOT NULL CHECK (status IN ('IN_PROGRESS', 'DONE', 'ABORTED', 'CANCELED', 'PARTIAL_CANCELED')),
      amount BIGINT NOT NULL CHECK (amount > 0),
      balance BIGINT NOT NULL CHECK (balance >= 0 AND balance <= amount),
      currency TEXT NOT NULL,
      method TEXT NOT NULL,
      provider TEXT NOT NULL,
      provider_reference TEXT,
      failure_code TEXT,
      failure_message TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      approved_at TEXT
    );
    CREATE INDEX payments_order ON payments (order_id);
    CREATE INDEX payments_status ON payments (status);
    CREATE TABLE refunds (
      id TEXT PRIMARY KEY,
      payment_id TEXT NOT NULL REFERENCES payments (id),
      position INTEGER NOT NULL,
      amount BIGINT NOT NULL CHECK (amount > 0),
      reason TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('PENDING', 'DONE')),
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    );
    CREATE UNIQUE INDEX refunds_payment ON refunds (payment_id, position);
    CREATE INDEX refunds_status ON refunds (status);
    -- Idempotency keys of CreateOrder, ProcessPayment and RefundPayment, per caller, kept 15 days:
    -- the request's hash, what it made, and its stored answer once final.
    CREATE TABLE idempotency_keys (
      scope TEXT NOT NULL,
      owner TEXT NOT NULL,
      key TEXT NOT NULL,
      request_hash TEXT NOT NULL,
      resource_id TEXT,
      response TEXT,
      created_at TEXT NOT NULL,
      expires_at TEXT NOT NULL,
      PRIMARY KEY (scope, owner, key)
    );
    CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
    CREATE INDEX idempotency_keys_resource ON idempotency_keys (scope, resource_id);
    -- The sandbox payment provider's own books, kept in the store so that a charge is remembered by its key
    -- across restarts (reconciliation asks it again): what a real provider keeps on its side.
    CREATE TABLE sandbox_charges (
      key TEXT PRIMARY KEY,
      amount BIGINT NOT NULL,
      currency TEXT NOT NULL,
      method TEXT NOT NULL,
      outcome TEXT NOT NULL CHECK (outcome IN ('approved', 'declined')),
      failure_code TEXT,
      reference TEXT NOT NULL,
      answered INTEGER NOT NULL DEFAULT 0,
      created_at TEXT NOT NULL
    );
    CREATE TABLE sandbox_refunds (
      key TEXT PRIMARY KEY,
      charge_reference TEXT NOT NULL,
      amount BIGINT NOT NULL,
      created_at TEXT NOT NULL
    );
  `;
}
