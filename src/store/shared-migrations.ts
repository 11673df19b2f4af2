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
