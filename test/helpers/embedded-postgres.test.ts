/**
 * The test run's PostgreSQL starts from any clone path, for root and for
 * an ordinary user: as root the server runs as the user postgres, which
 * cannot enter a clone under a 0700 directory (a home, `mktemp -d`), so
 * the binaries then run from a copy it can reach; nothing the server does
 * reaches into the clone.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { canRun, packagedBinaries, startEmbeddedPostgres } from './embedded-postgres.js';

const cleanups: (() => void)[] = [];
afterAll(() => {
  for (const cleanup of cleanups.reverse()) cleanup();
});

describe('the embedded PostgreSQL of the tests', () => {
  it('starts from binaries under a 0700 directory of the clone, and answers', async () => {
    const root = mkdtempSync(join(tmpdir(), 'miniapp-private-clone-'));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    chmodSync(root, 0o700);
    const { native } = await packagedBinaries();
    const source = join(root, 'node_modules', 'native');
    cpSync(native, source, { recursive: true, verbatimSymlinks: true });
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      // The premise: the server's user cannot run what is inside the clone.
      const postgresUser = {
        uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })),
        gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })),
      };
      expect(canRun(join(source, 'bin', 'postgres'), postgresUser)).toBe(false);
    }
    const server = await startEmbeddedPostgres({ prefix: 'miniapp-private-', password: 'private', source });
    if (server.binaries !== source) cleanups.push(() => rmSync(server.binaries, { recursive: true, force: true }));
    try {
      // Root: a copy outside the clone; anyone else: the clone's own binaries, which they can reach.
      if (asRoot) expect(server.binaries.startsWith(root)).toBe(false);
      else expect(server.binaries).toBe(source);
      const client = new pg.Client({ connectionString: server.url() });
      await client.connect();
      const { rows } = await client.query('SELECT current_user AS who, 6 * 7 AS answer');
      await client.end();
      expect(rows).toEqual([{ who: 'postgres', answer: 42 }]);
      // pid() is the postmaster's (the benchmarks count its CPU and its sessions'): the process started on the data directory.
      if (existsSync('/proc/self')) expect(readFileSync(`/proc/${server.pid()}/cmdline`, 'utf8').split('\0')).toContain('-D');
      // And again after a restart, on the same port and data.
      await server.server.stop();
      await server.server.start();
      const again = new pg.Client({ connectionString: server.url() });
      await again.connect();
      expect((await again.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      await again.end();
    } finally {
      await server.stop();
    }
  }, 60_000);
});
