/**
 * What ListUsers counts and searches with (users/user-search.ts), kept by
 * the schema itself (SQLite migration 12, PostgreSQL migration 8): the
 * count of users and the trigram index stay right whoever writes, the
 * migrations start them from the rows already there, and a PostgreSQL that
 * refuses pg_trgm still migrates and still filters.
 */
import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import pg from 'pg';
import { MIGRATIONS, migrate } from '../../src/store/database.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres-schema.js';
import { openStore } from '../../src/store/store.js';
import { SqliteSql, type Sql } from '../../src/store/sql.js';
import { UserSearch } from '../../src/users/user-search.js';
import { adminSql } from '../helpers/pg-admin.js';
import { createTestDatabase, serverUrl } from '../helpers/postgres.js';

/** `count` rows of users in one statement, ids from `from`; every third a zebra. */
function insertUsers(from: number, count: number): string {
  const rows = Array.from({ length: count }, (_, i) => {
    const id = from + i;
    return `(${id}, 'user${id}', 'user${id}@example.com', '${id % 3 === 0 ? 'Zebra' : 'Member'} ${id}', 'h', 'then', 'then')`;
  });
  return `INSERT INTO users (id, username, email, full_name, password_hash, created_at, updated_at) VALUES ${rows.join(', ')}`;
}

/** The ids a filter finds and its count, both ways a page can be read (the search index and the walk). */
async function found(sql: Sql, filter: string): Promise<{ count: number; ids: number[] }> {
  const search = new UserSearch(sql, filter);
  const count = await search.count();
  const viaIndex = (await search.page({ afterId: 0, offset: 0, limit: 10_000 })).map((u) => u.id);
  // One row at a time is the walk (1 x users < 2 x matches^2) once several match.
  const walked: number[] = [];
  for (let after = 0; ; ) {
    const [user] = await search.page({ afterId: after, offset: 0, limit: 1 });
    if (!user) break;
    walked.push(user.id);
    after = user.id;
  }
  expect(walked, `filter "${filter}" walked`).toEqual(viaIndex);
  return { count, ids: viaIndex };
}

const zebrasOf = (ids: number[]) => ids.filter((id) => id % 3 === 0);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('SQLite migration 12', () => {
  it('counts and indexes the users already there, and keeps both right through inserts, deletes and updates of any writer', async () => {
    const db = new Database(':memory:');
    db.pragma('foreign_keys = ON');
    for (const m of MIGRATIONS.filter((m) => m.version <= 10)) {
      db.exec(m.sql);
      db.pragma(`user_version = ${m.version}`);
    }
    db.exec(insertUsers(1, 30));
    db.exec('DELETE FROM users WHERE id IN (5, 6)');
    migrate(db);
    const sql = new SqliteSql(db);
    const all = range(1, 30).filter((id) => id !== 5 && id !== 6);
    expect(await new UserSearch(sql, '').count()).toBe(28);
    expect(await found(sql, 'zebra')).toEqual({ count: 9, ids: zebrasOf(all) });

    // SQL from outside the application: one statement of many rows, deletes, and updates of the searched columns.
    db.exec(insertUsers(31, 20));
    db.exec('DELETE FROM users WHERE id BETWEEN 40 AND 44');
    db.exec("UPDATE users SET full_name = 'Zebra again' WHERE id = 1");
    db.exec("UPDATE users SET full_name = 'Plains quagga', email = 'quagga@example.com' WHERE id = 3");
    db.exec('UPDATE users SET is_active = 0 WHERE id = 2');
    const now = [...all, ...range(31, 50)].filter((id) => id < 40 || id > 44);
    expect(await new UserSearch(sql, '').count()).toBe(now.length);
    expect((await found(sql, 'zebra')).ids).toEqual([1, ...zebrasOf(now).filter((id) => id !== 3)]);
    expect((await found(sql, 'quagga')).ids).toEqual([3]);
    expect((await found(sql, 'qu')).ids).toEqual([3]);
    // The trigram table holds exactly what the users table does.
    db.prepare("INSERT INTO users_search (users_search, rank) VALUES ('integrity-check', 1)").run();
    db.close();
  });
});

/** A fresh database, migrated by hand up to `version` as an older miniapp left it; dropped by `done`. */
async function databaseAt(version: number): Promise<{ url: string; done: () => Promise<void> }> {
  const database = await createTestDatabase();
  const admin = adminSql(database.url);
  try {
    await admin.unsafe('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)');
    for (const m of POSTGRES_MIGRATIONS.filter((m) => m.version <= version)) {
      await admin.unsafe(m.sql);
      await admin.unsafe('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [m.version, m.description, 'then']);
    }
  } finally {
    await admin.end();
  }
  return { url: database.url, done: database.drop };
}

describe('PostgreSQL migration 8', () => {
  it('counts the users already there, then one UPDATE a statement of inserts or deletes, whatever its size; TRUNCATE counts 0', async () => {
    const database = await databaseAt(6);
    const admin = adminSql(database.url);
    try {
      await admin.unsafe(insertUsers(1, 30));
      await admin.unsafe('DELETE FROM users WHERE id IN (5, 6)');
      const store = await openStore({ kind: 'postgres', url: database.url, poolSize: 2 });
      try {
        expect(await new UserSearch(store.sql, '').count()).toBe(28);
        expect(await found(store.sql, 'zebra')).toEqual({ count: 9, ids: zebrasOf(range(1, 30).filter((id) => id !== 6)) });
        const indexes = await admin.unsafe<{ indexdef: string }>("SELECT indexdef FROM pg_indexes WHERE indexname = 'users_search'");
        expect(indexes.map((i) => i.indexdef)).toEqual([
          expect.stringMatching(/USING gin \(username gin_trgm_ops, email gin_trgm_ops, full_name gin_trgm_ops\)$/),
        ]);

        // In one transaction, its own statistics say how often the counter row was written: once a statement.
        await admin.unsafe('BEGIN');
        await admin.unsafe(insertUsers(31, 1000));
        await admin.unsafe('DELETE FROM users WHERE id BETWEEN 100 AND 399');
        await admin.unsafe('DELETE FROM users WHERE id < 0');
        const writes = await admin.unsafe<{ n: string }>("SELECT n_tup_upd AS n FROM pg_stat_xact_user_tables WHERE relname = 'counters'");
        await admin.unsafe('COMMIT');
        // Two statements changed users (a third deleted none): two writes, not 1,300.
        expect(writes.map((row) => Number(row.n))).toEqual([2]);
        expect(await new UserSearch(store.sql, '').count()).toBe(28 + 1000 - 300);
        expect((await found(store.sql, 'zebra')).count).toBe(9 + zebrasOf(range(31, 1030).filter((id) => id < 100 || id > 399)).length);

        await admin.unsafe('TRUNCATE users CASCADE');
        expect(await new UserSearch(store.sql, '').count()).toBe(0);
        await admin.unsafe(insertUsers(1, 2));
        expect(await new UserSearch(store.sql, '').count()).toBe(2);
      } finally {
        await store.close();
      }
    } finally {
      await admin.end();
      await database.done();
    }
  });

  it('goes on without the trigram index when the server refuses pg_trgm, and the filter still works', async () => {
    const database = await createTestDatabase();
    const role = `no_extensions_${Math.random().toString(36).slice(2, 8)}`;
    const server = new pg.Client({ connectionString: serverUrl() });
    await server.connect();
    try {
      // The role may make tables in the schema but not extensions in the database (no CREATE on it), as on managed servers.
      await server.query(`CREATE ROLE ${role} LOGIN PASSWORD 'no-ext-pw'`);
      const admin = adminSql(database.url);
      await admin.unsafe(`ALTER SCHEMA public OWNER TO ${role}`);
      await admin.end();
      const url = new URL(database.url);
      url.username = role;
      url.password = 'no-ext-pw';
      const store = await openStore({ kind: 'postgres', url: url.href, poolSize: 2 });
      try {
        expect(await store.sql.all("SELECT extname FROM pg_extension WHERE extname = 'pg_trgm'")).toEqual([]);
        expect(await store.sql.all("SELECT indexname FROM pg_indexes WHERE indexname = 'users_search'")).toEqual([]);
        expect((await store.sql.one<{ version: number }>('SELECT max(version) AS version FROM schema_migrations'))!.version).toBe(
          POSTGRES_MIGRATIONS.at(-1)!.version,
        );
        await store.sql.run(insertUsers(1, 12));
        expect(await found(store.sql, 'ZEBRA')).toEqual({ count: 4, ids: [3, 6, 9, 12] });
        expect(await found(store.sql, 'r1')).toEqual({ count: 4, ids: [1, 10, 11, 12] });
      } finally {
        await store.close();
      }
    } finally {
      await database.drop();
      await server.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
      await server.end();
    }
  });
});
