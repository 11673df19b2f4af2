/**
 * The store of a suite that runs on both backends (describe.each(BACKENDS)):
 * on PostgreSQL, one database for the whole describe block, emptied before
 * each test (a fresh database per test would cost a CREATE DATABASE and a
 * migration each); on SQLite, what the suite asks for (memory by default).
 *
 * Call it first in the describe block, so that the database is empty before
 * the suite's own beforeEach starts serve on it.
 */
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { adminSql, type AdminSql } from './pg-admin.js';
import type { StoreLocation } from '../../src/store/store.js';
import { createTestDatabase, type Backend, type TestDatabase } from './postgres.js';

export interface BackendStore {
  backend: Backend;
  /** Where serve keeps its state in this test. */
  location(): StoreLocation;
  /** The database's URL (PostgreSQL only), for a second instance or a look from outside. */
  readonly url: string;
}

export function useBackendStore(backend: Backend, sqlite: () => StoreLocation = () => ({ kind: 'memory' })): BackendStore {
  let database: TestDatabase | undefined;
  // One connection empties the database before each test of the block: a new one each time costs PostgreSQL a
  // backend start (tens of ms of CPU), as much as the emptying itself.
  let admin: AdminSql | undefined;
  if (backend === 'postgres') {
    beforeAll(async () => {
      database = await createTestDatabase({ migrated: true });
      admin = adminSql(database.url);
    });
    afterAll(async () => {
      await admin?.end();
      await database?.drop();
    });
    beforeEach(async () => {
      await emptyDatabase(admin!);
    });
  }
  return {
    backend,
    location: () => (database ? { kind: 'postgres', url: database.url, poolSize: 5 } : sqlite()),
    get url() {
      if (!database) throw new Error('the SQLite backend has no database URL');
      return database.url;
    },
  };
}

/**
 * Every table of a migrated database emptied and its ids restarted, the schema and its version kept. DELETE rather
 * than TRUNCATE: on tables of a few rows it is about 8 times faster (TRUNCATE makes new files for every table and
 * index), and this runs before every test of the suites on PostgreSQL. Foreign keys are not checked meanwhile
 * (session_replication_role), so the tables may be emptied in any order.
 */
export async function emptyDatabase(database: string | AdminSql): Promise<void> {
  const admin = typeof database === 'string' ? adminSql(database) : database;
  try {
    const tables = await admin<{ tablename: string }>`
      SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename NOT IN ('schema_migrations', 'counters')`;
    if (tables.length === 0) return;
    const sequences = await admin<{ sequencename: string }>`SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'`;
    await admin.unsafe(
      [
        'BEGIN',
        "SET LOCAL session_replication_role = 'replica'",
        ...tables.map((t) => `DELETE FROM "${t.tablename}"`),
        ...sequences.map((s) => `ALTER SEQUENCE "${s.sequencename}" RESTART`),
        'UPDATE counters SET value = 0',
        'COMMIT',
      ].join(';\n'),
    );
  } finally {
    if (typeof database === 'string') await admin.end();
  }
}
