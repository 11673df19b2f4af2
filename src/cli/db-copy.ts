/**
 * `miniapp db copy`: everything `serve` kept in its embedded SQLite (and
 * beside it in the data dir: uploaded images, the admin token) into a
 * PostgreSQL, for users who outgrow one machine.
 *
 * Rows keep their ids (so tokens, posts and deliveries still point at the
 * right users), password hashes are copied as they are (old passwords keep
 * working), and an insert that finds its row already there does nothing: a
 * second copy changes nothing. The counts of each table are checked at the
 * end: every row of the source must be in the target.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { CommandContext } from './context.js';
import { ConfigError, MiniappError } from '../errors.js';
import type { Param, Sql } from '../store/sql.js';

/** A table to copy, in an order that satisfies the foreign keys. */
interface TableCopy {
  table: string;
  columns: readonly string[];
  key: readonly string[];
  /** Columns SQLite keeps as 0/1 and PostgreSQL as booleans. */
  booleans?: readonly string[];
  /** How a source row is written (post_tags are compared lowercased). */
  transform?: (row: Record<string, unknown>) => Record<string, unknown>;
  /** The id sequence to move past the copied ids. */
  serial?: string;
}

export const COPIED_TABLES: readonly TableCopy[] = [
  {
    table: 'users',
    columns: ['id', 'username', 'email', 'full_name', 'is_active', 'roles', 'password_hash', 'created_at', 'updated_at', 'bio', 'avatar_url'],
    key: ['id'],
    booleans: ['is_active'],
    serial: 'id',
  },
  { table: 'api_tokens', columns: ['token_hash', 'kind', 'user_id', 'created_at', 'expires_at'], key: ['token_hash'] },
  {
    table: 'posts',
    columns: ['id', 'title', 'content', 'author_id', 'author', 'tags', 'is_published', 'created_at', 'updated_at', 'published_at'],
    key: ['id'],
    booleans: ['is_published'],
    serial: 'id',
  },
  {
    table: 'post_tags',
    columns: ['post_id', 'tag'],
    key: ['post_id', 'tag'],
    transform: (row) => ({ ...row, tag: String(row.tag).toLowerCase() }),
  },
  { table: 'unlink_events', columns: ['id', 'received_at', 'user_key', 'referrer', 'method', 'source'], key: ['id'], serial: 'id' },
  {
    table: 'webhook_deliveries',
    columns: ['id', 'event', 'url', 'body', 'state', 'attempts', 'next_attempt_at', 'created_at', 'updated_at', 'original_id'],
    key: ['id'],
    serial: 'id',
  },
  { table: 'webhook_attempts', columns: ['id', 'delivery_id', 'attempted_at', 'status_code', 'error'], key: ['id'], serial: 'id' },  // The commerce services (migration 8 / 4), parents before children.
  { table: 'products', columns: ['sku', 'name', 'price', 'currency', 'on_hand', 'reserved', 'created_at', 'updated_at'], key: ['sku'] },
  { table: 'stock_movements', columns: ['id', 'sku', 'delta', 'on_hand', 'reason', 'actor', 'at'], key: ['id'], serial: 'id' },
  { table: 'reservations', columns: ['id', 'order_id', 'state', 'expires_at', 'created_at', 'updated_at'], key: ['id'] },
  { table: 'reservation_items', columns: ['reservation_id', 'sku', 'quantity'], key: ['reservation_id', 'sku'] },
  {
    table: 'orders',
    columns: ['id', 'user_id', 'state', 'currency', 'total_amount', 'reservation_id', 'payment_id', 'created_at', 'updated_at', 'paid_at', 'cancelled_at', 'cancel_reason'],
    key: ['id'],
  },
  { table: 'order_items', columns: ['order_id', 'position', 'sku', 'name', 'quantity', 'unit_price', 'amount'], key: ['order_id', 'position'] },
  {
    table: 'payments',
    columns: ['id', 'order_id', 'user_id', 'status', 'amount', 'balance', 'currency', 'method', 'provider', 'provider_reference', 'failure_code', 'failure_message', 'created_at', 'updated_at', 'approved_at'],
    key: ['id'],
  },
  { table: 'refunds', columns: ['id', 'payment_id', 'position', 'amount', 'reason', 'status', 'created_at', 'updated_at'], key: ['id'] },
  { table: 'idempotency_keys', columns: ['scope', 'owner', 'key', 'request_hash', 'resource_id', 'response', 'created_at', 'expires_at'], key: ['scope', 'owner', 'key'] },
  { table: 'sandbox_charges', columns: ['key', 'amount', 'currency', 'method', 'outcome', 'failure_code', 'reference', 'answered', 'created_at'], key: ['key'] },
  { table: 'sandbox_refunds', columns: ['key', 'charge_reference', 'amount', 'created_at'], key: ['key'] },
];

/** Rows per INSERT: well under PostgreSQL's 65,535 parameters for the widest table. */
const BATCH = 500;

export interface TableReport {
  table: string;
  source: number;
  copied: number;
  alreadyThere: number;
  verified: boolean;
}

function sourceOf(from: string): { file: string; dataDir: string } {
  if (from.startsWith('sqlite:')) {
    const file = from.slice('sqlite:'.length);
    return { file, dataDir: dirname(file) };
  }
  return { file: join(from, 'miniapp.db'), dataDir: from };
}

export async function copyToPostgres(cc: CommandContext, flags: { from: string; to: string }): Promise<void> {
  const [{ openStore }, { settingSpec }] = await Promise.all([import('../store/store.js'), import('../config/keys.js')]);
  const url = settingSpec('database-url').validate(flags.to);
  const { file, dataDir } = sourceOf(flags.from);
  if (!existsSync(file) || !statSync(file).isFile()) {
    throw new ConfigError(`no SQLite database at ${file}`, { hint: '--from takes the data dir of `miniapp serve` (holding miniapp.db) or sqlite:FILE' });
  }
  const source = await openStore({ kind: 'sqlite', dataDir: dirname(file), readonly: true });
  if (basename(file) !== 'miniapp.db') {
    await source.close();
    throw new ConfigError(`--from sqlite:FILE must name a miniapp.db written by \`miniapp serve\`; got ${file}`);
  }
  const target = await openStore({ kind: 'postgres', url, poolSize: 2 });
  try {
    const counts = await Promise.all(COPIED_TABLES.map(async (t) => Number((await source.sql.one<{ n: number }>(`SELECT count(*) AS n FROM ${t.table}`))!.n)));
    const images = imageFiles(dataDir);
    const total = counts.reduce((sum, n) => sum + n, 0) + images.length;
    const progress = cc.out.progress({ unit: 'rows', total, label: `copying to ${target.description}` });
    let done = 0;
    const reports: TableReport[] = [];
    for (const [index, table] of COPIED_TABLES.entries()) {
      const report = await copyTable(source.sql, target.sql, table, counts[index]!, (n) => {
        done += n;
        progress.update({ done, counts: { tables: reports.length } });
      });
      reports.push(report);
    }
    reports.push(await copyImages(target.sql, dataDir, images, cc.now(), (n) => {
      done += n;
      progress.update({ done, counts: { tables: reports.length } });
    }));
    const adminToken = await copyAdminToken(target.sql, dataDir, cc.now());
    progress.finish();
    cc.out.table(
      reports,
      [
        { header: 'table', value: (r) => r.table },
        { header: 'in SQLite', value: (r) => r.source },
        { header: 'copied', value: (r) => r.copied },
        { header: 'already there', value: (r) => r.alreadyThere },
        { header: 'verified', value: (r) => (r.verified ? 'yes' : 'NO') },
      ],
      { from: file, to: target.description, tables: reports, adminToken },
    );
    const failed = reports.filter((r) => !r.verified);
    if (failed.length > 0) {
      throw new MiniappError(`the copy is incomplete: ${failed.map((r) => r.table).join(', ')} lack rows of the SQLite database`, {
        hint: 'rows with the same username or e-mail as another row already in PostgreSQL are not copied; copy into an empty database',
      });
    }
    if (!cc.out.json) {
      const copied = reports.reduce((sum, r) => sum + r.copied, 0);
      cc.out.success(`${copied === 0 ? 'nothing new to copy' : `copied ${copied} rows`}; every row of ${file} is in ${target.description}${adminToken === 'copied' ? ', with the admin token' : ''}`);
    }
  } finally {
    await source.close();
    await target.close();
  }
}

async function copyTable(source: Sql, target: Sql, spec: TableCopy, count: number, onRows: (n: number) => void): Promise<TableReport> {
  const order = spec.key.join(', ');
  let copied = 0;
  for (let offset = 0; offset < count; offset += BATCH) {
    const rows = await source.all<Record<string, unknown>>(`SELECT ${spec.columns.join(', ')} FROM ${spec.table} ORDER BY ${order} LIMIT $1 OFFSET $2`, [BATCH, offset]);
    if (rows.length === 0) break;
    const params: Param[] = [];
    const tuples = rows.map((raw) => {
      const row = spec.transform ? spec.transform(raw) : raw;
      const placeholders = spec.columns.map((column) => {
        const value = row[column];
        params.push((spec.booleans?.includes(column) ? value === 1 || value === true : value) as Param);
        return `$${params.length}`;
      });
      return `(${placeholders.join(', ')})`;
    });
    copied += await target.run(`INSERT INTO ${spec.table} (${spec.columns.join(', ')}) VALUES ${tuples.join(', ')} ON CONFLICT DO NOTHING`, params);
    onRows(rows.length);
  }
  if (spec.serial) {
    await target.one(`SELECT setval(pg_get_serial_sequence('${spec.table}', '${spec.serial}'), GREATEST((SELECT max(${spec.serial}) FROM ${spec.table}), 1))`);
  }
  return { table: spec.table, source: count, copied, alreadyThere: count - copied, verified: await verify(source, target, spec) };
}

/** Every key of the source is in the target. */
async function verify(source: Sql, target: Sql, spec: TableCopy): Promise<boolean> {
  const keyOf = (row: Record<string, unknown>) => spec.key.map((k) => String(spec.transform && k === 'tag' ? String(row[k]).toLowerCase() : row[k])).join('\u0000');
  const there = new Set((await target.all<Record<string, unknown>>(`SELECT ${spec.key.join(', ')} FROM ${spec.table}`)).map(keyOf));
  for (const row of await source.all<Record<string, unknown>>(`SELECT ${spec.key.join(', ')} FROM ${spec.table}`)) if (!there.has(keyOf(row))) return false;
  return true;
}

function imageFiles(dataDir: string): string[] {
  const directory = join(dataDir, 'uploads');
  if (!existsSync(directory)) return [];
  return readdirSync(directory).filter((name) => /^[0-9a-f]{64}\.(png|jpg|webp)$/.test(name));
}

async function copyImages(target: Sql, dataDir: string, names: string[], now: Date, onRows: (n: number) => void): Promise<TableReport> {
  const { recogniseImage } = await import('../blog/uploads.js');
  let copied = 0;
  for (const name of names) {
    const bytes = readFileSync(join(dataDir, 'uploads', name));
    const kind = recogniseImage(bytes);
    if (!kind) continue;
    copied += await target.run(
      'INSERT INTO images (name, mime, width, height, size, bytes, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING',
      [name, kind.mime, kind.width, kind.height, bytes.length, bytes, now.toISOString()],
    );
    onRows(1);
  }
  const there = new Set((await target.all<{ name: string }>('SELECT name FROM images')).map((row) => row.name));
  return { table: 'images', source: names.length, copied, alreadyThere: names.length - copied, verified: names.every((name) => there.has(name)) };
}

/** The admin token of the data dir becomes the shared one, unless PostgreSQL already has one. */
async function copyAdminToken(target: Sql, dataDir: string, now: Date): Promise<'copied' | 'kept' | 'none'> {
  const file = join(dataDir, 'admin-token');
  if (!existsSync(file)) return 'none';
  const token = readFileSync(file, 'utf8').trim();
  if (!token) return 'none';
  const changed = await target.run('INSERT INTO server_secrets (name, value, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [ADMIN_TOKEN_SECRET, token, now.toISOString()]);
  return changed === 1 ? 'copied' : 'kept';
}

/** The name under which the shared admin token lives in server_secrets (src/auth/tokens.ts reads it). */
export const ADMIN_TOKEN_SECRET = 'admin_token';
