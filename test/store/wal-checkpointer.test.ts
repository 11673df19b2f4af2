/**
 * Checkpoints off the event loop (store/wal-checkpointer.ts): serve's
 * connection never checkpoints by itself, a worker thread copies the log
 * into the database file after writes, and a worker that cannot work gives
 * the connection its automatic checkpoint back.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { startWalCheckpointer } from '../../src/store/wal-checkpointer.js';
import { openStore, type Store } from '../../src/store/store.js';
import { databasePath } from '../../src/store/database.js';
import type { SqliteSql } from '../../src/store/sql.js';

const dirs: string[] = [];
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'miniapp-checkpoint-'));
  dirs.push(dir);
  return dir;
}

/** Polls `check` every 20 ms until it holds, for at most `ms`. */
async function eventually(check: () => boolean, ms = 10_000): Promise<boolean> {
  for (const until = Date.now() + ms; Date.now() < until; await new Promise((resolve) => setTimeout(resolve, 20))) if (check()) return true;
  return check();
}

function walDatabase(file: string) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  cleanups.push(() => db.open && db.close());
  return db;
}

const fill = (db: Database.Database, rows: number) =>
  db.transaction(() => {
    const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
    for (let i = 0; i < rows; i++) insert.run('x'.repeat(200));
  })();

describe('WAL checkpoints on a thread of their own', () => {
  it("turns the connection's own checkpoint off and copies the whole log into the database file", async () => {
    const file = join(tempDir(), 'db.sqlite');
    const db = walDatabase(file);
    const checkpointer = startWalCheckpointer(db, file);
    cleanups.push(() => checkpointer.close());
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    const before = statSync(file).size;
    // Past SQLite's 1,000 pages: a commit would have checkpointed on this thread.
    fill(db, 20_000);
    expect(statSync(file).size).toBe(before);
    const result = await checkpointer.checkpoint();
    expect(result).toBeDefined();
    expect(result!.log).toBeGreaterThan(1_000);
    expect(result!.checkpointed).toBe(result!.log);
    expect(statSync(file).size).toBeGreaterThan(before + 20_000 * 200);
  });

  it('gives the connection its automatic checkpoint back when the worker cannot open the database', async () => {
    const dir = tempDir();
    const db = walDatabase(join(dir, 'db.sqlite'));
    const checkpointer = startWalCheckpointer(db, join(dir, 'no-such.sqlite'));
    cleanups.push(() => checkpointer.close());
    expect(await eventually(() => db.pragma('wal_autocheckpoint', { simple: true }) === 1000)).toBe(true);
    expect(await checkpointer.checkpoint()).toBeUndefined();
  });

  it('runs in the store of a data dir: writes reach the database file without a checkpoint on the event loop', async () => {
    const dataDir = tempDir();
    const store: Store = await openStore({ kind: 'sqlite', dataDir });
    cleanups.push(() => store.close());
    const sql = store.sql as SqliteSql;
    expect(sql.db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    await sql.run('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const file = databasePath(dataDir);
    const before = statSync(file).size;
    await sql.transaction(async (tx) => {
      for (let i = 0; i < 5_000; i++) await tx.run('INSERT INTO t (v) VALUES ($1)', ['x'.repeat(200)]);
    });
    expect(await eventually(() => statSync(file).size > before + 5_000 * 200)).toBe(true);
  });
});
