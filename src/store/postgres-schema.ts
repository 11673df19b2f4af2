/**
 * The PostgreSQL schema of `serve`, versioned like SQLite's (database.ts)
 * but in a table of its own (schema_migrations), and applied under an
 * advisory lock so that instances starting together migrate once.
 *
 * The tables mirror SQLite's, column for column, so that one repository
 * serves both: timestamps are ISO 8601 text (compared as text, as in
 * SQLite), lists are JSON text. What only a shared database needs lives
 * here alone: images as bytes (SQLite keeps them as files), the durable
 * log of user changes and the counters that order it, chat messages in
 * flight between instances, and secrets every instance must agree on.
 */
import { blogListingSchema, BLOG_LISTING } from './blog-listing-schema.js';
import { commerceSchema } from './commerce-schema.js';
import {
  LOGIN_FAILURES,
  SIGNUP_COUNTS,
  stockHolds,
  WEBHOOK_CLAIMS,
  WEBHOOK_TRACE_CONTEXT,
  postAuthorIsAdmin,
  refundedOrders,
  userEventsByUser,
  webhookDeliveryKeys,
  webhookDueByUrl,
} from './shared-migrations.js';

export interface PostgresMigration {
  version: number;
  description: string;
  sql: string;
}

export const POSTGRES_MIGRATIONS: readonly PostgresMigration[] = [
  {
    version: 1,
    description: 'everything serve keeps: users, tokens, posts, images, unlink callbacks, the webhook outbox, shared state',
    sql: `
      CREATE TABLE unlink_events (
        id BIGSERIAL PRIMARY KEY,
        received_at TEXT NOT NULL,
        user_key BIGINT NOT NULL,
        referrer TEXT,
        method TEXT NOT NULL,
        source TEXT
      );
      CREATE INDEX unlink_events_user_key ON unlink_events (user_key);
      CREATE INDEX unlink_events_received_at ON unlink_events (received_at);

      CREATE TABLE users (
        id BIGSERIAL PRIMARY KEY,
        username TEXT NOT NULL,
        email TEXT NOT NULL,
        full_name TEXT NOT NULL DEFAULT '',
        is_active BOOLEAN NOT NULL DEFAULT TRUE,
        roles TEXT NOT NULL DEFAULT '[]',
        password_hash TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        bio TEXT,
        avatar_url TEXT
      );
      CREATE UNIQUE INDEX users_username ON users (lower(username));
      CREATE UNIQUE INDEX users_email ON users (lower(email));

      CREATE TABLE api_tokens (
        token_hash TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('admin', 'user')),
        user_id BIGINT REFERENCES users (id) ON DELETE CASCADE,
        created_at TEXT NOT NULL,
        expires_at TEXT
      );

      CREATE TABLE posts (
        id BIGSERIAL PRIMARY KEY,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        author_id BIGINT REFERENCES users (id) ON DELETE SET NULL,
        author TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        is_published BOOLEAN NOT NULL DEFAULT TRUE,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        published_at TEXT
      );
      CREATE INDEX posts_created_at ON posts (created_at);
      CREATE INDEX posts_published_created ON posts (is_published, created_at);
      CREATE INDEX posts_published_title ON posts (is_published, lower(title));
      CREATE TABLE post_tags (
        post_id BIGINT NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
        tag TEXT NOT NULL,
        PRIMARY KEY (post_id, tag)
      );
      CREATE INDEX post_tags_tag ON post_tags (tag);

      CREATE TABLE images (
        name TEXT PRIMARY KEY,
        mime TEXT NOT NULL,
        width INTEGER NOT NULL,
        height INTEGER NOT NULL,
        size INTEGER NOT NULL,
        bytes BYTEA NOT NULL,
        created_at TEXT NOT NULL
      );

      CREATE TABLE webhook_deliveries (
        id BIGSERIAL PRIMARY KEY,
        event TEXT NOT NULL,
        url TEXT NOT NULL,
        body TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed', 'cancelled', 'held')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        original_id BIGINT REFERENCES webhook_deliveries (id)
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
      CREATE INDEX webhook_deliveries_url ON webhook_deliveries (url, state);
      CREATE INDEX webhook_deliveries_original ON webhook_deliveries (original_id);
      CREATE TABLE webhook_attempts (
        id BIGSERIAL PRIMARY KEY,
        delivery_id BIGINT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
        attempted_at TEXT NOT NULL,
        status_code INTEGER,
        error TEXT
      );
      CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);

      -- Values every instance must agree on (the admin token), written once by whichever instance is first.
      CREATE TABLE server_secrets (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        created_at TEXT NOT NULL
      );

      -- Counters bumped inside the transactions they order (a row lock serialises the writers, so the
      -- numbers follow commit order): the user-change log, and the version of the posts (list caches).
      CREATE TABLE counters (
        name TEXT PRIMARY KEY,
        value BIGINT NOT NULL
      );
      INSERT INTO counters (name, value) VALUES ('user_events', 0), ('posts', 0);

      -- Every user change, numbered in commit order, for watchers on any instance; a watcher that lost its
      -- connection reads on from the last number it saw. Kept a while, then trimmed.
      CREATE TABLE user_events (
        seq BIGINT PRIMARY KEY,
        type TEXT NOT NULL,
        payload TEXT NOT NULL,
        at TEXT NOT NULL
      );

      -- Chat messages on their way to the other instances (NOTIFY carries the id; payloads may exceed its limit).
      CREATE TABLE chat_messages (
        id BIGSERIAL PRIMARY KEY,
        channel TEXT NOT NULL,
        payload TEXT NOT NULL,
        at TEXT NOT NULL
      );
    `,
  },
  {
    version: 2,
    description: 'posts sorted by title in code-point order whatever the database collation, as SQLite sorts them',
    // Version 1's index follows the database's collation, which a managed service may set to a language's
    // (spaces and punctuation ignored, ...): the same posts would then page differently on the two backends.
    sql: `
      DROP INDEX posts_published_title;
      CREATE INDEX posts_published_title ON posts (is_published, (lower(title) COLLATE "C"));
    `,
  },
  {
    version: 3,
    ...WEBHOOK_CLAIMS,
  },
  {
    version: 4,
    description:
      "the commerce services: products and their stock ledger, reservations, orders, payments, refunds, idempotency keys, the sandbox provider's books",
    sql: commerceSchema('postgres'),
  },
  {
    version: 5,
    ...LOGIN_FAILURES,
  },
  {
    version: 6,
    ...WEBHOOK_TRACE_CONTEXT,
  },
  {
    version: 7,
    description: BLOG_LISTING,
    sql: blogListingSchema('postgres'),
  },
  {
    version: 8,
    description: 'the number of users kept by triggers, and a trigram index of what the user list filter searches (when pg_trgm is allowed)',
    // The count: statement-level triggers over transition tables, one UPDATE per statement that inserted or deleted
    // users (none for a statement that changed none), so that a bulk insert is one update, not one per row; every
    // writer keeps it right (the services, the blog, `db copy`, SQL run by hand). Writers of users wait for the lock
    // taken first, so that none slips between the count and the triggers.
    //
    // The index: pg_trgm lets the list's ILIKE '%...%' read the candidates instead of every row. A managed server
    // may refuse the extension (not installed, not allowed, no privilege); the migration then goes on without the
    // index (the exception block is a savepoint) and filters scan the table, as before. An operator who adds
    // pg_trgm later can create the index as below. The extension may already live in another schema: its operator
    // class is named through it.
    sql: `
      LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE;
      INSERT INTO counters (name, value) SELECT 'users', count(*) FROM users;

      CREATE FUNCTION users_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        added BIGINT;
      BEGIN
        SELECT count(*) INTO added FROM inserted_users;
        IF added > 0 THEN
          UPDATE counters SET value = value + added WHERE name = 'users';
        END IF;
        RETURN NULL;
      END $$;
      CREATE FUNCTION users_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        removed BIGINT;
      BEGIN
        SELECT count(*) INTO removed FROM deleted_users;
        IF removed > 0 THEN
          UPDATE counters SET value = value - removed WHERE name = 'users';
        END IF;
        RETURN NULL;
      END $$;
      CREATE FUNCTION users_count_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE counters SET value = 0 WHERE name = 'users';
        RETURN NULL;
      END $$;
      CREATE TRIGGER users_counted_on_insert AFTER INSERT ON users
        REFERENCING NEW TABLE AS inserted_users FOR EACH STATEMENT EXECUTE FUNCTION users_count_inserted();
      CREATE TRIGGER users_counted_on_delete AFTER DELETE ON users
        REFERENCING OLD TABLE AS deleted_users FOR EACH STATEMENT EXECUTE FUNCTION users_count_deleted();
      CREATE TRIGGER users_counted_on_truncate AFTER TRUNCATE ON users
        FOR EACH STATEMENT EXECUTE FUNCTION users_count_truncated();

      DO $$
      DECLARE
        trgm_schema TEXT;
      BEGIN
        BEGIN
          CREATE EXTENSION IF NOT EXISTS pg_trgm;
        EXCEPTION WHEN OTHERS THEN
          RAISE WARNING 'miniapp: pg_trgm is not available (%: %); the user list filter will scan the users table', SQLSTATE, SQLERRM;
        END;
        SELECT n.nspname INTO trgm_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
        IF trgm_schema IS NOT NULL THEN
          EXECUTE format(
            'CREATE INDEX users_search ON users USING gin (username %1$I.gin_trgm_ops, email %1$I.gin_trgm_ops, full_name %1$I.gin_trgm_ops)',
            trgm_schema);
        END IF;
      END $$;
    `,
  },
  {
    version: 9,
    ...webhookDeliveryKeys('postgres'),
  },
  {
    version: 10,
    ...stockHolds('postgres'),
  },
  {
    version: 11,
    description: "each post's JSON as the API answers it, kept by a trigger (posts.answer_json), which blog list pages join",
    // Written once, when the post is: a page of the list is then the posts' stored JSON joined (string_agg), not
    // twenty posts escaped and assembled again at every uncached request (PostgreSQL's CPU per page 1 of 20 about
    // 0.1 ms less; uncached pages about +14% req/s in the blog benchmark). to_json escapes a string exactly as
    // JSON.stringify does (", \ and the control characters, nothing else), and the tags are stored as JSON.stringify
    // wrote them, so the bytes are JSON.stringify's of the same post (test/blog/posts.test.ts). A BEFORE trigger
    // keeps it for every writer (the blog, \`db copy\`, SQL run by hand); the id is set by then (its DEFAULT comes
    // first).
    sql: `
      ALTER TABLE posts ADD COLUMN answer_json TEXT;
      CREATE FUNCTION posts_answer_json() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        NEW.answer_json := concat('{"id":', NEW.id, ',"title":', to_json(NEW.title), ',"content":', to_json(NEW.content),
          ',"author":', to_json(NEW.author), ',"created_at":', to_json(NEW.created_at), ',"updated_at":', to_json(NEW.updated_at),
          ',"tags":', NEW.tags, ',"is_published":', CASE WHEN NEW.is_published THEN 'true' ELSE 'false' END, '}');
        RETURN NEW;
      END $$;
      CREATE TRIGGER posts_answer_json BEFORE INSERT OR UPDATE ON posts FOR EACH ROW EXECUTE FUNCTION posts_answer_json();
      UPDATE posts SET id = id;
      ALTER TABLE posts ALTER COLUMN answer_json SET NOT NULL;
    `,
  },
  {
    version: 12,
    ...webhookDueByUrl('postgres'),
  },
  {
    version: 13,
    ...refundedOrders('postgres'),
  },
  {
    version: 14,
    ...postAuthorIsAdmin('postgres'),
  },
  {
    version: 15,
    ...SIGNUP_COUNTS,
  },
  {
    version: 16,
    ...userEventsByUser('postgres'),
  },
];
