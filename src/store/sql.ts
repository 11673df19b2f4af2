/**
 * The one query interface of the store layer, over SQLite (better-sqlite3,
 * the embedded default) and PostgreSQL (postgres.js). Every repository is
 * written once against it, with `$1, $2, ...` placeholders, which both
 * engines read (better-sqlite3 takes them as named parameters "1", "2").
 * Where the dialects differ, the repository asks `sql.dialect` or uses the
 * helpers below; the rules of the domain stay in the services.
 *
 * SQLite statements are prepared once per text and run synchronously, so the
 * embedded path costs what it cost before the seam; its transactions are
 * serialised, and a statement of another task waits while one is open.
 * PostgreSQL statements are prepared by the server (postgres.js caches them),
 * and a failure to reach the server is a StoreUnavailableError, which the
 * HTTP and gRPC layers answer with 503 / UNAVAILABLE.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Database as SqliteDatabase, Statement } from 'better-sqlite3';
import type { Sql as PostgresClient, TransactionSql } from 'postgres';

export type Dialect = 'sqlite' | 'postgres';
export type Param = string | number | bigint | boolean | null | Buffer;

export interface Sql {
  readonly dialect: Dialect;
  /** Every row. */
  all<T>(text: string, params?: readonly Param[]): Promise<T[]>;
  /** The first row, or undefined. */
  one<T>(text: string, params?: readonly Param[]): Promise<T | undefined>;
  /** Runs a statement; resolves with the number of rows it changed. */
  run(text: string, params?: readonly Param[]): Promise<number>;
  /** Runs `work` in one transaction (a savepoint when already in one): all of it or none. */
  transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T>;
  /** Runs several statements of DDL (migrations). */
  exec(text: string): Promise<void>;
  /** Calls `hook` once the transaction this Sql belongs to commits (never if it rolls back); at once outside one. */
  afterCommit(hook: () => void): void;
}

/** A unique index refused a row; `constraint` names the index (users_email, ...). */
export class UniqueViolation extends Error {
  constructor(
    readonly constraint: string,
    options?: { cause?: unknown },
  ) {
    super(`unique constraint ${constraint} violated`, options);
  }
}

/** The database cannot be reached (PostgreSQL down, the connection refused or timed out). */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

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

// ------------------------------------------------------------------ PostgreSQL

/** Error codes of a server or connection that is not there (not a query's own fault). */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EPIPE',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);

export function postgresError(error: unknown): unknown {
  const { code, constraint_name: constraint } = error as { code?: string; constraint_name?: string };
  if (code === '23505') return new UniqueViolation(constraint ?? 'unknown', { cause: error });
  if (code && UNAVAILABLE_CODES.has(code)) {
    return new StoreUnavailableError(`the database cannot be reached (${code})`, { cause: error });
  }
  if (code === '57014') return new StoreUnavailableError('the database did not answer in time (statement timeout)', { cause: error });
  return error;
}

function pgParams(params: readonly Param[] | undefined): never[] {
  return (params ?? []) as never[];
}

export class PostgresSql implements Sql {
  readonly dialect = 'postgres' as const;

  /**
   * `timeoutMs`: how long a statement may take, client side, before the call
   * fails (the server's statement_timeout covers a slow query; this covers a
   * connection that went silent).
   */
  /** Hooks of the transaction this Sql runs in (undefined outside one). */
  readonly #hooks: (() => void)[] | undefined;

  constructor(
    readonly sql: PostgresClient | TransactionSql,
    private readonly timeoutMs = 5_000,
    hooks?: (() => void)[],
  ) {
    this.#hooks = hooks;
  }

  afterCommit(hook: () => void): void {
    if (this.#hooks) this.#hooks.push(hook);
    else queueMicrotask(hook);
  }

  async #query(text: string, params: readonly Param[] | undefined): Promise<{ rows: unknown[]; count: number }> {
    const query = this.sql.unsafe(text, pgParams(params), { prepare: true });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        query.cancel();
        reject(new StoreUnavailableError(`the database did not answer within ${this.timeoutMs} ms`));
      }, this.timeoutMs + 1_000);
      timer.unref();
    });
    try {
      const result = await Promise.race([query, late]);
      return { rows: [...result], count: result.count };
    } catch (error) {
      throw postgresError(error);
    } finally {
      clearTimeout(timer);
    }
  }

  async all<T>(text: string, params?: readonly Param[]): Promise<T[]> {
    return (await this.#query(text, params)).rows as T[];
  }

  async one<T>(text: string, params?: readonly Param[]): Promise<T | undefined> {
    return (await this.#query(text, params)).rows[0] as T | undefined;
  }

  async run(text: string, params?: readonly Param[]): Promise<number> {
    return (await this.#query(text, params)).count;
  }

  async exec(text: string): Promise<void> {
    try {
      await this.sql.unsafe(text);
    } catch (error) {
      throw postgresError(error);
    }
  }

  async transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    try {
      if ('savepoint' in this.sql && this.#hooks) {
        const outer = this.#hooks;
        const inner: (() => void)[] = [];
        const result = await withoutRollbackOnLostConnection<T>((body) =>
          (this.sql as TransactionSql).savepoint((tx) => body(() => work(new PostgresSql(tx, this.timeoutMs, inner)))) as Promise<T>,
        );
        outer.push(...inner);
        return result;
      }
      const hooks: (() => void)[] = [];
      const result = await withoutRollbackOnLostConnection<T>((body) =>
        (this.sql as PostgresClient).begin((tx) => body(() => work(new PostgresSql(tx, this.timeoutMs, hooks)))) as Promise<T>,
      );
      for (const hook of hooks) queueMicrotask(hook);
      return result;
    } catch (error) {
      throw postgresError(error);
    }
  }
}

/** Codes of a connection that is gone: the server has rolled back whatever transaction it held. */
const CONNECTION_GONE = new Set(['ECONNRESET', 'EPIPE', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', '57P01', '57P02', '08000', '08003', '08006']);

function connectionGone(error: unknown): boolean {
  const cause = error instanceof StoreUnavailableError ? error.cause : error;
  return CONNECTION_GONE.has((cause as { code?: string } | undefined)?.code ?? '');
}

/**
 * Runs a postgres.js transaction (or savepoint) whose body fails with its
 * connection gone without letting postgres.js send its ROLLBACK: postgres.js
 * 3.4.9 writes it to the closed connection from a timer, where the TypeError
 * ("reading 'write'" of null, postgres.js issues #1154, #1208) cannot be
 * caught and ends the process. The server has rolled the transaction back
 * already. The body's promise is then left unsettled, so postgres.js never
 * gets to the ROLLBACK; the caller gets the error at once.
 */
function withoutRollbackOnLostConnection<T>(run: (body: (work: () => Promise<T>) => Promise<T>) => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const body = (work: () => Promise<T>): Promise<T> =>
      work().catch((error: unknown) => {
        if (!connectionGone(error)) throw error;
        reject(error);
        return new Promise<T>(() => undefined);
      });
    run(body).then(resolve, reject);
  });
}
