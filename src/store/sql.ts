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
import type { Database as SqliteDatabase, Statement } from 'better-sqlite3';

export type Dialect = 'sqlite' | 'postgres';
/**
 * A statement's parameter. Lists are for PostgreSQL's `= ANY($1)` (a batch
 * of keys: batched-read.ts) and are refused by SQLite, which has no arrays.
 */
export type Param = string | number | bigint | boolean | null | Buffer | readonly string[] | readonly number[];

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

export { StoreUnavailableError, UniqueViolation, type UnavailableReason } from './errors.js';
import { UniqueViolation } from './errors.js';

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
 */
export class SqliteSql implements Sql {
  readonly dialect = 'sqlite' as const;
  readonly #statements = new Map<string, Statement>();
  readonly #inside = new AsyncLocalStorage<number>();
  #turn: Promise<void> = Promise.resolve();
  #open = 0;
  #depth = 0;
  /** Transactions (not savepoints) begun and not yet ended: open, or waiting for their turn. */
  #pending = 0;
  #hooks: (() => void)[] = [];

  constructor(readonly db: SqliteDatabase) {}

  #statement(text: string): Statement {
    let statement = this.#statements.get(text);
    if (!statement) {
      statement = this.db.prepare(text);
      this.#statements.set(text, statement);
    }
    return statement;
  }

  /** Whether the caller must wait: a transaction is open and the caller is not part of it. */
  #blocked(): boolean {
    return this.#open !== 0 && this.#inside.getStore() !== this.#open;
  }

  #sync<T>(run: () => T): Promise<T> {
    if (this.#blocked()) return this.#turn.then(() => this.#sync(run));
    try {
      return Promise.resolve(run());
    } catch (error) {
      return Promise.reject(sqliteError(error));
    }
  }

  all<T>(text: string, params?: readonly Param[]): Promise<T[]> {
    return this.#sync(() => {
      const statement = this.#statement(text);
      const bound = sqliteParams(params);
      return (bound ? statement.all(bound) : statement.all()) as T[];
    });
  }

  one<T>(text: string, params?: readonly Param[]): Promise<T | undefined> {
    return this.#sync(() => {
      const statement = this.#statement(text);
      const bound = sqliteParams(params);
      return (bound ? statement.get(bound) : statement.get()) as T | undefined;
    });
  }

  run(text: string, params?: readonly Param[]): Promise<number> {
    return this.#sync(() => {
      const statement = this.#statement(text);
      const bound = sqliteParams(params);
      return (bound ? statement.run(bound) : statement.run()).changes;
    });
  }

  /** Synchronous access for the few callers that need it (migrations, copy): the raw statement. */
  prepare(text: string): Statement {
    return this.#statement(text);
  }

  async exec(text: string): Promise<void> {
    await this.#sync(() => this.db.exec(text));
  }

  afterCommit(hook: () => void): void {
    if (this.#open !== 0 && this.#inside.getStore() === this.#open) this.#hooks.push(hook);
    else queueMicrotask(hook);
  }

  async transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    if (this.#open !== 0 && this.#inside.getStore() === this.#open) return this.#savepoint(work);
    let release!: () => void;
    const previous = this.#turn;
    this.#turn = new Promise<void>((resolve) => (release = resolve));
    this.#pending++;
    try {
      await previous;
      const id = ++this.#depth;
      this.#open = id;
      try {
        this.db.exec('BEGIN IMMEDIATE');
        try {
          const result = await this.#inside.run(id, () => work(this));
          this.db.exec('COMMIT');
          const hooks = this.#hooks;
          this.#hooks = [];
          for (const hook of hooks) queueMicrotask(hook);
          return result;
        } catch (error) {
          if (this.db.inTransaction) this.db.exec('ROLLBACK');
          this.#hooks = [];
          throw sqliteError(error);
        }
      } finally {
        this.#open = 0;
        release();
      }
    } finally {
      // No transaction left: stop paying for the storage (see the class comment); the next `run` enables it again.
      if (--this.#pending === 0) this.#inside.disable();
    }
  }

  async #savepoint<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    const name = `sp${++this.#depth}`;
    const hooksBefore = this.#hooks.length;
    this.db.exec(`SAVEPOINT ${name}`);
    try {
      const result = await work(this);
      this.db.exec(`RELEASE ${name}`);
      return result;
    } catch (error) {
      this.db.exec(`ROLLBACK TO ${name}`);
      this.db.exec(`RELEASE ${name}`);
      this.#hooks.length = hooksBefore;
      throw sqliteError(error);
    }
  }
}
