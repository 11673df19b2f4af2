/**
 * The database `serve` keeps its state in: SQLite in the data dir (the
 * embedded default), in memory, or a PostgreSQL shared by any number of
 * instances. `openStore` opens and migrates it and hands out the one query
 * interface (sql.ts) and the signals between instances (signals.ts).
 *
 * Domain module: nothing here prints or reads the environment.
 */
import { redactUrl as redactAnyUrl } from '../url-redaction.js';
import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { databasePath, openDatabase, openReader, schemaVersion, MIGRATIONS } from './database.js';
import { POSTGRES_MIGRATIONS } from './postgres-schema.js';
import { LocalSignals, type Signals } from './signals.js';
import { startWalCheckpointer } from './wal-checkpointer.js';
import { SqliteSql, walFlush, type Sql } from './sql.js';
import { storeErrorForCli } from './errors.js';

export type StoreLocation =
  | { kind: 'sqlite'; dataDir: string; readonly?: boolean | undefined }
  | { kind: 'memory' }
  | {
      kind: 'postgres';
      url: string;
      /** Connections of this instance's pool (default 10). */
      poolSize?: number | undefined;
      /** How long a connection attempt or a statement may take before the call fails (default 5 s). */
      timeoutMs?: number | undefined;
      /** Only read: the schema is left as it is (not migrated), for commands that look. */
      readonly?: boolean | undefined;
      /** pg_stat_activity's application_name for this store's connections (serve says its pool size there). */
      applicationName?: string | undefined;
      /** Told when the connection that carries signals between instances is lost and back (for the log). */
      onSignalsState?: ((state: 'lost' | 'back', detail: string) => void) | undefined;
    };

export interface Store {
  readonly kind: StoreLocation['kind'];
  readonly sql: Sql;
  readonly signals: Signals;
  /** Where the data is, for banners and logs: a file path, or the URL without its password. */
  readonly description: string;
  /** The data dir of a SQLite store (files live beside the database), else undefined. */
  readonly dataDir: string | undefined;
  /** Throws StoreUnavailableError when the database cannot answer now. */
  ready(): Promise<void>;
  /** Closes the store; connections still in use after `graceMs` (PostgreSQL, default 5 s) are destroyed. */
  close(graceMs?: number): Promise<void>;
}

export const DEFAULT_POOL_SIZE = 10;
const DEFAULT_DATABASE_TIMEOUT_MS = 5_000;
const MIGRATION_LOCK = 0x6d696e69; // "mini"
/** How long migrating may take, the wait for another instance's migration included. */
const MIGRATION_TIMEOUT_MS = 10 * 60 * 1000;

/** A postgres:// URL redacted (src/url-redaction.ts), for anything a person or a log may see. */
export function redactUrl(url: string): string {
  if (!URL.canParse(url)) return 'postgres://(unparsable URL)';
  return redactAnyUrl(url);
}

interface ParsedPostgresUrl {
  connection: string;
  ssl: false | { rejectUnauthorized: boolean; ca?: string; cert?: string; key?: string; checkServerIdentity?: () => undefined };
}

/**
 * The URL as libpq reads it: sslmode (disable, allow, prefer, require,
 * verify-ca, verify-full) with sslrootcert / sslcert / sslkey files, as
 * managed PostgreSQL services document them; the rest goes to node-postgres.
 */
export function parsePostgresUrl(text: string): ParsedPostgresUrl {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError('the database URL is not a URL; give postgres://USER:PASSWORD@HOST:PORT/DATABASE');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError(`the database URL must start with postgres:// or postgresql://; got ${url.protocol}//...`);
  }
  if (!url.hostname) throw new ConfigError(`the database URL names no host: ${redactUrl(text)}`);
  const mode = url.searchParams.get('sslmode') ?? 'prefer';
  const read = (param: string) => {
    const path = url.searchParams.get(param);
    if (!path) return undefined;
    try {
      return readFileSync(path, 'utf8');
    } catch (error) {
      throw new ConfigError(`${param} of the database URL: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
  };
  const files = { ca: read('sslrootcert'), cert: read('sslcert'), key: read('sslkey') };
  const present = Object.fromEntries(Object.entries(files).filter(([, value]) => value !== undefined)) as { ca?: string; cert?: string; key?: string };
  for (const param of ['sslmode', 'sslrootcert', 'sslcert', 'sslkey']) url.searchParams.delete(param);
  let ssl: ParsedPostgresUrl['ssl'];
  switch (mode) {
    case 'disable':
    case 'allow':
    case 'prefer':
      // node-postgres does not fall back from TLS to plain; "prefer" (libpq's default) connects as the server allows.
      ssl = false;
      break;
    case 'require':
      ssl = { rejectUnauthorized: false, ...present };
      break;
    case 'verify-ca':
      ssl = { rejectUnauthorized: true, checkServerIdentity: () => undefined, ...present };
      break;
    case 'verify-full':
      ssl = { rejectUnauthorized: true, ...present };
      break;
    default:
      throw new ConfigError(`sslmode=${mode} is not one of disable, allow, prefer, require, verify-ca, verify-full`);
  }
  return { connection: url.href, ssl };
}

export async function openStore(location: StoreLocation): Promise<Store> {
  if (location.kind !== 'postgres') {
    const readonly = location.kind === 'sqlite' && location.readonly === true;
    const db = openDatabase(location.kind === 'memory' ? 'memory' : { dataDir: location.dataDir }, { readonly });
    // A database in a file is flushed off the event loop (sql.ts); one in memory has nothing to flush. Only in WAL mode:
    // where SQLite could not switch to it (a file system without shared memory), there is no -wal file to flush, and
    // the connection keeps FULL.
    const wal = location.kind === 'sqlite' && !readonly && db.pragma('journal_mode', { simple: true }) === 'wal';
    const file = location.kind === 'sqlite' ? databasePath(location.dataDir) : undefined;
    const logFlush = wal ? walFlush(`${file}-wal`) : undefined;
    // Checkpoints run on a thread of their own, each shortly after the commits a flush made durable (wal-checkpointer.ts).
    const checkpointer = wal ? startWalCheckpointer(db, file!) : undefined;
    const flush =
      logFlush && checkpointer
        ? Object.assign(
            async () => {
              await logFlush();
              checkpointer.written();
            },
            { close: logFlush.close },
          )
        : undefined;
    // Reads from outside a transaction on a connection of their own (SqliteSql's "Reads on a connection of their own").
    const reader = wal ? openReader(file!) : undefined;
    const sql = new SqliteSql(db, { flush, reader });
    return {
      kind: location.kind,
      sql,
      signals: new LocalSignals(),
      description: location.kind === 'memory' ? 'in memory' : databasePath(location.dataDir),
      dataDir: location.kind === 'sqlite' ? location.dataDir : undefined,
      ready: async () => undefined,
      close: async () => {
        // A commit group still open would be rolled back by closing: let it commit first.
        await sql.settled();
        await checkpointer?.close();
        await flush?.close();
        reader?.close();
        db.close();
      },
    };
  }
  const [{ PostgresPool, PostgresSql }, { PostgresSignals }, { default: pg }] = await Promise.all([
    import('./postgres-sql.js'),
    import('./postgres-signals.js'),
    import('pg'),
  ]);
  const { connection, ssl } = parsePostgresUrl(location.url);
  const timeoutMs = location.timeoutMs ?? DEFAULT_DATABASE_TIMEOUT_MS;
  const max = location.poolSize ?? DEFAULT_POOL_SIZE;
  const applicationName = location.applicationName ?? 'miniapp';
  const pool = new PostgresPool({ connectionString: connection, ssl, max, timeoutMs, applicationName });
  const sql = new PostgresSql(pool);
  try {
    if (location.readonly) await sql.one('SELECT 1 AS ok');
    else await migratePostgres(sql);
  } catch (error) {
    await pool.end(0);
    const reported = storeErrorForCli(error, redactUrl(location.url));
    if (reported) throw reported;
    throw error;
  }
  const signals = new PostgresSignals(sql, {
    timeoutMs,
    newClient: () =>
      new pg.Client({
        connectionString: connection,
        ssl: ssl as import('pg').ClientConfig['ssl'],
        keepAlive: true,
        connectionTimeoutMillis: timeoutMs,
        application_name: `${applicationName} (signals)`,
      }),
    ...(location.onSignalsState ? { onState: location.onSignalsState } : {}),
  });
  return {
    kind: 'postgres',
    sql,
    signals,
    description: redactUrl(location.url),
    dataDir: undefined,
    ready: async () => {
      await sql.one('SELECT 1 AS ok');
    },
    close: async (graceMs = 5_000) => {
      await signals.close();
      await pool.end(graceMs);
    },
  };
}

export interface MigrationStatus {
  version: number;
  description: string;
  applied: boolean;
}

/**
 * Applies the migrations this version knows and the database lacks, in one
 * transaction under an advisory lock: instances that start together take
 * turns, and the second finds nothing left to do.
 */
async function migratePostgres(sql: Sql): Promise<number[]> {
  // Instances that start together wait here for the first to finish, and a migration of a large table takes what it
  // takes: neither is bounded by the time-out of a call (a connection that cannot be made still fails at once).
  return sql.transaction(
    async (tx) => {
      await tx.one('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)`);
      const applied = new Set((await tx.all<{ version: number }>('SELECT version FROM schema_migrations')).map((row) => Number(row.version)));
      const newest = Math.max(0, ...applied);
      const known = POSTGRES_MIGRATIONS.at(-1)?.version ?? 0;
      if (newest > known) {
        throw new ConfigError(`the database was migrated by a newer miniapp (schema ${newest}, this one knows ${known}); upgrade miniapp`);
      }
      const done: number[] = [];
      for (const migration of POSTGRES_MIGRATIONS) {
        if (applied.has(migration.version)) continue;
        await tx.exec(migration.sql);
        await tx.run('INSERT INTO schema_migrations (version, description, applied_at) VALUES ($1, $2, $3)', [
          migration.version,
          migration.description,
          new Date().toISOString(),
        ]);
        done.push(migration.version);
      }
      return done;
    },
    { timeoutMs: MIGRATION_TIMEOUT_MS, statementTimeoutMs: 0 },
  );
}

/** The application_name of a serve instance's connections: which instance, and how many connections its pool may open. */
export function serveApplicationName(instance: string, poolSize: number): string {
  return `miniapp serve id=${instance} pool=${poolSize}`;
}

const SERVE_APPLICATION = /^miniapp serve id=(\S+) pool=(\d+)/;

export interface ConnectionBudget {
  /** Connections the instances may have under the tightest limit that applies: the server's, the role's or the database's. */
  allowed: number;
  /** That limit, in words. */
  limit: string;
  /** serve instances on this database (their connections' application_name), this one included. */
  instances: number;
  /** What the instances may open at most: each pool, and one connection each for signals. */
  needed: number;
  /** Connections of other clients open now that count against that limit. */
  others: number;
  /** Set when `needed + others` exceeds `allowed`: what to tell the operator. */
  warning: string | undefined;
}

/**
 * Whether the pools of every serve instance on this database (this one
 * included), beside the other clients' connections open now, fit in what
 * PostgreSQL allows: the server's max_connections (less the reserved slots
 * unless the user is a superuser), the role's and the database's
 * CONNECTION LIMIT, each against the connections it counts. Each instance
 * says its pool size in its connections' application_name, and always holds
 * its signals connection open, so a running instance is seen even when its
 * pool is idle.
 */
export async function connectionBudget(sql: Sql, self: { instance: string; poolSize: number }): Promise<ConnectionBudget> {
  const settings = (await sql.one<{
    max_connections: number;
    reserved: number;
    superuser: boolean;
    role_limit: number;
    database_limit: number;
  }>(`SELECT current_setting('max_connections')::int AS max_connections,
            current_setting('superuser_reserved_connections')::int
              + COALESCE(NULLIF(current_setting('reserved_connections', true), ''), '0')::int AS reserved,
            r.rolsuper AS superuser, r.rolconnlimit AS role_limit, d.datconnlimit AS database_limit
       FROM pg_roles r, pg_database d WHERE r.rolname = current_user AND d.datname = current_database()`))!;
  const activity = await sql.all<{ application_name: string | null; same_role: boolean; same_database: boolean; n: number }>(
    `SELECT application_name, usename = current_user AS same_role, datname = current_database() AS same_database, count(*)::int AS n
       FROM pg_stat_activity WHERE backend_type = 'client backend' GROUP BY 1, 2, 3`,
  );
  const pools = new Map<string, number>([[self.instance, self.poolSize]]);
  const others = { server: 0, role: 0, database: 0 };
  for (const row of activity) {
    const match = row.same_database ? SERVE_APPLICATION.exec(row.application_name ?? '') : null;
    if (match) {
      pools.set(match[1]!, Number(match[2]));
      continue;
    }
    others.server += Number(row.n);
    if (row.same_role) others.role += Number(row.n);
    if (row.same_database) others.database += Number(row.n);
  }
  const needed = [...pools.values()].reduce((sum, pool) => sum + pool + 1, 0);
  const limits: { allowed: number; others: number; limit: string }[] = [
    settings.superuser
      ? { allowed: Number(settings.max_connections), others: others.server, limit: `max_connections ${settings.max_connections}` }
      : {
          allowed: Number(settings.max_connections) - Number(settings.reserved),
          others: others.server,
          limit: `max_connections ${settings.max_connections}, ${settings.reserved} reserved`,
        },
  ];
  if (Number(settings.role_limit) >= 0)
    limits.push({ allowed: Number(settings.role_limit), others: others.role, limit: `the role's CONNECTION LIMIT ${settings.role_limit}` });
  if (Number(settings.database_limit) >= 0)
    limits.push({ allowed: Number(settings.database_limit), others: others.database, limit: `the database's CONNECTION LIMIT ${settings.database_limit}` });
  // The limit that leaves the instances the least room.
  const tightest = limits.reduce((a, b) => (b.allowed - b.others < a.allowed - a.others ? b : a));
  let warning: string | undefined;
  if (needed + tightest.others > tightest.allowed) {
    const fit = Math.max(1, Math.floor((tightest.allowed - tightest.others) / pools.size) - 1);
    const many = pools.size > 1;
    warning =
      `PostgreSQL allows ${tightest.allowed} connections here (${tightest.limit}), but ${many ? `${pools.size} serve instances (this one included)` : 'this serve'} ` +
      `may open ${needed} (${many ? 'their pools' : 'its pool'} of ${[...pools.values()].join(', ')}, and one each for signals)` +
      `${tightest.others ? ` beside the ${tightest.others} other connections open now` : ''}: under load, calls will be refused with 503 / UNAVAILABLE. ` +
      `Lower --database-pool${fit < self.poolSize ? ` (to ${fit} or less on each instance)` : ''}, or raise the limit.`;
  }
  return { allowed: tightest.allowed, limit: tightest.limit, instances: pools.size, needed, others: tightest.others, warning };
}

/** Whether a PostgreSQL database has been migrated by miniapp at all (its table of migrations exists). */
export async function hasPostgresSchema(sql: Sql): Promise<boolean> {
  const row = await sql.one<{ found: string | null }>("SELECT to_regclass('schema_migrations')::text AS found");
  return Boolean(row?.found);
}

export async function migrationStatus(store: Store): Promise<MigrationStatus[]> {
  if (store.kind === 'postgres') {
    // A database nothing has migrated yet has no table of migrations: none is applied.
    if (!(await hasPostgresSchema(store.sql))) return POSTGRES_MIGRATIONS.map((m) => ({ version: m.version, description: m.description, applied: false }));
    const applied = new Set((await store.sql.all<{ version: number }>('SELECT version FROM schema_migrations')).map((row) => Number(row.version)));
    return POSTGRES_MIGRATIONS.map((m) => ({ version: m.version, description: m.description, applied: applied.has(m.version) }));
  }
  const current = schemaVersion((store.sql as SqliteSql).db);
  return MIGRATIONS.map((m) => ({ version: m.version, description: m.description, applied: m.version <= current }));
}
