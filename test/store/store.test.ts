/**
 * The store layer on both backends, one suite: the query interface, its
 * transactions, unique violations, signals, and migrations that run once
 * when instances start together.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { openStore, migrationStatus, redactUrl, parsePostgresUrl, type Store } from '../../src/store/store.js';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FlushFailedError, SqliteSql, StoreUnavailableError, UniqueViolation, type Sql } from '../../src/store/sql.js';
import { databasePath, openDatabase, openReader } from '../../src/store/database.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres-schema.js';
import { BACKENDS, createTestDatabase, testLocation } from '../helpers/postgres.js';

describe.each(BACKENDS)('store on %s', (backend) => {
  let store: Store;
  let dispose: () => Promise<void>;

  beforeEach(async () => {
    const test = await testLocation(backend);
    dispose = test.dispose;
    store = await openStore(test.location);
  });
  afterEach(async () => {
    await store.close();
    await dispose();
  });

  it('runs the same statements with $n parameters on either engine', async () => {
    const { sql } = store;
    await sql.run('INSERT INTO unlink_events (received_at, user_key, referrer, method, source) VALUES ($1, $2, $3, $4, $5)', [
      '2026-01-01T00:00:00.000Z',
      7,
      null,
      'POST',
      '127.0.0.1',
    ]);
    const row = await sql.one<{ id: number; user_key: number; referrer: string | null }>(
      'SELECT id, user_key, referrer FROM unlink_events WHERE user_key = $1',
      [7],
    );
    expect(row).toEqual({ id: 1, user_key: 7, referrer: null });
    expect(await sql.one('SELECT id FROM unlink_events WHERE user_key = $1', [8])).toBeUndefined();
    const count = await sql.one<{ n: number }>('SELECT count(*) AS n FROM unlink_events');
    expect(count?.n).toBe(1);
  });

  it("passes the work's own errors out of a transaction and a savepoint as they are, whatever their words", async () => {
    // An order id can hold "TLs", a message can say "timeout": neither makes the database unavailable.
    const own = new Error('order ord_an436oxTLsCUY is EXPIRED after a timeout; Connection terminated by the customer');
    const { sql } = store;
    await expect(sql.transaction(async () => Promise.reject(own))).rejects.toBe(own);
    await expect(
      sql.transaction(async (tx) => {
        await tx.one('SELECT 1 AS one');
        return tx.transaction(async () => Promise.reject(own));
      }),
    ).rejects.toBe(own);
    // And the store still works.
    expect(await sql.one<{ one: number }>('SELECT 1 AS one')).toEqual({ one: 1 });
  });

  it('commits a transaction whole, rolls it back whole, and nests savepoints', async () => {
    const { sql } = store;
    const insert = (tx: typeof sql, key: number) =>
      tx.run('INSERT INTO unlink_events (received_at, user_key, method) VALUES ($1, $2, $3)', ['2026-01-01T00:00:00.000Z', key, 'GET']);
    await sql.transaction(async (tx) => {
      await insert(tx, 1);
      await insert(tx, 2);
    });
    await expect(
      sql.transaction(async (tx) => {
        await insert(tx, 3);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    await sql.transaction(async (tx) => {
      await insert(tx, 4);
      await tx.transaction(async (inner) => insert(inner, 5)).catch(() => undefined);
      await tx
        .transaction(async (inner) => {
          await insert(inner, 6);
          throw new Error('only the savepoint');
        })
        .catch(() => undefined);
    });
    const keys = (await sql.all<{ user_key: number }>('SELECT user_key FROM unlink_events ORDER BY user_key')).map((r) => r.user_key);
    expect(keys).toEqual([1, 2, 4, 5]);
  });

  it('keeps a statement of another task out of an open transaction', async () => {
    const { sql } = store;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const insert = (tx: typeof sql, key: number) =>
      tx.run('INSERT INTO unlink_events (received_at, user_key, method) VALUES ($1, $2, $3)', ['2026-01-01T00:00:00.000Z', key, 'GET']);
    const open = sql.transaction(async (tx) => {
      await insert(tx, 10);
      await gate;
      throw new Error('roll back');
    });
    const outside = insert(sql, 11);
    release();
    await expect(open).rejects.toThrow('roll back');
    await outside;
    const keys = (await sql.all<{ user_key: number }>('SELECT user_key FROM unlink_events ORDER BY user_key')).map((r) => r.user_key);
    expect(keys).toEqual([11]);
  });

  it('keeps a task begun in a finished transaction out of the next one, whose own statements run', async () => {
    const { sql } = store;
    const insert = (tx: typeof sql, key: number) =>
      tx.run('INSERT INTO unlink_events (received_at, user_key, method) VALUES ($1, $2, $3)', ['2026-01-01T00:00:00.000Z', key, 'GET']);
    let openLater!: () => void;
    const laterGate = new Promise<void>((resolve) => (openLater = resolve));
    let later!: Promise<unknown>;
    await sql.transaction(async (tx) => {
      // Begun inside this transaction, it writes after the commit, through the store, not the transaction.
      later = (async () => {
        await laterGate;
        await insert(sql, 20);
      })();
      await insert(tx, 19);
    });
    let nextOpen!: () => void;
    const opened = new Promise<void>((resolve) => (nextOpen = resolve));
    let closeNext!: () => void;
    const nextGate = new Promise<void>((resolve) => (closeNext = resolve));
    const next = sql.transaction(async (tx) => {
      await insert(tx, 21);
      nextOpen();
      await nextGate;
      await insert(tx, 22);
      throw new Error('roll back');
    });
    await opened;
    openLater();
    await new Promise((resolve) => setTimeout(resolve, 20));
    closeNext();
    await expect(next).rejects.toThrow('roll back');
    await later;
    const keys = (await sql.all<{ user_key: number }>('SELECT user_key FROM unlink_events ORDER BY user_key')).map((r) => r.user_key);
    expect(keys).toEqual([19, 20]);
  });

  it('keeps tasks apart across transactions that come and go, leftovers of an earlier one included', async () => {
    const { sql } = store;
    const insert = (tx: typeof sql, key: number) =>
      tx.run('INSERT INTO unlink_events (received_at, user_key, method) VALUES ($1, $2, $3)', ['2026-01-01T00:00:00.000Z', key, 'GET']);
    let releaseLeftover!: () => void;
    const leftoverGate = new Promise<void>((resolve) => (releaseLeftover = resolve));
    let leftover!: Promise<number>;
    // The first transaction leaves a task behind that writes later, through the shared Sql, after it has committed.
    await sql.transaction(async (tx) => {
      await insert(tx, 20);
      leftover = leftoverGate.then(() => insert(sql, 21));
    });
    // Begun between the two transactions: no transaction is open, so it runs at once.
    await insert(sql, 22);
    let releaseOpen!: () => void;
    const openGate = new Promise<void>((resolve) => (releaseOpen = resolve));
    let reached!: () => void;
    const inside = new Promise<void>((resolve) => (reached = resolve));
    const open = sql.transaction(async (tx) => {
      await insert(tx, 23);
      await tx.transaction(async (inner) => insert(inner, 24));
      reached();
      await openGate;
      throw new Error('roll back');
    });
    await inside;
    // While the second one is open: the leftover of the first and a new task both stay out of it.
    releaseLeftover();
    const outside = insert(sql, 25);
    releaseOpen();
    await expect(open).rejects.toThrow('roll back');
    await Promise.all([leftover, outside]);
    const keys = (await sql.all<{ user_key: number }>('SELECT user_key FROM unlink_events ORDER BY user_key')).map((r) => r.user_key);
    expect(keys).toEqual([20, 21, 22, 25]);
  });

  it('reports a unique violation with the index it broke', async () => {
    const { sql } = store;
    const insert = (name: string, email: string) =>
      sql.run("INSERT INTO users (username, email, password_hash, created_at, updated_at) VALUES ($1, $2, 'h', 'now', 'now')", [name, email]);
    await insert('ann', 'ann@example.com');
    const error = await insert('ANN', 'other@example.com').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UniqueViolation);
    expect((error as UniqueViolation).constraint).toBe('users_username');
    const email = await insert('bob', 'Ann@Example.com').catch((e: unknown) => e);
    expect((email as UniqueViolation).constraint).toBe('users_email');
  });

  it('delivers a signal to every subscriber, and one published in a transaction only once it commits', async () => {
    const heard: string[] = [];
    let connected = 0;
    const unsubscribe = await store.signals.subscribe(
      'test_channel',
      (payload) => heard.push(payload),
      () => connected++,
    );
    expect(connected).toBe(1);
    await store.signals.publish('test_channel', 'one');
    await store.sql
      .transaction(async (tx) => {
        await store.signals.publish('test_channel', 'rolled back', tx);
        throw new Error('no');
      })
      .catch(() => undefined);
    await store.sql.transaction(async (tx) => {
      await store.signals.publish('test_channel', 'two', tx);
    });
    await waitUntil(() => heard.length >= 2);
    expect(heard).toEqual(['one', 'two']);
    await unsubscribe();
  });

  it('says which migrations the database has', async () => {
    const status = await migrationStatus(store);
    expect(status.length).toBeGreaterThan(0);
    expect(status.every((m) => m.applied)).toBe(true);
  });
});

describe('SQLite store', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('tracks which task is inside a transaction only while one is open or waiting', async () => {
    const store = await openStore({ kind: 'memory' });
    try {
      // Enabled, an AsyncLocalStorage costs every promise of the process (async hooks on Node 20): it is on only while needed.
      const enabled = vi.spyOn(AsyncLocalStorage.prototype, 'run');
      const disabled = vi.spyOn(AsyncLocalStorage.prototype, 'disable');
      const insert = (tx: Sql, key: number) =>
        tx.run('INSERT INTO unlink_events (received_at, user_key, method) VALUES ($1, $2, $3)', ['2026-01-01T00:00:00.000Z', key, 'GET']);
      await store.sql.one('SELECT 1 AS one');
      expect(enabled).not.toHaveBeenCalled();
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const first = store.sql.transaction(async (tx) => {
        await insert(tx, 1);
        await gate;
      });
      const second = store.sql.transaction((tx) => insert(tx, 2));
      await new Promise((resolve) => setImmediate(resolve));
      expect(enabled).toHaveBeenCalledTimes(1);
      // The second waits for its turn: the tracking stays on for it.
      expect(disabled).not.toHaveBeenCalled();
      release();
      await Promise.all([first, second]);
      expect(enabled).toHaveBeenCalledTimes(2);
      expect(disabled).toHaveBeenCalledTimes(1);
      // Reads outside any transaction leave it off.
      await store.sql.one('SELECT count(*) AS n FROM unlink_events');
      expect(enabled).toHaveBeenCalledTimes(2);
    } finally {
      await store.close();
    }
  });
});

describe('SQLite commit groups', () => {
  let dataDir: string;
  let store: Store;
  const insert = (tx: Sql, key: number) =>
    tx.run('INSERT INTO unlink_events (received_at, user_key, method) VALUES ($1, $2, $3)', ['2026-01-01T00:00:00.000Z', key, 'GET']);
  const keys = async (sql: Sql) => (await sql.all<{ user_key: number }>('SELECT user_key FROM unlink_events ORDER BY user_key')).map((row) => row.user_key);
  const sqlite = () => store.sql as SqliteSql;
  const commits = () => vi.spyOn(sqlite().db, 'exec');
  const count = (spy: ReturnType<typeof commits>, text: string) => spy.mock.calls.filter(([statement]) => statement === text).length;

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'miniapp-groups-'));
    store = await openStore({ kind: 'sqlite', dataDir });
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('flushes the log itself, off the event loop, on a new file and on one opened again; a bare connection runs FULL', async () => {
    // NORMAL: SQLite writes each commit to the log and leaves the flush to the store (see the next suite).
    expect(sqlite().db.pragma('synchronous', { simple: true })).toBe(1);
    await store.close();
    store = await openStore({ kind: 'sqlite', dataDir });
    expect(sqlite().db.pragma('synchronous', { simple: true })).toBe(1);
    const bare = openDatabase({ dataDir });
    try {
      new SqliteSql(bare);
      expect(bare.pragma('synchronous', { simple: true })).toBe(2);
    } finally {
      bare.close();
    }
  });

  it('commits the transactions begun in one turn once, and answers each only after that commit', async () => {
    const exec = commits();
    const answered: boolean[] = [];
    const all = [1, 2, 3, 4, 5].map((key) => store.sql.transaction((tx) => insert(tx, key)).then(() => answered.push(sqlite().db.inTransaction)));
    await Promise.all(all);
    expect(count(exec, 'BEGIN IMMEDIATE')).toBe(1);
    expect(count(exec, 'COMMIT')).toBe(1);
    expect(answered).toEqual([false, false, false, false, false]);
    expect(await keys(store.sql)).toEqual([1, 2, 3, 4, 5]);
    // The next turn's transaction is a group of its own.
    await store.sql.transaction((tx) => insert(tx, 6));
    expect(count(exec, 'COMMIT')).toBe(2);
  });

  it('rolls back a failing transaction alone; the others of its group are kept', async () => {
    const failure = new Error('out of stock');
    const results = await Promise.allSettled([
      store.sql.transaction((tx) => insert(tx, 1)),
      store.sql.transaction(async (tx) => {
        await insert(tx, 2);
        throw failure;
      }),
      store.sql.transaction((tx) => insert(tx, 3)),
    ]);
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toBe(failure);
    expect(await keys(store.sql)).toEqual([1, 3]);
  });

  it('fails every caller of a group whose COMMIT fails, keeps none of their writes and runs none of their hooks', async () => {
    const db = sqlite().db;
    const exec = db.exec.bind(db);
    let refused = false;
    vi.spyOn(db, 'exec').mockImplementation((text: string) => {
      if (text === 'COMMIT' && !refused) {
        refused = true;
        throw Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' });
      }
      return exec(text);
    });
    const hooks: number[] = [];
    const results = await Promise.allSettled(
      [1, 2].map((key) =>
        store.sql.transaction(async (tx) => {
          await insert(tx, key);
          tx.afterCommit(() => hooks.push(key));
        }),
      ),
    );
    expect(results.map((result) => result.status)).toEqual(['rejected', 'rejected']);
    expect(String((results[0] as PromiseRejectedResult).reason)).toContain('disk I/O error');
    await new Promise((resolve) => setImmediate(resolve));
    expect(hooks).toEqual([]);
    expect(await keys(store.sql)).toEqual([]);
    // The store goes on.
    await store.sql.transaction(async (tx) => {
      await insert(tx, 3);
      tx.afterCommit(() => hooks.push(3));
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(hooks).toEqual([3]);
    expect(await keys(store.sql)).toEqual([3]);
  });

  it('answers a read from outside, while a group is open, from what is committed, at once; the writer reads its write back once answered', async () => {
    const seen: string[] = [];
    const write = store.sql.transaction(async (tx) => {
      await insert(tx, 1);
      tx.afterCommit(() => seen.push('hook'));
    });
    // The transaction's work is done within this turn; its group commits after the turn's callbacks.
    await Promise.resolve();
    await Promise.resolve();
    expect(sqlite().db.inTransaction).toBe(true);
    // On the reader's connection: the group's row is not committed yet, and the read does not wait for it.
    const read = store.sql.one<{ n: number }>('SELECT count(*) AS n FROM unlink_events').then((row) => {
      seen.push(`read ${row?.n} ${sqlite().db.inTransaction ? 'while the group is open' : 'after its commit'}`);
    });
    await Promise.all([write, read]);
    expect(seen).toEqual(['read 0 while the group is open', 'hook']);
    expect(await store.sql.one<{ n: number }>('SELECT count(*) AS n FROM unlink_events')).toEqual({ n: 1 });
  });

  it('without a reader (a database in memory), keeps a read from outside waiting until the group has committed, and runs hooks only after it', async () => {
    const memory = await openStore({ kind: 'memory' });
    try {
      const seen: string[] = [];
      const write = memory.sql.transaction(async (tx) => {
        await insert(tx, 1);
        tx.afterCommit(() => seen.push('hook'));
      });
      await Promise.resolve();
      await Promise.resolve();
      const read = memory.sql.one<{ n: number }>('SELECT count(*) AS n FROM unlink_events').then((row) => {
        seen.push(`read ${row?.n} ${(memory.sql as SqliteSql).db.inTransaction ? 'inside' : 'committed'}`);
      });
      await Promise.all([write, read]);
      expect(seen).toEqual(['hook', 'read 1 committed']);
    } finally {
      await memory.close();
    }
  });

  it('commits an open group before the database closes', async () => {
    const write = store.sql.transaction((tx) => insert(tx, 9));
    await store.close();
    await write;
    store = await openStore({ kind: 'sqlite', dataDir });
    expect(await keys(store.sql)).toEqual([9]);
  });
});

describe('SQLite flushes', () => {
  let dataDir: string;
  let db: ReturnType<typeof openDatabase>;
  let sql: SqliteSql;
  /** The flushes asked for, each finished by the test. */
  let flushes: { done: () => void; fail: (error: Error) => void }[];
  const insert = (tx: Sql, key: number) =>
    tx.run('INSERT INTO unlink_events (received_at, user_key, method) VALUES ($1, $2, $3)', ['2026-01-01T00:00:00.000Z', key, 'GET']);
  /** A turn of the event loop and the next: a group begun in this one has committed (its commit is a setImmediate of its own). */
  const turn = async () => {
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
  };
  /** Whether `promise` has settled, after the callbacks of two turns. */
  const settled = async (promise: Promise<unknown>) => {
    let done = false;
    void promise.then(
      () => (done = true),
      () => (done = true),
    );
    await turn();
    await turn();
    return done;
  };

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'miniapp-flush-'));
    db = openDatabase({ dataDir });
    flushes = [];
    const flush = () => new Promise<void>((done, fail) => flushes.push({ done, fail }));
    sql = new SqliteSql(db, { flush });
  });
  afterEach(async () => {
    // What a test left waiting commits before the database closes.
    const left = sql.settled();
    while (!(await settled(left))) for (const flush of flushes) flush.done();
    db.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers a transaction, and runs its hooks, only once its commit is flushed', async () => {
    const hooks: string[] = [];
    const write = sql.transaction(async (tx) => {
      await insert(tx, 1);
      tx.afterCommit(() => hooks.push('hook'));
    });
    expect(await settled(write)).toBe(false);
    // Committed to the log (another connection sees it), not yet answered.
    expect(db.inTransaction).toBe(false);
    expect(flushes).toHaveLength(1);
    expect(hooks).toEqual([]);
    flushes[0]!.done();
    await write;
    await turn();
    expect(hooks).toEqual(['hook']);
  });

  it('answers a read on the reader connection at once while a group is open, and after the flush of the commits it may have read', async () => {
    const reader = openReader(databasePath(dataDir));
    try {
      const withReader = new SqliteSql(db, { flush: () => new Promise<void>((done, fail) => flushes.push({ done, fail })), reader });
      // A group open on the writer: the reader sees nothing of it, and answers at once (nothing committed is unflushed).
      const first = withReader.transaction((tx) => insert(tx, 1));
      await Promise.resolve();
      expect(db.inTransaction).toBe(true);
      expect(await withReader.one('SELECT count(*) AS n FROM unlink_events')).toEqual({ n: 0 });
      // Committed, not yet flushed: a read that may see it waits for the flush, and then sees it.
      await turn();
      expect(db.inTransaction).toBe(false);
      expect(flushes).toHaveLength(1);
      const read = withReader.one<{ n: number }>('SELECT count(*) AS n FROM unlink_events');
      expect(await settled(read)).toBe(false);
      flushes[0]!.done();
      await first;
      expect(await read).toEqual({ n: 1 });
    } finally {
      reader.close();
    }
  });

  it('answers a write outside any transaction, and a read of what is not flushed yet, only after the flush', async () => {
    const write = insert(sql, 1);
    expect(await settled(write)).toBe(false);
    const read = sql.one<{ n: number }>('SELECT count(*) AS n FROM unlink_events');
    expect(await settled(read)).toBe(false);
    expect(flushes).toHaveLength(1);
    flushes[0]!.done();
    expect(await write).toBe(1);
    expect(await read).toEqual({ n: 1 });
    // Everything is on the disk: a read is answered at once, and asks for no flush.
    expect(await settled(sql.one('SELECT count(*) AS n FROM unlink_events'))).toBe(true);
    expect(flushes).toHaveLength(1);
  });

  it('lets the next groups commit while a flush runs, and covers them all with one flush after it', async () => {
    const first = sql.transaction((tx) => insert(tx, 1));
    await turn();
    expect(flushes).toHaveLength(1);
    // Two more groups commit to the log while the first flush is in flight.
    const second = sql.transaction((tx) => insert(tx, 2));
    await turn();
    const third = sql.transaction((tx) => insert(tx, 3));
    await turn();
    expect(await db.prepare('SELECT count(*) AS n FROM unlink_events').get()).toEqual({ n: 3 });
    expect(flushes).toHaveLength(1);
    flushes[0]!.done();
    await first;
    expect(await settled(second)).toBe(false);
    expect(flushes).toHaveLength(2);
    flushes[1]!.done();
    await Promise.all([second, third]);
    expect(flushes).toHaveLength(2);
  });

  it('fails the callers of a failed flush, and every statement after it, saying to restart', async () => {
    const write = sql.transaction((tx) => insert(tx, 1));
    const outside = insert(sql, 2);
    await turn();
    const outcomes = Promise.allSettled([write, outside]);
    flushes[0]!.fail(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    const [failed, failedOutside] = (await outcomes) as PromiseRejectedResult[];
    expect(failed!.reason).toBeInstanceOf(FlushFailedError);
    expect(String(failed!.reason)).toMatch(/EIO.*restart serve/);
    expect(failedOutside!.reason).toBeInstanceOf(FlushFailedError);
    // Answered as a database that cannot be reached (503 / UNAVAILABLE), not as a bug.
    expect(failed!.reason).toBeInstanceOf(StoreUnavailableError);
    expect((failed!.reason as StoreUnavailableError).reason).toBe('disk');
    // The kernel may have dropped what it could not write: nothing more is promised, reads included.
    await expect(sql.one('SELECT 1 AS one')).rejects.toBeInstanceOf(FlushFailedError);
    await expect(sql.transaction((tx) => insert(tx, 3))).rejects.toBeInstanceOf(FlushFailedError);
    expect(flushes).toHaveLength(1);
  });

  it('flushes the real log file through the store, whose writes are there after a reopen', async () => {
    const store = await openStore({ kind: 'sqlite', dataDir });
    try {
      const wal = `${join(dataDir, 'miniapp.db')}-wal`;
      // FileHandle is not exported: its prototype is that of any handle.
      const handle = await open(wal, 'r');
      await handle.close();
      const datasync = vi.spyOn(Object.getPrototypeOf(handle) as { datasync: () => Promise<void> }, 'datasync');
      await Promise.all([1, 2, 3].map((key) => store.sql.transaction((tx) => insert(tx, key))));
      expect(datasync).toHaveBeenCalledTimes(1);
      expect(statSync(wal).size).toBeGreaterThan(0);
    } finally {
      vi.restoreAllMocks();
      await store.close();
    }
    const again = await openStore({ kind: 'sqlite', dataDir });
    try {
      expect(await again.sql.all('SELECT user_key FROM unlink_events ORDER BY user_key')).toEqual([{ user_key: 1 }, { user_key: 2 }, { user_key: 3 }]);
    } finally {
      await again.close();
    }
  });
});

describe('PostgreSQL store', () => {
  it('migrates once when several instances start together on an empty database', async () => {
    const database = await createTestDatabase();
    try {
      const stores = await Promise.all(Array.from({ length: 4 }, () => openStore({ kind: 'postgres', url: database.url, poolSize: 2 })));
      const rows = await stores[0]!.sql.all<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
      expect(rows.map((r) => r.version)).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
      await Promise.all(stores.map((s) => s.close()));
    } finally {
      await database.drop();
    }
  });

  it('runs a prepared statement again after another instance changed its table (a rolling migration)', async () => {
    const database = await createTestDatabase();
    const store = await openStore({ kind: 'postgres', url: database.url, poolSize: 1 });
    try {
      await store.sql.exec('CREATE TABLE gadgets (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL)');
      await store.sql.run('INSERT INTO gadgets (name) VALUES ($1)', ['sprocket']);
      const read = () => store.sql.all<Record<string, unknown>>('SELECT * FROM gadgets WHERE id = $1', [1]);
      expect(await read()).toEqual([{ id: 1, name: 'sprocket' }]);
      // Another instance (another connection) adds a column: the statement prepared above returns other columns now.
      const other = await openStore({ kind: 'postgres', url: database.url, poolSize: 1 });
      await other.sql.exec("ALTER TABLE gadgets ADD COLUMN colour TEXT NOT NULL DEFAULT 'red'");
      await other.close();
      expect(await read()).toEqual([{ id: 1, name: 'sprocket', colour: 'red' }]);
    } finally {
      await store.close();
      await database.drop();
    }
  });

  it('never shows the password of its URL', async () => {
    expect(redactUrl('postgres://app:s3cret@db.example.com:5432/miniapp?sslmode=require')).toBe(
      'postgres://app:***@db.example.com:5432/miniapp?sslmode=require',
    );
    const error = await openStore({ kind: 'postgres', url: 'postgres://app:s3cret@127.0.0.1:1/miniapp', timeoutMs: 1000 }).catch((e: unknown) => e);
    expect((error as Error).message).toContain('cannot reach the database at postgres://app:***@127.0.0.1:1/miniapp: the connection was refused');
    expect(error).toMatchObject({ exitCode: 5, code: 'DATABASE_UNAVAILABLE' });
    expect(String((error as Error).message) + String((error as Error & { hint?: string }).hint)).not.toContain('s3cret');
  });

  it('reads sslmode as libpq does', () => {
    expect(parsePostgresUrl('postgres://u:p@h/db').ssl).toBe(false);
    expect(parsePostgresUrl('postgres://u:p@h/db?sslmode=require').ssl).toEqual({ rejectUnauthorized: false });
    expect(parsePostgresUrl('postgres://u:p@h/db?sslmode=verify-full').ssl).toEqual({ rejectUnauthorized: true });
    expect(parsePostgresUrl('postgresql://u:p@h/db?sslmode=require').connection).toBe('postgresql://u:p@h/db');
    expect(() => parsePostgresUrl('postgres://u:p@h/db?sslmode=sometimes')).toThrow('sslmode=sometimes');
    expect(() => parsePostgresUrl('postgres://u:p@h/db?sslmode=verify-full&sslrootcert=/no/ca.pem')).toThrow('cannot read /no/ca.pem');
    expect(() => parsePostgresUrl('mysql://u:p@h/db')).toThrow('must start with postgres://');
  });
});

async function waitUntil(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
}
