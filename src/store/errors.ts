/**
 * The store's errors, apart from the query layers so that anything may
 * recognise them cheaply (the CLI's error report is on the quick path), and
 * the one translation of a database that cannot answer into a CLI error
 * with the exit code of its cause.
 */
import { AuthError, ConfigError, UpstreamError, type MiniappError } from '../errors.js';

/** A unique index refused a row; `constraint` names the index (users_email, ...). */
export class UniqueViolation extends Error {
  constructor(
    readonly constraint: string,
    options?: { cause?: unknown },
  ) {
    super(`unique constraint ${constraint} violated`, options);
    this.name = 'UniqueViolation';
  }
}

/** The engine's code of a statement's error (PostgreSQL's SQLSTATE, SQLite's extended result code), if any. */
function codeOf(error: unknown): unknown {
  return typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
}

/** A CHECK, or a trigger standing for one, refused the statement: it was undone whole. */
export function isCheckViolation(error: unknown): boolean {
  const code = codeOf(error);
  return code === '23514' || code === 'SQLITE_CONSTRAINT_CHECK' || code === 'SQLITE_CONSTRAINT_TRIGGER';
}

/** PostgreSQL ended the statement in a deadlock with another transaction: it was undone whole, and may be tried again. */
export function isDeadlock(error: unknown): boolean {
  return codeOf(error) === '40P01';
}

/**
 * The database cannot answer now: it cannot be reached, did not answer
 * within the time-out, has no connection slot left, is starting or
 * stopping, or refuses this client's credentials. Servers answer it with
 * 503 / UNAVAILABLE; the CLI with the exit code of its `reason`. The
 * message says in words what happened and never holds a password.
 */
export class StoreUnavailableError extends Error {
  readonly reason: UnavailableReason;
  constructor(message: string, options?: { cause?: unknown; reason?: UnavailableReason }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
    this.reason = options?.reason ?? 'unreachable';
  }
}

export type UnavailableReason =
  | 'unreachable'
  | 'timeout'
  | 'lost'
  | 'too-many-connections'
  | 'starting'
  | 'shutting-down'
  | 'credentials'
  | 'no-database'
  | 'tls'
  | 'disk';

const HINTS: Record<UnavailableReason, string> = {
  unreachable: "check the host and port of the database URL (--database, MINIAPP_DATABASE_URL or the profile's database-url) and that PostgreSQL runs",
  timeout: 'the database or the network to it is slow or stalled; try again, or raise --database-timeout',
  lost: 'the connection to the database broke; try again',
  'too-many-connections': 'the server has no connection slot left: lower --database-pool on the instances, or raise max_connections',
  starting: 'the database is starting; try again in a moment',
  'shutting-down': 'the database is stopping or restarting; try again in a moment',
  credentials: 'check the user and password in the database URL',
  'no-database': 'create the database (createdb NAME) or fix its name in the URL',
  tls: 'check sslmode in the database URL: the server must offer TLS for require, verify-ca and verify-full (or use sslmode=disable)',
  disk: 'the disk of the data dir refused a write (full, or failing): fix it, then restart serve',
};

/**
 * A StoreUnavailableError as the CLI reports it: credentials rejected exit
 * 4, a database that does not exist exit 2 (configuration), anything
 * network-like (unreachable, time-out, TLS, no slot left, starting) exit 5.
 * `where` (a redacted URL) says which database. Anything else: undefined.
 */
export function storeErrorForCli(error: unknown, where?: string): MiniappError | undefined {
  if (!(error instanceof StoreUnavailableError)) return undefined;
  // Every message names "the database": it becomes "the database at URL" (the URL without its password).
  const message = !where
    ? error.message
    : error.message.includes('the database')
      ? error.message.replace('the database', `the database at ${where}`)
      : `${error.message} (the database at ${where})`;
  const options = { hint: HINTS[error.reason], cause: error };
  if (error.reason === 'credentials') return new AuthError(message, { ...options, code: 'DATABASE_AUTH' });
  if (error.reason === 'no-database') return new ConfigError(message, options);
  return new UpstreamError(message, { ...options, code: 'DATABASE_UNAVAILABLE' });
}
