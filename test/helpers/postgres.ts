/**
 * Databases for tests on the run's PostgreSQL server (test/global-postgres.ts):
 * each call makes a fresh, empty database and drops it afterwards, so files
 * running in parallel never share state.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, inject } from 'vitest';
import { adminSql, type AdminSql } from './pg-admin.js';
import type { StoreLocation } from '../../src/store/store.js';

export const BACKENDS = ['sqlite', 'postgres'] as const;
export type Backend = (typeof BACKENDS)[number];

export function serverUrl(): string {
  return inject('postgresUrl');
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * A fresh database on the run's server: empty, or with `migrated` serve's schema already in it (a copy of the
 * run's migrated template, several times cheaper than migrating; for tests whose store or serve would migrate it
 * first thing anyway).
 */
export async function createTestDatabase({ migrated = false }: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const name = `t_${randomBytes(6).toString('hex')}`;
  await serverAdmin().unsafe(`CREATE DATABASE ${name}${migrated ? ` TEMPLATE ${inject('postgresMigratedTemplate')}` : ''}`);
  const url = new URL(serverUrl());
  url.pathname = `/${name}`;
  return {
    url: url.href,
    drop: async () => {
      await serverAdmin().unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/**
 * The worker's connection to the server's own database, for CREATE and DROP DATABASE: kept between files rather than
 * made for each (a backend start costs PostgreSQL tens of ms of CPU, and the run makes hundreds of databases). An
 * idle connection holds no worker open at the end.
 */
let admin: AdminSql | undefined;
function serverAdmin(): AdminSql {
  admin ??= adminSql(serverUrl());
  return admin;
}

/** Where a test's store lives for a backend: memory for SQLite, a fresh database for PostgreSQL. */
export async function testLocation(backend: Backend): Promise<{ location: StoreLocation; dispose: () => Promise<void> }> {
  if (backend === 'sqlite') return { location: { kind: 'memory' }, dispose: async () => undefined };
  const database = await createTestDatabase({ migrated: true });
  return { location: { kind: 'postgres', url: database.url, poolSize: 5 }, dispose: database.drop };
}

export interface FileDatabase {
  /** The database's URL. */
  readonly url: string;
  /** A superuser's connection to it, for looks and changes from outside serve. */
  readonly admin: AdminSql;
}

/**
 * A fresh database for the file (or describe block) it is called in, with a
 * superuser's connection to it: made before its tests, dropped after them.
 */
export function useFileDatabase(): FileDatabase {
  let database: TestDatabase | undefined;
  let admin: AdminSql | undefined;
  beforeAll(async () => {
    database = await createTestDatabase();
    admin = adminSql(database.url);
  });
  afterAll(async () => {
    await admin?.end();
    await database?.drop();
  });
  const made = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useFileDatabase: used before its beforeAll');
    return value;
  };
  return {
    get url() {
      return made(database).url;
    },
    get admin() {
      return made(admin);
    },
  };
}

/** A fresh, empty database for each test of the file (or describe block) it is called in, dropped after the test. */
export function useTestDatabase(): { readonly url: string } {
  let database: TestDatabase | undefined;
  beforeEach(async () => {
    database = await createTestDatabase();
  });
  afterEach(async () => {
    await database?.drop();
    database = undefined;
  });
  return {
    get url() {
      if (!database) throw new Error('useTestDatabase: used outside a test');
      return database.url;
    },
  };
}
