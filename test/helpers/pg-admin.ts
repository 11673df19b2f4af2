/**
 * A superuser's (or any) connection for tests to look at and set up a
 * database directly, with the project's one PostgreSQL client (pg):
 * `` await admin`SELECT ... ${value}` `` (values become parameters) and
 * `admin.unsafe(text)`, each resolving with the rows. One connection, so
 * statements run in the order they are made.
 */
import pg from 'pg';

export interface AdminSql {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  <T = any>(strings: TemplateStringsArray, ...values: unknown[]): Promise<T[]>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
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
    unsafe<T>(strings.reduce((text, part, i) => `${text}$${i}${part}`), values);
  return Object.assign(tag, { unsafe, end: () => pool.end() }) as AdminSql;
}
