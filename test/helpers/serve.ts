/**
 * `miniapp serve` in-process for tests: port 0, cheap password hashes,
 * quiet; the store in memory (SQLite) or in a fresh PostgreSQL database of
 * the run's server (dropped when serve closes).
 */
import { startServe, type RunningServe, type ServeOptions } from '../../src/server/serve.js';
import { createTestDatabase, type Backend } from './postgres.js';

export async function startTestServe(overrides: Partial<ServeOptions> = {}, backend: Backend = 'sqlite'): Promise<RunningServe> {
  const database = backend === 'postgres' && !overrides.store ? await createTestDatabase({ migrated: true }) : undefined;
  const running = await startServe({
    host: '127.0.0.1',
    port: 0,
    store: database ? { kind: 'postgres', url: database.url, poolSize: 5 } : { kind: 'memory' },
    decrypt: {},
    logger: false,
    version: 'test',
    now: () => new Date(),
    grpc: false,
    // scrypt at log2 N = 4: 0.06 ms of CPU a hash instead of 1.7 ms at 10 (the least `serve --password-hash-cost`
    // allows); the suites create and log in thousands of users. Stored hashes name their cost, so nothing else differs.
    hashCost: 4,
    // Suites drive serve at machine speed (thousands of requests a second with one token or from one address), far
    // past any default request rate; test/server/request-rates.test.ts turns them on.
    requestRates: false,
    // And they sign up hundreds of users from 127.0.0.1; test/auth/signup-limits.test.ts turns the limit on.
    signupLimits: false,
    ...overrides,
  }).catch(async (error: unknown) => {
    await database?.drop();
    throw error;
  });
  if (!database) return running;
  const close = running.close;
  return Object.assign(running, {
    close: async () => {
      await close();
      await database.drop();
    },
  });
}
