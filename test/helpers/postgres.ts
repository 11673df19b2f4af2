/**
 * Databases for tests on the run's PostgreSQL server (test/global-postgres.ts):
 * each call makes a fresh, empty database and drops it afterwards, so files
 * running in parallel never share state.
 */
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { adminSql } from './pg-admin.js';
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

export async function createTestDatabase(): Promise<TestDatabase> {
  const admin = adminSql(serverUrl());
  const name = `t_${randomBytes(6).toString('hex')}`;
  try {
    await admin.unsafe(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl());
  url.pathname = `/${name}`;
  return {
    url: url.href,
    drop: async () => {
      const dropper = adminSql(serverUrl());
      try {
        await dropper.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await dropper.end();
      }
    },
  };
}

/** Where a test's store lives for a backend: memory for SQLite, a fresh database for PostgreSQL. */
export async function testLocation(backend: Backend): Promise<{ location: StoreLocation; dispose: () => Promise<void> }> {
  if (backend === 'sqlite') return { location: { kind: 'memory' }, dispose: async () => undefined };
  const database = await createTestDatabase();
  return { location: { kind: 'postgres', url: database.url, poolSize: 5 }, dispose: database.drop };
}
