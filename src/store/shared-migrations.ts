/**
 * Migrations whose text is the same on both backends, shared by the SQLite
 * list (database.ts) and the PostgreSQL one (postgres-schema.ts), which
 * number them each in their own order.
 */

/**
 * The webhook claims (SQLite 7, PostgreSQL 3). claims numbers the claims of a delivery: an attempt's outcome is recorded against the claim it was made
 * under, so a sender presumed dead (its lease ran out, another instance claimed the delivery) cannot
 * reschedule what the newer claim is sending. webhook_senders: a row per running dispatcher, the URLs it
 * sends to (JSON) until expires_at, refreshed at each look at the outbox and deleted on a clean stop; a
 * pending delivery is held only when no live sender has its URL.
 */
export const WEBHOOK_CLAIMS = {
  description: 'webhook claims are numbered (a stale sender cannot undo a newer claim), and senders say which URLs they send to',
  sql: `
      ALTER TABLE webhook_deliveries ADD COLUMN claims INTEGER NOT NULL DEFAULT 0;
      CREATE TABLE webhook_senders (
        id TEXT PRIMARY KEY,
        urls TEXT NOT NULL,
        expires_at TEXT NOT NULL
      );
    `,
};

/**
 * Failed logins (SQLite 9, PostgreSQL 5), counted per account and address and per address (auth/login-limits.ts):
 * shared by every instance on the database, so that a limit holds across them.
 */
export const LOGIN_FAILURES = {
  description: 'failed logins counted per account and address, shared by every instance, for the login limits',
  sql: `
      CREATE TABLE login_failures (
        key TEXT PRIMARY KEY,
        failures INTEGER NOT NULL,
        last_at TEXT NOT NULL,
        locked_until TEXT
      );
      CREATE INDEX login_failures_last_at ON login_failures (last_at);
    `,
};

/**
 * The trace a webhook delivery was made in (SQLite 10, PostgreSQL 6): the W3C `traceparent` of the span that
 * enqueued it, when tracing was on, so that each delivery attempt's span links back to the request that caused it.
 */
export const WEBHOOK_TRACE_CONTEXT = {
  description: 'a webhook delivery remembers the trace it was made in, for its attempts\' spans to link to',
  sql: `
      ALTER TABLE webhook_deliveries ADD COLUMN traceparent TEXT;
    `,
};

/**
 * X-Webhook-Delivery keys unique across databases (SQLite 13, PostgreSQL 9): a UUID per delivery instead of its id,
 * which a rebuilt database or another environment hands out again (and a receiver that de-duplicates on it would drop
 * real events). New deliveries get a UUIDv7 from the outbox; the deliveries already there get a random (v4) UUID
 * here, and a resend the key of the delivery it repeats, as it sent its id before.
 */
export function webhookDeliveryKeys(backend: 'sqlite' | 'postgres') {
  const uuid =
    backend === 'postgres'
      ? 'gen_random_uuid()::text'
      : `lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' ||
          substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))`;
  return {
    description: 'webhook deliveries carry a UUID as X-Webhook-Delivery, unique across databases, kept by retries and resends',
    sql: `
      ALTER TABLE webhook_deliveries ADD COLUMN delivery_key TEXT;
      UPDATE webhook_deliveries SET delivery_key = ${uuid} WHERE original_id IS NULL;
      UPDATE webhook_deliveries SET delivery_key = (SELECT o.delivery_key FROM webhook_deliveries o WHERE o.id = webhook_deliveries.original_id)
        WHERE original_id IS NOT NULL;
    `,
  };
}
