/**
 * A superuser's (or any) connection for tests to look at and set up a
 * database directly, with the project's one PostgreSQL client (pg):
 * `` await admin`SELECT ... ${value}` `` (values become parameters) and
 * `admin.unsafe(text)`, each resolving with the rows. One connection, so
 * statements run in the order they are made.
 */
import pg from 'pg';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres-schema.js';

export interface AdminSql {
  <T = any>(strings: TemplateStringsArray, ...values: unknown[]): Promise<T[]>;
  unsafe<T = any>(text: string, values?: unknown[]): Promise<T[]>;
  end(): Promise<void>;
}

export function adminSql(url: string): AdminSql {
  // allowExitOnIdle: an idle connection does not keep the process alive.
  const pool = new pg.Pool({ connectionString: url, max: 1, allowExitOnIdle: true });
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('notice', () => undefined));
  const unsafe = async <T>(text: string, values?: unknown[]): Promise<T[]> => (await pool.query(text, values)).rows as T[];
  const tag = <T>(strings: TemplateStringsArray, ...values: unknown[]): Promise<T[]> =>
    unsafe<T>(
      strings.reduce((text, part, i) => `${text}$${i}${part}`),
      values,
    );
  return Object.assign(tag, { unsafe, end: () => pool.end() }) as AdminSql;
}

/** Gives an empty database serve's schema as it stood at migration `version`, recorded as serve records it: a database an older serve made. */
export async function migrateUpTo(admin: AdminSql, version: number): Promise<void> {
  await admin.unsafe('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)');
  for (const migration of POSTGRES_MIGRATIONS.filter((m) => m.version <= version)) {
    await admin.unsafe(migration.sql);
    await admin.unsafe('INSERT INTO schema_migrations (version, description, applied_at) VALUES ($1, $2, $3)', [
      migration.version,
      migration.description,
      new Date().toISOString(),
    ]);
  }
}
