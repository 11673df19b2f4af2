/**
 * The SQLite database of `miniapp serve` (better-sqlite3): one file in the
 * data dir, WAL for concurrent readers, and schema migrations versioned in
 * code through `PRAGMA user_version`. The pending migrations run in one
 * transaction, so a crash never leaves half a schema.
 */
import { chmodSync, closeSync, existsSync, openSync } from 'node:fs';
import { ensureDataDir } from './data-dir.js';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ConfigError } from '../errors.js';
import { commerceSchema } from './commerce-schema.js';
import { blogListingSchema, BLOG_LISTING } from './blog-listing-schema.js';
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

export type Db = Database.Database;

export interface Migration {
  version: number;
  description: string;
  sql: string;
}

/** Every schema change, in order. Never edit a released entry; add the next. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'unlink callback receipts',
    sql: `
      CREATE TABLE unlink_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        received_at TEXT NOT NULL,
        user_key INTEGER NOT NULL,
        referrer TEXT,
        method TEXT NOT NULL,
        source TEXT
      );
      CREATE INDEX unlink_events_user_key ON unlink_events (user_key);
      CREATE INDEX unlink_events_received_at ON unlink_events (received_at);
    `,
  },
  {
    version: 2,
    description: 'users and API tokens',
    sql: `
      CREATE TABLE users (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        username TEXT NOT NULL,
        email TEXT NOT NULL,
        full_name TEXT NOT NULL DEFAULT '',
        is_active INTEGER NOT NULL DEFAULT 1,
        roles TEXT NOT NULL DEFAULT '[]',
        password_hash TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE UNIQUE INDEX users_username ON users (username COLLATE NOCASE);
      CREATE UNIQUE INDEX users_email ON users (email COLLATE NOCASE);
      CREATE TABLE api_tokens (
        token_hash TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('admin', 'user')),
        user_id INTEGER REFERENCES users (id) ON DELETE CASCADE,
        created_at TEXT NOT NULL,
        expires_at TEXT
      );
    `,
  },
  {
    version: 3,
    description: 'blog posts, user profiles, webhook outbox',
    sql: `
      ALTER TABLE users ADD COLUMN bio TEXT;
      ALTER TABLE users ADD COLUMN avatar_url TEXT;
      CREATE TABLE posts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        author_id INTEGER REFERENCES users (id) ON DELETE SET NULL,
        author TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        is_published INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        published_at TEXT
      );
      CREATE INDEX posts_created_at ON posts (created_at);
      CREATE TABLE post_tags (
        post_id INTEGER NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
        tag TEXT NOT NULL COLLATE NOCASE,
        PRIMARY KEY (post_id, tag)
      );
      CREATE INDEX post_tags_tag ON post_tags (tag);
      CREATE TABLE webhook_deliveries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event TEXT NOT NULL,
        url TEXT NOT NULL,
        body TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
      CREATE TABLE webhook_attempts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
        attempted_at TEXT NOT NULL,
        status_code INTEGER,
        error TEXT
      );
    `,
  },
  {
    version: 4,
    description: 'indexes for the post lists, which filter on is_published',
    sql: `
      CREATE INDEX posts_published_created ON posts (is_published, created_at);
      CREATE INDEX posts_published_title ON posts (is_published, title COLLATE NOCASE);
    `,
  },
  {
    version: 5,
    description: 'webhook deliveries can be cancelled, held (their URL left serve) and resent',
    // SQLite cannot change a CHECK constraint in place: both tables are rebuilt (attempts too, since a dropped
    // delivery table would cascade into them), and the id sequences carry over so that no X-Webhook-Delivery id
    // is ever handed out twice.
    sql: `
      ALTER TABLE webhook_attempts RENAME TO webhook_attempts_v4;
      ALTER TABLE webhook_deliveries RENAME TO webhook_deliveries_v4;
      CREATE TABLE webhook_deliveries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event TEXT NOT NULL,
        url TEXT NOT NULL,
        body TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed', 'cancelled', 'held')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        original_id INTEGER REFERENCES webhook_deliveries (id)
      );
      INSERT INTO webhook_deliveries (id, event, url, body, state, attempts, next_attempt_at, created_at, updated_at)
        SELECT id, event, url, body, state, attempts, next_attempt_at, created_at, updated_at FROM webhook_deliveries_v4;
      CREATE TABLE webhook_attempts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
        attempted_at TEXT NOT NULL,
        status_code INTEGER,
        error TEXT
      );
      INSERT INTO webhook_attempts (id, delivery_id, attempted_at, status_code, error)
        SELECT id, delivery_id, attempted_at, status_code, error FROM webhook_attempts_v4;
      DELETE FROM sqlite_sequence WHERE name IN ('webhook_deliveries', 'webhook_attempts');
      INSERT INTO sqlite_sequence (name, seq) SELECT 'webhook_deliveries', seq FROM sqlite_sequence WHERE name = 'webhook_deliveries_v4';
      INSERT INTO sqlite_sequence (name, seq) SELECT 'webhook_attempts', seq FROM sqlite_sequence WHERE name = 'webhook_attempts_v4';
      DROP TABLE webhook_attempts_v4;
      DROP TABLE webhook_deliveries_v4;
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
      CREATE INDEX webhook_deliveries_url ON webhook_deliveries (url, state);
      CREATE INDEX webhook_deliveries_original ON webhook_deliveries (original_id);
      CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);
    `,
  },
  {
    version: 6,
    description: 'the numbered log of user changes that watchers read, as in the PostgreSQL schema',
    // One mechanism on both engines (users/change-log.ts): each change is numbered from a counter bumped in the
    // transaction that makes it. The counters table mirrors PostgreSQL's, with both of its rows.
    sql: `
      CREATE TABLE counters (
        name TEXT PRIMARY KEY,
        value INTEGER NOT NULL
      );
      INSERT INTO counters (name, value) VALUES ('user_events', 0), ('posts', 0);
      CREATE TABLE user_events (
        seq INTEGER PRIMARY KEY,
        type TEXT NOT NULL,
        payload TEXT NOT NULL,
        at TEXT NOT NULL
      );
    `,
  },
  {
    version: 7,
    ...WEBHOOK_CLAIMS,
  },
  {
    version: 8,
    description:
      "the commerce services: products and their stock ledger, reservations, orders, payments, refunds, idempotency keys, the sandbox provider's books",
    sql: commerceSchema('sqlite'),
  },
  {
    version: 9,
    ...LOGIN_FAILURES,
  },
  {
    version: 10,
    ...WEBHOOK_TRACE_CONTEXT,
  },
  {
    version: 11,
    description: BLOG_LISTING,
    sql: blogListingSchema('sqlite'),
  },
  {
    version: 12,
    description: 'the number of users kept by triggers, and a trigram index of what the user list filter searches',
    // Triggers rather than the application, so that every writer keeps both right: the services, the blog, SQL run
    // by hand or by a benchmark. The count replaces a count(*) over the table in every ListUsers. The FTS5 table
    // (external content: it stores the index, not the text) finds the candidates of a filter of 3 characters or
    // more; the filter's own LIKE decides among them (users/user-search.ts). REPLACE is never used on users: its
    // deletes would fire no trigger (recursive_triggers is off).
    sql: `
      INSERT INTO counters (name, value) SELECT 'users', count(*) FROM users;
      CREATE TRIGGER users_counted_on_insert AFTER INSERT ON users BEGIN
        UPDATE counters SET value = value + 1 WHERE name = 'users';
      END;
      CREATE TRIGGER users_counted_on_delete AFTER DELETE ON users BEGIN
        UPDATE counters SET value = value - 1 WHERE name = 'users';
      END;
      CREATE VIRTUAL TABLE users_search USING fts5 (
        username, email, full_name, content = 'users', content_rowid = 'id', tokenize = 'trigram case_sensitive 0'
      );
      INSERT INTO users_search (users_search) VALUES ('rebuild');
      CREATE TRIGGER users_searched_on_insert AFTER INSERT ON users BEGIN
        INSERT INTO users_search (rowid, username, email, full_name) VALUES (new.id, new.username, new.email, new.full_name);
      END;
      CREATE TRIGGER users_searched_on_delete AFTER DELETE ON users BEGIN
        INSERT INTO users_search (users_search, rowid, username, email, full_name) VALUES ('delete', old.id, old.username, old.email, old.full_name);
      END;
      CREATE TRIGGER users_searched_on_update AFTER UPDATE OF id, username, email, full_name ON users
        WHEN old.id IS NOT new.id OR old.username IS NOT new.username OR old.email IS NOT new.email OR old.full_name IS NOT new.full_name
      BEGIN
        INSERT INTO users_search (users_search, rowid, username, email, full_name) VALUES ('delete', old.id, old.username, old.email, old.full_name);
        INSERT INTO users_search (rowid, username, email, full_name) VALUES (new.id, new.username, new.email, new.full_name);
      END;
    `,
  },
  {
    version: 13,
    ...webhookDeliveryKeys('sqlite'),
  },
  {
    version: 14,
    ...stockHolds('sqlite'),
  },
  {
    version: 15,
    ...webhookDueByUrl('sqlite'),
  },
  {
    version: 16,
    ...refundedOrders('sqlite'),
  },
  {
    version: 17,
    ...postAuthorIsAdmin('sqlite'),
  },
  {
    version: 18,
    ...SIGNUP_COUNTS,
  },
  {
    version: 19,
    ...userEventsByUser('sqlite'),
  },
];

export const DATABASE_FILE = 'miniapp.db';

export function databasePath(dataDir: string): string {
  return join(dataDir, DATABASE_FILE);
}

/** A second connection to a database in WAL mode that `openDatabase` opened, for reads only (sql.ts). */
export function openReader(file: string): Db {
  const db = new Database(file, { fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  return db;
}

/** Opens (creating it if needed) and migrates the database; `memory` keeps it in memory. */
export function openDatabase(location: { dataDir: string } | 'memory', options: { readonly?: boolean } = {}): Db {
  let db: Db;
  if (location === 'memory') {
    db = new Database(':memory:');
  } else {
    if (!options.readonly) ensureDataDir(location.dataDir);
    const file = databasePath(location.dataDir);
    try {
      if (!options.readonly) keepPrivate(file);
      db = new Database(file, { readonly: Boolean(options.readonly), fileMustExist: Boolean(options.readonly) });
    } catch (error) {
      throw new ConfigError(`cannot open the database ${file}: ${(error as Error).message}`, {
        hint: options.readonly ? 'has `miniapp serve` run with this data dir yet? (--data-dir or MINIAPP_DATA_DIR)' : 'check the permissions of the data dir',
        cause: error,
      });
    }
    if (!options.readonly) {
      db.pragma('journal_mode = WAL');
      // Every COMMIT waits for the disk, as PostgreSQL's synchronous_commit does: an acknowledged order or
      // payment survives a power cut. better-sqlite3's build default for WAL is NORMAL, which applied only to a
      // database opened already in WAL mode (a restart), while a new file ran FULL: now both are FULL (the
      // migrations below included). The store's connection then takes the flush over, off the event loop, and
      // answers nobody before it (SqliteSql's "Flushes off the event loop").
      db.pragma('synchronous = FULL');
    }
  }
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  if (!options.readonly) migrate(db);
  else if (schemaVersion(db) > latestVersion()) {
    throw new ConfigError(`the database was written by a newer miniapp (schema ${schemaVersion(db)}); upgrade miniapp`);
  }
  return db;
}

/**
 * The database holds password hashes and e-mail addresses: it is created
 * 0600 whatever the umask or the data dir, and an existing file (with its
 * -wal and -shm) is tightened. SQLite gives the -wal and -shm files it
 * creates the mode of the database file.
 */
function keepPrivate(file: string): void {
  closeSync(openSync(file, 'a', 0o600));
  for (const path of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(path)) chmodSync(path, 0o600);
}

export function schemaVersion(db: Db): number {
  return db.pragma('user_version', { simple: true }) as number;
}

function latestVersion(): number {
  return MIGRATIONS.at(-1)?.version ?? 0;
}

export function migrate(db: Db): void {
  const current = schemaVersion(db);
  if (current > latestVersion()) {
    throw new ConfigError(`the database was written by a newer miniapp (schema ${current}, this one knows ${latestVersion()}); upgrade miniapp`);
  }
  const pending = MIGRATIONS.filter((migration) => migration.version > current);
  if (pending.length === 0) return;
  // Every pending migration in one transaction: a crash or a failing migration leaves the schema as it was, and a
  // new database waits for the disk once (synchronous FULL), not once for each of its twenty-odd migrations.
  db.transaction(() => {
    for (const migration of pending) {
      db.exec(migration.sql);
      db.pragma(`user_version = ${migration.version}`);
    }
  })();
}
