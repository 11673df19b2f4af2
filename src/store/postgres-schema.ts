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
import { LOGIN_FAILURES, WEBHOOK_CLAIMS, WEBHOOK_TRACE_CONTEXT } from './shared-migrations.js';

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
    description: 'the commerce services: products and their stock ledger, reservations, orders, payments, refunds, idempotency keys, the sandbox provider\'s books',
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
];
