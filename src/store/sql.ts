/**
 * The one query interface of the store layer, over SQLite (better-sqlite3,
 * the embedded default) and PostgreSQL (node-postgres). Every repository is
 * written once against it, with `$1, $2, ...` placeholders, which both
 * engines read (better-sqlite3 takes them as named parameters "1", "2").
 * Where the dialects differ, the repository asks `sql.dialect` or uses the
 * helpers below; the rules of the domain stay in the services.
 *
 * SQLite statements are prepared once per text and run synchronously, so the
 * embedded path costs what it cost before the seam; its transactions are
 * serialised, and a statement of another task waits while one is open.
 * PostgreSQL (postgres-sql.ts) prepares statements on the server, bounds
 * every call by a deadline, and turns a failure to reach the server into a
 * StoreUnavailableError, which the HTTP and gRPC layers answer with 503 /
 * UNAVAILABLE.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { open, type FileHandle } from 'node:fs/promises';
import type { Database as SqliteDatabase, Statement } from 'better-sqlite3';

export type Dialect = 'sqlite' | 'postgres';
/**
 * A statement's parameter. Lists are for PostgreSQL's `= ANY($1)` (a batch
 * of keys: batched-read.ts) and are refused by SQLite, which has no arrays.
 */
export type Param = string | number | bigint | boolean | null | Buffer | readonly (string | null)[] | readonly (number | null)[];

export interface Sql {
  readonly dialect: Dialect;
  /** Every row. */
  all<T>(text: string, params?: readonly Param[]): Promise<T[]>;
  /** The first row, or undefined. */
  one<T>(text: string, params?: readonly Param[]): Promise<T | undefined>;
  /** Runs a statement; resolves with the number of rows it changed. */
  run(text: string, params?: readonly Param[]): Promise<number>;
  /**
   * Runs `work` in one transaction (a savepoint when already in one): all of
   * it or none. On PostgreSQL the whole transaction, the wait for a
   * connection included, has the store's time-out unless `options` says
   * otherwise; past it nothing is committed.
   */
  transaction<T>(work: (tx: Sql) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** Runs several statements of DDL (migrations). */
  exec(text: string): Promise<void>;
  /** Calls `hook` once the transaction this Sql belongs to commits (never if it rolls back); at once outside one. */
  afterCommit(hook: () => void): void;
}

/**
 * `condition` as a check on rows found by something else (their key),
 * never as a way of finding them: `(condition) IS TRUE`, which no index
 * answers, and which a WHERE keeps exactly as it keeps `condition` (both
 * drop false and NULL). Without it, PostgreSQL's planner, told by its
 * statistics that few rows are in some state, may find "the row with this
 * id in this state" by walking the state's index: every row in that state
 * (payments left in progress by a provider's outage, carts left open in a
 * sale, deliveries piling up for a receiver that is down, since the last
 * ANALYZE), where the key finds the one row. For lookups by key in the
 * tables with an index on a state: payments, refunds, reservations
 * (commerce-schema.ts) and webhook deliveries. test/store/row-check.test.ts
 * holds the checkout and the outbox to it.
 */
export function rowCheck(condition: string): string {
  return `(${condition}) IS TRUE`;
}

/** `%text%` for `LIKE ... ESCAPE '\\'`: the text matched anywhere, its own %, _ and \\ taken literally. */
export function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export interface TransactionOptions {
  /** How long the whole transaction may take (PostgreSQL; default: the store's time-out). Migrations take longer. */
  timeoutMs?: number;
  /** The server's statement_timeout inside this transaction (PostgreSQL; 0 = none). */
  statementTimeoutMs?: number;
}

export { StoreUnavailableError, UniqueViolation } from './errors.js';
import { StoreUnavailableError, UniqueViolation } from './errors.js';

// ------------------------------------------------------------------ SQLite

function sqliteParams(params: readonly Param[] | undefined): Record<string, unknown> | undefined {
  if (!params || params.length === 0) return undefined;
  const named: Record<string, unknown> = {};
  for (let i = 0; i < params.length; i++) {
    const value = params[i];
    named[i + 1] = typeof value === 'boolean' ? (value ? 1 : 0) : value;
  }
  return named;
}

function sqliteError(error: unknown): unknown {
  const { code, message } = error as { code?: string; message?: string };
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    // "UNIQUE constraint failed: users.email" names the column; the index is table_column by convention.
    const column = /failed: ([\w.]+)/.exec(message ?? '')?.[1]?.replace('.', '_') ?? 'unknown';
    return new UniqueViolation(column, { cause: error });
  }
  return error;
}

/**
 * SQLite through better-sqlite3. One connection: transactions take turns
 * (a queue), and a statement from outside the open transaction waits for
 * it to end, so that it never lands inside another task's transaction.
 *
 * Which task is inside is told by an AsyncLocalStorage. On Node 20 an
 * enabled one costs every promise and every async resource of the process
 * (async hooks), whether a transaction is open or not: a gRPC or HTTP read
 * that runs no transaction paid it on every call. So the storage is
 * enabled only while transactions are open or waiting (`run` enables it)
 * and disabled when the last one ends. Nothing is lost: it is read only
 * while one is open, and everything begun inside that one was begun while
 * it was enabled; ids never repeat, so a task left over from an earlier
 * transaction never passes for the open one.
 *
 * Group commit. Transactions that begin in one turn of the event loop
 * share one: the first opens it (BEGIN IMMEDIATE) and each runs in a
 * savepoint of its own, which a failure rolls back alone (that caller gets
 * its error at once); the group commits once, after the turn's I/O
 * callbacks (setImmediate), and only then does each caller get its result
 * and its after-commit hooks run. A failed COMMIT fails every caller of the
 * group, and none of their writes are kept. A statement from outside that
 * comes between the group's transactions runs in the group too, and its
 * answer waits for the commit (and fails with it), so nobody reads what may
 * yet be undone.
 *
 * Flushes off the event loop. No caller hears of a write before it is on
 * the disk. Opened bare, the connection runs `synchronous = FULL`: each
 * COMMIT fsyncs the log, and blocks the event loop while the disk works.
 * Given a flush (the store's, for a database in a file: an fdatasync of the
 * -wal file on libuv's thread pool), the connection runs NORMAL instead:
 * SQLite writes each commit to the log and returns, and the flush makes it
 * last. A group is answered once a flush that began after its COMMIT has
 * finished; the next group fills and commits meanwhile, and one flush
 * covers every commit made before it began (as PostgreSQL's WAL writer
 * flushes for many backends at once). A write outside any transaction
 * commits by itself and is answered the same way, and a read made while
 * commits are not yet flushed is answered after they are: nobody is told
 * what a power cut could take back. NORMAL keeps the database consistent
 * on its own (the log's checksums end it at the last whole commit, and a
 * checkpoint syncs the log before it copies it), so the flush adds exactly
 * the durability FULL gave. A flush that fails fails its callers and every
 * statement after it (FlushFailedError): after a failed fsync the kernel
 * may have dropped the pages it could not write, and a later fsync succeed
 * without them, so, as PostgreSQL does, the store promises nothing more
 * until it is opened again.
 *
 * Reads on a connection of their own. Given a reader (a second connection
 * to the same file, which never writes), a read from outside any
 * transaction runs there: WAL gives it the last committed state, so it
 * needs to wait neither for a transaction open on the writer nor for the
 * commit of this turn's group, which a read on the writer's connection
 * would have seen and had to wait for; it waits only for the flush of the
 * commits it may have read. Under a stream of writes that is one flush, not
 * the group's commit and then its flush behind the one in flight. A caller
 * who awaited its write reads it back there: the write was answered after
 * its commit.
 */
interface CommitGroup {
  /** Resolves once the group committed; rejects with the COMMIT's error. */
  readonly committed: Promise<void>;
  /** What to run once it commits (`afterCommit`). */
  readonly hooks: (() => void)[];
  /** Set when SQLite rolled the whole transaction back by itself (an I/O error, a full disk): nothing of it is kept. */
  lost?: unknown;
}

/**
 * Flushes the write-ahead log to the disk (fdatasync of the -wal file) off
 * the event loop; see SqliteSql's "Flushes off the event loop".
 */
export type WalFlush = () => Promise<void>;

/** A flush of the WAL file at `path`, through one handle opened at the first flush and kept (walFlush.close ends it). */
export function walFlush(path: string): WalFlush & { close: () => Promise<void> } {
  let handle: Promise<FileHandle> | undefined;
  const flush = async () => {
    handle ??= open(path, 'r');
    await (await handle).datasync();
  };
  return Object.assign(flush, {
    close: async () => {
      const opened = handle;
      handle = undefined;
      await (await opened?.catch(() => undefined))?.close();
    },
  });
}

/**
 * The disk refused a flush: what was committed since the last good one may
 * not be on it, and nothing more is promised. A StoreUnavailableError, so
 * that callers are answered 503 / UNAVAILABLE, as for a database that
 * cannot be reached, never a bug's 500.
 */
export class FlushFailedError extends StoreUnavailableError {
  constructor(message: string, options: { cause: unknown }) {
    super(message, { ...options, reason: 'disk' });
    this.name = 'FlushFailedError';
  }
}

export class SqliteSql implements Sql {
  readonly dialect = 'sqlite' as const;
  readonly #statements = new Map<string, Statement>();
  readonly #inside = new AsyncLocalStorage<number>();
  #turn: Promise<void> = Promise.resolve();
  #open = 0;
  #depth = 0;
  /** Transactions (not savepoints) begun and not yet ended: open, or waiting for their turn. */
  #pending = 0;
  /** The transaction being filled this turn, if any (see the class comment). */
  #group: CommitGroup | undefined;
  /** With a flush (a database in a file): the commits are flushed by it, off the event loop (see the class comment). */
  readonly #flush: WalFlush | undefined;
  /** Commits made (a group's, or a write's outside any), and how many of them are known to be on the disk. */
  #written = 0;
  #flushed = 0;
  /** The flush in flight: it covers the commits up to `upTo`. */
  #flushing: { upTo: number; done: Promise<void> } | undefined;
  /** Those waiting for the flush after the one in flight, which covers every commit made before it starts. */
  #nextFlush: { promise: Promise<void>; resolve: () => void; reject: (error: unknown) => void } | undefined;
  #flushFailed: FlushFailedError | undefined;

  /** A second connection to the same file, for reads from outside any transaction (see "Reads on a connection of their own"). */
  readonly #reader: SqliteDatabase | undefined;
  readonly #readerStatements = new Map<string, Statement>();

  constructor(
    readonly db: SqliteDatabase,
    options: { flush?: WalFlush | undefined; reader?: SqliteDatabase | undefined } = {},
  ) {
    this.#flush = options.flush;
    // SQLite still writes every commit to the log before it returns; the flush that makes it last is ours.
    if (this.#flush) db.pragma('synchronous = NORMAL');
    this.#reader = options.reader;
    this.#reader?.pragma('query_only = ON');
  }

  /**
   * A read from outside any transaction, on the reader connection: it sees what is committed, never a transaction
   * still open on the writer (the group of this turn), so it waits for no transaction and no commit, only, as every
   * read does, for the flush of the commits it may have read. Undefined when it cannot go there (no reader; the
   * caller is inside the open transaction; the statement writes), and the writer's connection takes it.
   */
  #read<T>(text: string, use: (statement: Statement) => T): Promise<T> | undefined {
    if (!this.#reader || (this.#open !== 0 && this.#inside.getStore() === this.#open)) return undefined;
    if (!this.#statement(text).readonly) return undefined;
    if (this.#flushFailed) return Promise.reject(this.#flushFailed);
    let value: T;
    try {
      let statement = this.#readerStatements.get(text);
      if (!statement) {
        statement = this.#reader.prepare(text);
        this.#readerStatements.set(text, statement);
      }
      value = use(statement);
    } catch (error) {
      return Promise.reject(sqliteError(error));
    }
    return this.#written > this.#flushed ? this.#durable().then(() => value) : Promise.resolve(value);
  }

  #statement(text: string): Statement {
    let statement = this.#statements.get(text);
    if (!statement) {
      statement = this.db.prepare(text);
      this.#statements.set(text, statement);
    }
    return statement;
  }

  /** Runs a statement (`text`: a prepared one, which may only read; none: DDL, taken as a write). */
  #sync<T>(run: () => T, text?: string): Promise<T> {
    // A transaction is running and the caller is not in it: its statements must not see that one's half-done work.
    if (this.#open !== 0 && this.#inside.getStore() !== this.#open) return this.#turn.then(() => this.#sync(run, text));
    if (this.#flushFailed) return Promise.reject(this.#flushFailed);
    let value: T;
    try {
      value = run();
    } catch (error) {
      return Promise.reject(sqliteError(error));
    }
    // Inside a transaction: what counts is its commit.
    if (this.#open !== 0) return Promise.resolve(value);
    // Between the transactions of an open group, a statement from outside runs in it (so it does not stall the
    // turn), and its caller hears of it only once the group has committed: nobody is told what may yet be undone.
    const group = this.#group;
    if (group) return group.committed.then(() => value);
    if (!this.#flush) return Promise.resolve(value);
    // A write outside a transaction commits by itself; a read may have read commits not yet flushed. Either is
    // answered once they are on the disk.
    if (text === undefined || !this.#statements.get(text)!.readonly) this.#written++;
    return this.#written > this.#flushed ? this.#durable().then(() => value) : Promise.resolve(value);
  }

  /** Resolves once every commit made so far is on the disk: with the flush in flight, or the one after it. */
  #durable(): Promise<void> {
    if (this.#flushFailed) return Promise.reject(this.#flushFailed);
    const upTo = this.#written;
    if (!this.#flush || upTo <= this.#flushed) return Promise.resolve();
    if (this.#flushing && upTo <= this.#flushing.upTo) return this.#flushing.done;
    if (!this.#nextFlush) {
      let resolve!: () => void;
      let reject!: (error: unknown) => void;
      const promise = new Promise<void>((yes, no) => {
        resolve = yes;
        reject = no;
      });
      this.#nextFlush = { promise, resolve, reject };
    }
    const next = this.#nextFlush.promise;
    if (!this.#flushing) this.#startFlush();
    return next;
  }

  #startFlush(): void {
    const waiting = this.#nextFlush;
    this.#nextFlush = undefined;
    if (!waiting) return;
    if (this.#flushFailed) {
      waiting.reject(this.#flushFailed);
      return;
    }
    const upTo = this.#written;
    const done = this.#flush!().then(
      () => {
        this.#flushed = Math.max(this.#flushed, upTo);
      },
      (error: unknown) => {
        // After a failed fsync the kernel may have dropped the pages it could not write, and a later fsync
        // succeed without them: nothing is promised from here on, as PostgreSQL stops on such a failure.
        this.#flushFailed ??= new FlushFailedError(
          `the disk did not take the database's last writes (${(error as Error).message}); nothing written since is known to last: restart serve`,
          { cause: error },
        );
        throw this.#flushFailed;
      },
    );
    this.#flushing = { upTo, done };
    void done.then(waiting.resolve, waiting.reject).finally(() => {
      this.#flushing = undefined;
      this.#startFlush();
    });
  }

  all<T>(text: string, params?: readonly Param[]): Promise<T[]> {
    const bound = sqliteParams(params);
    const use = (statement: Statement) => (bound ? statement.all(bound) : statement.all()) as T[];
    return this.#read(text, use) ?? this.#sync(() => use(this.#statement(text)), text);
  }

  one<T>(text: string, params?: readonly Param[]): Promise<T | undefined> {
    const bound = sqliteParams(params);
    const use = (statement: Statement) => (bound ? statement.get(bound) : statement.get()) as T | undefined;
    return this.#read(text, use) ?? this.#sync(() => use(this.#statement(text)), text);
  }

  run(text: string, params?: readonly Param[]): Promise<number> {
    return this.#sync(() => {
      const statement = this.#statement(text);
      const bound = sqliteParams(params);
      return (bound ? statement.run(bound) : statement.run()).changes;
    }, text);
  }

  /** Synchronous access for the few callers that need it (migrations, copy): the raw statement. */
  prepare(text: string): Statement {
    return this.#statement(text);
  }

  async exec(text: string): Promise<void> {
    await this.#sync(() => this.db.exec(text));
  }

  afterCommit(hook: () => void): void {
    if (this.#open !== 0 && this.#group && this.#inside.getStore() === this.#open) this.#group.hooks.push(hook);
    else queueMicrotask(hook);
  }

  /** Queues the caller for the connection: `previous` resolves when its turn comes, `release` gives it to the next. */
  #takeTurn(): { previous: Promise<void>; release: () => void } {
    let release!: () => void;
    const previous = this.#turn;
    this.#turn = new Promise<void>((resolve) => (release = resolve));
    return { previous, release };
  }

  async transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    if (this.#open !== 0 && this.#inside.getStore() === this.#open) return this.#savepoint(work);
    const { previous, release } = this.#takeTurn();
    this.#pending++;
    try {
      await previous;
      let group: CommitGroup;
      let result: T;
      try {
        group = this.#group ?? this.#begin();
        const id = ++this.#depth;
        this.#open = id;
        try {
          result = await this.#inside.run(id, () => this.#savepoint(work));
        } catch (error) {
          if (!this.db.inTransaction && this.#group === group) {
            // SQLite gave up the whole transaction: the group is lost, and the next transaction begins another.
            group.lost = error;
            this.#group = undefined;
          }
          throw error;
        }
      } finally {
        this.#open = 0;
        release();
      }
      await group.committed;
      return result;
    } finally {
      // No transaction left: stop paying for the storage (see the class comment); the next `run` enables it again.
      if (--this.#pending === 0) this.#inside.disable();
    }
  }

  /** Opens the group of this turn and schedules its commit, which takes its turn after the transactions already queued. */
  #begin(): CommitGroup {
    if (this.#flushFailed) throw this.#flushFailed;
    this.db.exec('BEGIN IMMEDIATE');
    let commit!: () => void;
    let fail!: (error: unknown) => void;
    const committed = new Promise<void>((resolve, reject) => {
      commit = resolve;
      fail = reject;
    });
    // A caller whose own savepoint failed never awaits `committed`; its rejection must not go unhandled.
    committed.catch(() => undefined);
    const group: CommitGroup = { committed, hooks: [] };
    this.#group = group;
    setImmediate(() => {
      const { previous, release } = this.#takeTurn();
      void previous.then(() => {
        if (this.#group === group) this.#group = undefined;
        try {
          if (group.lost !== undefined) throw group.lost;
          this.db.exec('COMMIT');
        } catch (error) {
          try {
            if (group.lost === undefined && this.db.inTransaction) this.db.exec('ROLLBACK');
          } catch {
            // The COMMIT's error is the one its callers hear; the connection rolls back when it closes.
          }
          fail(sqliteError(error));
          release();
          return;
        }
        if (!this.#flush) {
          for (const hook of group.hooks) queueMicrotask(hook);
          commit();
          release();
          return;
        }
        // In the log, not yet on the disk: the next group fills while the flush runs, and this one is answered after it.
        this.#written++;
        release();
        this.#durable().then(() => {
          for (const hook of group.hooks) queueMicrotask(hook);
          commit();
        }, fail);
      });
    });
    return group;
  }

  /** Waits for the open group, if any, to commit or fail (closing the database must not roll it back). */
  async settled(): Promise<void> {
    await this.#turn;
    await this.#group?.committed.catch(() => undefined);
    await this.#durable().catch(() => undefined);
  }

  async #savepoint<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    const name = `sp${++this.#depth}`;
    const hooks = this.#group?.hooks;
    const hooksBefore = hooks?.length ?? 0;
    this.db.exec(`SAVEPOINT ${name}`);
    try {
      const result = await work(this);
      this.db.exec(`RELEASE ${name}`);
      return result;
    } catch (error) {
      if (this.db.inTransaction) {
        this.db.exec(`ROLLBACK TO ${name}`);
        this.db.exec(`RELEASE ${name}`);
      }
      if (hooks) hooks.length = hooksBefore;
      throw sqliteError(error);
    }
  }
}
