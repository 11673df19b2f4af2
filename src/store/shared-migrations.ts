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
  description: "a webhook delivery remembers the trace it was made in, for its attempts' spans to link to",
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

/**
 * Stock holds (SQLite 14, PostgreSQL 10): what a SKU has reserved moves out of its products row, so that
 * placing an order and settling one lock different rows. Placing adds to stock_holds.reserved_total (units ever
 * reserved); a sale or a release adds to products.released_total (units ever let go of: sold, given back or
 * expired) and, for a sale, takes on_hand down. What is reserved now is reserved_total - released_total, and
 * the old CHECK (0 <= reserved <= on_hand), which spans the two rows now, is kept by a trigger on each side:
 * a change that breaks it fails in the database, as the CHECK made it fail, whatever the code above does. (On
 * PostgreSQL, a change that leaves less available locks the stock_holds row in its trigger, so that two
 * transactions cannot each pass their own check and together break the rule; and a reservation's items
 * reference stock_holds rather than products, so that placing an order takes no lock on a products row.
 * SQLite, whose writes take turns, keeps that reference on products.)
 * The rows already there keep their numbers: reserved_total starts at what was reserved, released_total at 0.
 */
export function stockHolds(backend: 'sqlite' | 'postgres') {
  const message = 'stock rule broken: reserved must stay between 0 and on_hand';
  const guards =
    backend === 'postgres'
      ? `
      CREATE FUNCTION stock_holds_within() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM products p WHERE p.sku = NEW.sku AND NEW.reserved_total - p.released_total NOT BETWEEN 0 AND p.on_hand) THEN
          RAISE EXCEPTION '${message} (SKU %)', NEW.sku USING ERRCODE = 'check_violation';
        END IF;
        RETURN NULL;
      END $$;
      CREATE FUNCTION products_within_holds() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        held BIGINT;
      BEGIN
        -- Less available (on_hand set or adjusted down): the SKU's stock_holds row is locked, so that a reservation in
        -- flight is waited for and counted, and none starts until this commits. A sale (on_hand and reserved down
        -- alike) or a release (more available) locks nothing: a reservation that reads them late only sees less.
        IF NEW.on_hand + NEW.released_total < OLD.on_hand + OLD.released_total THEN
          SELECT reserved_total INTO held FROM stock_holds WHERE sku = NEW.sku FOR SHARE;
        ELSE
          SELECT reserved_total INTO held FROM stock_holds WHERE sku = NEW.sku;
        END IF;
        IF held - NEW.released_total NOT BETWEEN 0 AND NEW.on_hand THEN
          RAISE EXCEPTION '${message} (SKU %)', NEW.sku USING ERRCODE = 'check_violation';
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER stock_holds_within AFTER INSERT OR UPDATE ON stock_holds FOR EACH ROW EXECUTE FUNCTION stock_holds_within();
      -- A reservation's items name the SKU's stock_holds row (itself bound to products), which the reservation has
      -- locked already: checking them against products took a key-share lock there, on the row every settlement
      -- updates, and the two ways of locking one row deadlocked under load.
      ALTER TABLE reservation_items DROP CONSTRAINT reservation_items_sku_fkey;
      ALTER TABLE reservation_items ADD CONSTRAINT reservation_items_sku_fkey FOREIGN KEY (sku) REFERENCES stock_holds (sku);
      CREATE TRIGGER products_within_holds AFTER UPDATE OF on_hand, released_total ON products FOR EACH ROW EXECUTE FUNCTION products_within_holds();
    `
      : `
      CREATE TRIGGER stock_holds_within AFTER UPDATE ON stock_holds
        WHEN EXISTS (SELECT 1 FROM products p WHERE p.sku = NEW.sku AND NEW.reserved_total - p.released_total NOT BETWEEN 0 AND p.on_hand)
        BEGIN SELECT RAISE(ABORT, '${message}'); END;
      CREATE TRIGGER stock_holds_within_insert AFTER INSERT ON stock_holds
        WHEN EXISTS (SELECT 1 FROM products p WHERE p.sku = NEW.sku AND NEW.reserved_total - p.released_total NOT BETWEEN 0 AND p.on_hand)
        BEGIN SELECT RAISE(ABORT, '${message}'); END;
      CREATE TRIGGER products_within_holds AFTER UPDATE OF on_hand, released_total ON products
        WHEN EXISTS (SELECT 1 FROM stock_holds h WHERE h.sku = NEW.sku AND h.reserved_total - NEW.released_total NOT BETWEEN 0 AND NEW.on_hand)
        BEGIN SELECT RAISE(ABORT, '${message}'); END;
    `;
  return {
    description: 'what a SKU has reserved is kept in stock_holds, apart from its products row, so that placing an order and settling one lock different rows',
    sql: `
      ALTER TABLE products ADD COLUMN released_total BIGINT NOT NULL DEFAULT 0 CHECK (released_total >= 0);
      CREATE TABLE stock_holds (
        sku TEXT PRIMARY KEY REFERENCES products (sku),
        reserved_total BIGINT NOT NULL CHECK (reserved_total >= 0),
        updated_at TEXT NOT NULL
      );
      INSERT INTO stock_holds (sku, reserved_total, updated_at) SELECT sku, reserved, updated_at FROM products;
      ALTER TABLE products DROP COLUMN reserved;
      ${guards}`,
  };
}

/**
 * Each URL's deliveries in the order they fall due (SQLite 15, PostgreSQL 12): the index on (url, state) gains
 * next_attempt_at (and, on PostgreSQL, id; on SQLite the rowid ends every index), so that a dispatcher that sends to
 * a list of URLs finds the first due delivery of each of its own URLs in one descent, instead of walking the due
 * deliveries of every URL (other instances', or a receiver that is down) until it meets one of its own. The index
 * still serves the list's filters by URL and state, as before.
 */
export function webhookDueByUrl(backend: 'sqlite' | 'postgres') {
  return {
    description: "each URL's webhook deliveries indexed in the order they fall due, for dispatchers that send to a list of URLs",
    sql: `
      DROP INDEX webhook_deliveries_url;
      CREATE INDEX webhook_deliveries_url ON webhook_deliveries (url, state, next_attempt_at${backend === 'postgres' ? ', id' : ''});
    `,
  };
}

/**
 * Refunded orders (SQLite 16, PostgreSQL 13): an order's state may be REFUNDED (its payment refunded in full, in one
 * refund or several) or PARTIALLY_REFUNDED (some of it), as Shopify's financial status has them, beside the states
 * of migration 8 / 4. Only the CHECK changes. PostgreSQL swaps the constraint; SQLite cannot alter one, so the table
 * is made again (SQLite's "other kinds of table schema changes"): the rows are set aside, the table dropped and made
 * with the new CHECK and its indexes, and the rows put back. Foreign keys stay on: the order_items rows that the drop
 * leaves pointing nowhere are counted as deferred violations, which the rows put back resolve before the commit.
 */
export function refundedOrders(backend: 'sqlite' | 'postgres') {
  const states = "'RESERVED', 'PAYMENT_PENDING', 'PAID', 'PAYMENT_FAILED', 'EXPIRED', 'CANCELLED', 'REFUNDED', 'PARTIALLY_REFUNDED'";
  const description = 'orders may be REFUNDED (their payment refunded in full) or PARTIALLY_REFUNDED';
  if (backend === 'postgres') {
    return {
      description,
      sql: `
      ALTER TABLE orders DROP CONSTRAINT orders_state_check;
      ALTER TABLE orders ADD CONSTRAINT orders_state_check CHECK (state IN (${states}));
    `,
    };
  }
  return {
    description,
    sql: `
      PRAGMA defer_foreign_keys = ON;
      CREATE TABLE orders_set_aside AS SELECT * FROM orders;
      DROP TABLE orders;
      CREATE TABLE orders (
        id TEXT PRIMARY KEY,
        user_id BIGINT,
        state TEXT NOT NULL CHECK (state IN (${states})),
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
      INSERT INTO orders (id, user_id, state, currency, total_amount, reservation_id, payment_id, created_at, updated_at, paid_at, cancelled_at, cancel_reason)
        SELECT id, user_id, state, currency, total_amount, reservation_id, payment_id, created_at, updated_at, paid_at, cancelled_at, cancel_reason FROM orders_set_aside;
      DROP TABLE orders_set_aside;
      CREATE INDEX orders_user ON orders (user_id, created_at);
      CREATE INDEX orders_created ON orders (created_at, id);
      CREATE INDEX orders_reservation ON orders (reservation_id);
    `,
  };
}

/**
 * Posts say whether the admin token wrote them (SQLite 17, PostgreSQL 14): `author_is_admin`, set when the post is
 * written and never after, so that no account (one named `admin` from before the names were reserved, or one
 * deleted since, whose posts lose their author_id) can pass for the admin. Posts already there are the admin's when
 * they have no author_id and the author `admin`, as the admin token wrote them. PostgreSQL: each post's stored JSON
 * (posts.answer_json) gains the field, after `author`, as the API answers it.
 */
export function postAuthorIsAdmin(backend: 'sqlite' | 'postgres') {
  const column =
    backend === 'postgres'
      ? `ALTER TABLE posts ADD COLUMN author_is_admin BOOLEAN NOT NULL DEFAULT FALSE;
      CREATE OR REPLACE FUNCTION posts_answer_json() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        NEW.answer_json := concat('{"id":', NEW.id, ',"title":', to_json(NEW.title), ',"content":', to_json(NEW.content),
          ',"author":', to_json(NEW.author), ',"author_is_admin":', CASE WHEN NEW.author_is_admin THEN 'true' ELSE 'false' END,
          ',"created_at":', to_json(NEW.created_at), ',"updated_at":', to_json(NEW.updated_at),
          ',"tags":', NEW.tags, ',"is_published":', CASE WHEN NEW.is_published THEN 'true' ELSE 'false' END, '}');
        RETURN NEW;
      END $$;
      UPDATE posts SET author_is_admin = (author_id IS NULL AND author = 'admin');`
      : `ALTER TABLE posts ADD COLUMN author_is_admin INTEGER NOT NULL DEFAULT 0;
      UPDATE posts SET author_is_admin = 1 WHERE author_id IS NULL AND author = 'admin';`;
  return {
    description: 'posts say whether the admin token wrote them (author_is_admin), which no account can pass for',
    sql: `
      ${column}
    `,
  };
}

/**
 * Sign-ups counted per client address (SQLite 18, PostgreSQL 15; auth/signup-limits.ts): shared by every instance
 * on the database, so that the limit holds across them; a row per address whose window is not over (window_start is
 * indexed for their deletion).
 */
export const SIGNUP_COUNTS = {
  description: 'sign-ups counted per client address, shared by every instance, for the sign-up limit',
  sql: `
      CREATE TABLE signup_counts (
        address TEXT PRIMARY KEY,
        used INTEGER NOT NULL,
        window_start TEXT NOT NULL
      );
      CREATE INDEX signup_counts_window_start ON signup_counts (window_start);
    `,
};

/**
 * Each user change names its user in a column of its own, indexed with the sequence (SQLite 19, PostgreSQL 16;
 * users/change-log.ts): a watch of one user (every user token's, and the admin's of one id) catches up on that
 * user's changes alone, instead of reading and parsing the whole log to skip the others'. Changes already logged
 * get theirs from the record they carry.
 */
export function userEventsByUser(backend: 'sqlite' | 'postgres') {
  const [type, fromPayload] = backend === 'postgres' ? ['BIGINT', "(payload::json->>'id')::bigint"] : ['INTEGER', "json_extract(payload, '$.id')"];
  return {
    description: 'user changes name their user (user_id), indexed with the sequence, for watches of one user',
    sql: `
      ALTER TABLE user_events ADD COLUMN user_id ${type};
      UPDATE user_events SET user_id = ${fromPayload};
      CREATE INDEX user_events_user_seq ON user_events (user_id, seq);
    `,
  };
}
