/**
 * The PostgreSQL side of the store's query interface (sql.ts), on
 * node-postgres (`pg`) and its pool.
 *
 * One rule carries the design: a connection belongs to one call at a time,
 * runs one statement at a time, and is destroyed, never reused, as soon as
 * its protocol state is in doubt. In doubt means: a statement or a
 * transaction outlived its deadline (its answer may still be on the way),
 * the connection failed in any way other than an error answer from the
 * server, or a ROLLBACK did not go through. No cancel request is ever sent:
 * on a connection with several statements in flight a cancel can hit
 * another statement, and postgres.js (this store's earlier client), which
 * dropped a cancelled statement from its queue while the server still
 * answered it, handed every later statement the answer of the one before
 * (test/store/network-faults.test.ts).
 *
 * Deadlines: a call (a statement outside a transaction, or a whole
 * transaction) has `timeoutMs` from the moment it is made, the wait for a
 * pool slot and the connection's set-up included. Past it the call fails
 * with StoreUnavailableError and its connection is destroyed; a transaction
 * past its deadline never sends COMMIT. The server's own statement_timeout
 * and idle_in_transaction_session_timeout end what a vanished client left
 * running or holding locks.
 */
import pg from 'pg';
import type { Pool, PoolClient, QueryResult } from 'pg';
import { StoreUnavailableError, UniqueViolation, type Param, type Sql, type TransactionOptions } from './sql.js';

export interface PostgresPoolOptions {
  /** postgres://... without the sslmode parameters (parsePostgresUrl removes them). */
  connectionString: string;
  ssl: false | Record<string, unknown>;
  max: number;
  timeoutMs: number;
  /** Shown in pg_stat_activity; serve puts its pool size there (see connectionBudget in store.ts). */
  applicationName: string;
}

// ------------------------------------------------------------------ errors

/** Node's network error codes, in words. */
const NETWORK_WORDS: Record<string, string> = {
  ECONNREFUSED: 'the connection was refused (nothing listens there, or a firewall says no)',
  ECONNRESET: 'the connection was reset',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host cannot be reached',
  ENETUNREACH: 'the network cannot be reached',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name cannot be resolved now',
  EPIPE: 'the connection was closed while sending',
};

/**
 * Server errors that mean "not now" rather than "this statement is wrong",
 * with the words an operator needs (the server's own message follows them).
 */
const UNAVAILABLE_STATES: Record<string, [StoreUnavailableError['reason'], string]> = {
  '53300': ['too-many-connections', 'the database has no connection slot left'],
  '53400': ['too-many-connections', 'the database refused another connection (a connection limit was reached)'],
  '57P01': ['shutting-down', 'the database is shutting down'],
  '57P02': ['shutting-down', 'the database crashed and is restarting'],
  '57P03': ['starting', 'the database is starting up or not accepting connections yet'],
  '57014': ['timeout', 'the database cancelled the statement (statement_timeout)'],
  '25P03': ['timeout', 'the database ended a transaction left idle (idle_in_transaction_session_timeout)'],
  '28P01': ['credentials', 'the database refused the password'],
  '28000': ['credentials', 'the database refused the user (no pg_hba.conf entry, or no such role)'],
  '3D000': ['no-database', 'the database named in the URL does not exist'],
  '08000': ['lost', 'the connection to the database failed'],
  '08003': ['lost', 'the connection to the database does not exist'],
  '08006': ['lost', 'the connection to the database failed'],
  '08001': ['unreachable', 'the database cannot be reached'],
  '08004': ['unreachable', 'the database rejected the connection'],
};

function isServerError(error: unknown): error is pg.DatabaseError {
  return error instanceof pg.DatabaseError;
}

/**
 * What an error from pg means for the caller: a UniqueViolation, a
 * StoreUnavailableError that says in words what happened, or the error as
 * it is (a statement's own fault: a bug, which the caller reports as such).
 */
export function postgresError(error: unknown): unknown {
  if (error instanceof StoreUnavailableError || error instanceof UniqueViolation) return error;
  if (isServerError(error)) {
    if (error.code === '23505') return new UniqueViolation(error.constraint ?? 'unknown', { cause: error });
    const known = error.code ? UNAVAILABLE_STATES[error.code] : undefined;
    if (known) return new StoreUnavailableError(`${known[1]}: ${error.message}`, { cause: error, reason: known[0] });
    return error;
  }
  // Called only on what pg or the network threw (never on an error of the caller's own work), and still matched on
  // the exact words pg and Node's TLS use, not on any text that happens to contain "TLS" or "timeout".
  const { code, message } = error as { code?: string; message?: string };
  if (code && NETWORK_WORDS[code])
    return new StoreUnavailableError(`cannot reach the database: ${NETWORK_WORDS[code]} (${code})`, { cause: error, reason: 'unreachable' });
  const text = message ?? String(error);
  if (
    (code && /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|HOSTNAME_MISMATCH)/.test(code)) ||
    /^The server does not support SSL connections$|^Client network socket disconnected before secure TLS connection was established/.test(text)
  ) {
    return new StoreUnavailableError(`the TLS connection to the database failed: ${text}`, { cause: error, reason: 'tls' });
  }
  if (/^(timeout expired|timeout exceeded when trying to connect|Connection terminated due to connection timeout|Query read timeout)/.test(text)) {
    return new StoreUnavailableError(`the database did not answer in time: ${text}`, { cause: error, reason: 'timeout' });
  }
  if (
    /^(Connection terminated|Client has encountered a connection error and is not queryable|Client was closed and is not queryable|Cannot use a pool after calling end)/.test(
      text,
    )
  ) {
    return new StoreUnavailableError(`the connection to the database was lost: ${text}`, { cause: error, reason: 'lost' });
  }
  return error;
}

// ------------------------------------------------------------------ connections

/** Named (server-prepared) statements, one name per text; texts past the cap run unnamed. */
const statementNames = new Map<string, string>();
const MAX_NAMED_STATEMENTS = 2_000;

function statementName(text: string): string | undefined {
  let name = statementNames.get(text);
  if (name === undefined && statementNames.size < MAX_NAMED_STATEMENTS) {
    name = `miniapp_${statementNames.size + 1}`;
    statementNames.set(text, name);
  }
  return name;
}

const INT8 = 20;
/** BIGINT (ids, counts) as numbers, as SQLite gives them: every id and count here stays below 2^53. */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** A connection lent to one call, destroyed rather than returned when its state is in doubt. */
class Lease {
  #released = false;
  /** Why the connection cannot be trusted any more (undefined while it can). */
  doubt: string | undefined;
  /** Statements of this lease run one after the other (pg would queue them, with a deprecation warning). */
  #chain: Promise<unknown> | undefined;
  /** Statements sent or waiting their turn and not yet answered. */
  #pending = 0;

  constructor(
    readonly client: PoolClient,
    private readonly onRelease: () => void,
  ) {}

  get released(): boolean {
    return this.#released;
  }

  /** Returns the connection to the pool, or destroys it when it is in doubt or `broken` says so. */
  release(broken?: unknown): void {
    if (this.#released) return;
    this.#released = true;
    this.onRelease();
    if (this.doubt === undefined && !broken) {
      this.client.release();
      return;
    }
    this.client.release(broken instanceof Error ? broken : new Error(this.doubt ?? 'connection in doubt'));
    // pg ends a client with a statement in flight by destroying its socket, but an idle one politely, which a
    // stalled network never answers: destroy it here either way, so that its slot and socket are free now.
    this.client.connection?.stream?.destroy();
  }

  /** Marks the connection as in doubt and destroys it: whatever is in flight fails at once. */
  destroy(reason: string): void {
    this.doubt ??= reason;
    this.release(new Error(reason));
  }

  query(text: string, params: readonly Param[] | undefined, named: boolean): Promise<QueryResult> {
    const send = () => {
      if (this.doubt !== undefined) throw new StoreUnavailableError(this.doubt, { reason: 'timeout' });
      const name = named && params !== undefined ? statementName(text) : undefined;
      const config = name ? { name, text, values: params as unknown[] } : { text, values: params as unknown[] | undefined };
      // pg's callback, not its promise. Measured with --trace-gc under the uncached page's load: results handed over
      // through pg's promise were promoted out of V8's young generation with their rows (some 25 KB a page), and the
      // old generation, swept about every second, took serve's helper threads and the main thread's pauses; through
      // the callback they die young, as they do in pg-pool's own query().
      return new Promise<QueryResult>((resolve, reject) => {
        this.client.query(config, (error: Error | null, result: QueryResult) => (error ? reject(error) : resolve(result)));
      });
    };
    // Nothing in flight (a lease's usual case, one statement at a time): sent now, without a turn through the chain.
    let run: Promise<QueryResult>;
    if (this.#pending > 0) run = this.#chain!.then(send);
    else {
      try {
        run = send();
      } catch (error) {
        run = Promise.reject(error);
      }
    }
    this.#pending++;
    const settled = run.then(
      () => void this.#pending--,
      () => void this.#pending--,
    );
    this.#chain = settled;
    return run;
  }
}

/** Whether a failed statement leaves its connection fit for the next one: only an error answer from the server does. */
function connectionSurvives(error: unknown): boolean {
  if (!isServerError(error)) return false;
  const code = error.code ?? '';
  return !code.startsWith('08') && !code.startsWith('57P') && code !== '25P03' && !staleStatement(error);
}

/**
 * A statement this connection prepared that the server can no longer run as
 * prepared: the schema changed under it (a migration by another instance
 * during a rolling upgrade), or it is gone (a pooler's DISCARD). The
 * connection's prepared statements are dropped with it, and a statement
 * outside a transaction is tried once more on another connection.
 */
function staleStatement(error: unknown): boolean {
  return isServerError(error) && (error.code === '26000' || (error.code === '0A000' && /cached plan/.test(error.message)));
}

export class PostgresPool {
  readonly pool: Pool;
  /** Every client the pool has made and not yet seen end, connecting ones included. */
  readonly #clients = new Set<pg.Client>();
  /** Connections lent out now, and whoever waits for that to reach 0 (a shutdown). */
  #leased = 0;
  #idle: (() => void) | undefined;
  readonly timeoutMs: number;
  readonly max: number;

  constructor(options: PostgresPoolOptions) {
    this.timeoutMs = options.timeoutMs;
    this.max = options.max;
    const clients = this.#clients;
    /** The pool's client, known from the moment it is made: a shutdown must be able to cut one still connecting. */
    class TrackedClient extends pg.Client {
      constructor(config?: pg.ClientConfig) {
        super(config);
        clients.add(this);
        this.once('end', () => clients.delete(this));
      }
    }
    this.pool = new pg.Pool({
      Client: TrackedClient,
      connectionString: options.connectionString,
      ssl: options.ssl as pg.PoolConfig['ssl'],
      max: options.max,
      // The deadline of each call (acquire) is what fails a wait; the pool's own bound only keeps its queue finite.
      connectionTimeoutMillis: options.timeoutMs + 1_000,
      idleTimeoutMillis: 60_000,
      keepAlive: true,
      application_name: options.applicationName,
      // A statement that runs longer than a call may take is cancelled by the server itself, and a transaction a
      // vanished client left open ends soon after: its locks never outlive the call that took them by much.
      statement_timeout: options.timeoutMs,
      idle_in_transaction_session_timeout: options.timeoutMs + 1_000,
      types: TYPES,
    });
    // An idle connection that fails is dropped by the pool, which tells us here; a lent one tells its call.
    this.pool.on('error', () => undefined);
    this.pool.on('connect', (client) => {
      client.on('error', () => undefined);
      // Notices (e.g. "relation already exists, skipping") are not for anyone's terminal.
      client.on('notice', () => undefined);
    });
  }

  timeoutError(budgetMs: number, what: string): StoreUnavailableError {
    return new StoreUnavailableError(`the database did not answer within ${budgetMs} ms (${what})`, { reason: 'timeout' });
  }

  /** A connection, within `deadline` (the wait for a free slot and the connection's set-up included). */
  acquire(deadline: number, budgetMs: number): Promise<Lease> {
    const remaining = deadline - Date.now();
    if (remaining <= 0) return Promise.reject(this.timeoutError(budgetMs, 'waiting for a connection'));
    // One promise settled by whichever comes first, the connection or the deadline (no race of two).
    return new Promise<Lease>((resolve, reject) => {
      let late = false;
      const timer = setTimeout(() => {
        late = true;
        reject(this.timeoutError(budgetMs, this.pool.totalCount >= this.max ? `all ${this.max} connections of the pool were busy` : 'connecting'));
      }, remaining);
      this.pool.connect().then(
        (client) => {
          // The slot came after the deadline: handed straight back.
          if (late) return client.release();
          clearTimeout(timer);
          this.#leased++;
          resolve(
            new Lease(client, () => {
              if (--this.#leased === 0) this.#idle?.();
            }),
          );
        },
        (error: unknown) => {
          if (late) return;
          clearTimeout(timer);
          reject(postgresError(error));
        },
      );
    });
  }

  /** Runs one statement on `lease` within `deadline`; past it the connection is destroyed. */
  async run(
    lease: Lease,
    text: string,
    params: readonly Param[] | undefined,
    deadline: number | undefined,
    budgetMs: number,
    named = true,
  ): Promise<QueryResult> {
    let timer: NodeJS.Timeout | undefined;
    if (deadline !== undefined) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw this.timeoutError(budgetMs, 'before the statement was sent');
      timer = setTimeout(() => lease.destroy(`the database did not answer within ${budgetMs} ms`), remaining);
    }
    try {
      return await lease.query(text, params, named);
    } catch (error) {
      if (lease.doubt !== undefined) throw new StoreUnavailableError(lease.doubt, { cause: error, reason: 'timeout' });
      if (!connectionSurvives(error)) lease.destroy(`the connection failed: ${(error as Error).message}`);
      throw postgresError(error);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Destroys every connection now, connecting ones included. */
  destroyAll(): void {
    for (const client of this.#clients) client.connection?.stream?.destroy();
  }

  /**
   * Closes the pool: connections lent out get until `graceMs` to come back
   * (their calls have deadlines of their own), then every connection is
   * destroyed. Idle ones are not ended politely: on a stalled network the
   * server never answers the goodbye, and the open socket would keep the
   * process alive until TCP gives up, minutes later.
   */
  async end(graceMs: number): Promise<void> {
    if (this.#leased > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([new Promise<void>((resolve) => (this.#idle = resolve)), new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
      clearTimeout(timer);
    }
    this.destroyAll();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.pool.end().catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, 1_000)))]);
    clearTimeout(timer);
  }
}

// ------------------------------------------------------------------ the query interface

/** The open transaction a PostgresSql runs in: its connection, deadline and after-commit hooks. */
interface OpenTransaction {
  lease: Lease;
  deadline: number;
  budgetMs: number;
  hooks: (() => void)[];
  savepoints: number;
}

export class PostgresSql implements Sql {
  readonly dialect = 'postgres' as const;

  constructor(
    readonly pool: PostgresPool,
    private readonly open?: OpenTransaction,
  ) {}

  get timeoutMs(): number {
    return this.pool.timeoutMs;
  }

  afterCommit(hook: () => void): void {
    if (this.open) this.open.hooks.push(hook);
    else queueMicrotask(hook);
  }

  async #query(text: string, params: readonly Param[] | undefined, named = true): Promise<QueryResult> {
    const open = this.open;
    if (open) {
      if (open.lease.released) throw new StoreUnavailableError(open.lease.doubt ?? 'the transaction has ended', { reason: 'timeout' });
      // The transaction's deadline bounds it as a whole (its own timer destroys the connection).
      return this.pool.run(open.lease, text, params, undefined, open.budgetMs, named);
    }
    const budgetMs = this.pool.timeoutMs;
    const deadline = Date.now() + budgetMs;
    for (let attempt = 1; ; attempt++) {
      const lease = await this.pool.acquire(deadline, budgetMs);
      try {
        return await this.pool.run(lease, text, params, deadline, budgetMs, named);
      } catch (error) {
        if (attempt === 1 && staleStatement((error as Error).cause ?? error)) continue;
        throw error;
      } finally {
        lease.release();
      }
    }
  }

  async all<T>(text: string, params?: readonly Param[]): Promise<T[]> {
    return (await this.#query(text, params ?? [])).rows as T[];
  }

  async one<T>(text: string, params?: readonly Param[]): Promise<T | undefined> {
    return (await this.#query(text, params ?? [])).rows[0] as T | undefined;
  }

  async run(text: string, params?: readonly Param[]): Promise<number> {
    return (await this.#query(text, params ?? [])).rowCount ?? 0;
  }

  /** Several statements of DDL (migrations): the simple protocol, unnamed. */
  async exec(text: string): Promise<void> {
    await this.#query(text, undefined, false);
  }

  async transaction<T>(work: (tx: Sql) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    if (this.open) return this.#savepoint(this.open, work);
    const budgetMs = options.timeoutMs ?? this.pool.timeoutMs;
    const deadline = Date.now() + budgetMs;
    const lease = await this.pool.acquire(deadline, budgetMs);
    const open: OpenTransaction = { lease, deadline, budgetMs, hooks: [], savepoints: 0 };
    const timer = setTimeout(() => lease.destroy(`the database did not answer within ${budgetMs} ms (the transaction was rolled back)`), deadline - Date.now());
    const tx = new PostgresSql(this.pool, open);
    let committing = false;
    try {
      await this.pool.run(lease, 'BEGIN', undefined, undefined, budgetMs, false);
      if (options.statementTimeoutMs !== undefined) await tx.exec(`SET LOCAL statement_timeout = ${Math.max(0, Math.floor(options.statementTimeoutMs))}`);
      const result = await work(tx);
      // Past the deadline nothing is committed, even if the work swallowed the failure of its statements.
      if (lease.doubt !== undefined || lease.released)
        throw new StoreUnavailableError(lease.doubt ?? 'the transaction lost its connection', { reason: 'timeout' });
      committing = true;
      await this.pool.run(lease, 'COMMIT', undefined, undefined, budgetMs, false);
      clearTimeout(timer);
      lease.release();
      for (const hook of open.hooks) queueMicrotask(hook);
      return result;
    } catch (error) {
      clearTimeout(timer);
      if (!lease.released && lease.doubt === undefined && !committing) {
        try {
          await this.pool.run(lease, 'ROLLBACK', undefined, Date.now() + Math.max(1, deadline - Date.now()), budgetMs, false);
        } catch {
          lease.destroy('ROLLBACK failed');
        }
      }
      lease.release(committing ? error : undefined);
      if (committing && !connectionSurvives(error)) {
        throw new StoreUnavailableError('the connection to the database failed while committing; the change may or may not have been saved', {
          cause: error,
          reason: 'lost',
        });
      }
      // The store's own failures were put into words where they happened (run, acquire); anything else is the
      // work's own error, passed on as it is.
      throw error;
    }
  }

  async #savepoint<T>(open: OpenTransaction, work: (tx: Sql) => Promise<T>): Promise<T> {
    const name = `sp${++open.savepoints}`;
    const outer = open.hooks;
    const inner: OpenTransaction = { ...open, hooks: [] };
    const tx = new PostgresSql(this.pool, inner);
    await this.exec(`SAVEPOINT ${name}`);
    try {
      const result = await work(tx);
      await this.exec(`RELEASE SAVEPOINT ${name}`);
      outer.push(...inner.hooks);
      open.savepoints = inner.savepoints;
      return result;
    } catch (error) {
      open.savepoints = inner.savepoints;
      if (!open.lease.released) {
        try {
          await this.exec(`ROLLBACK TO SAVEPOINT ${name}`);
          await this.exec(`RELEASE SAVEPOINT ${name}`);
        } catch {
          // The transaction is lost with its connection; the work's own error says more.
        }
      }
      throw error;
    }
  }
}
