/**
 * Copying what one `serve` kept in SQLite (rows, uploaded images, the admin
 * token) into a PostgreSQL, for `miniapp db copy`.
 *
 * What the target already holds decides what may happen, before anything is
 * written:
 * - nothing of any deployment: a copy, every row keeping its id;
 * - only rows identical to this source's (an earlier or interrupted copy of
 *   it): the copy completes what is missing;
 * - anything else (a row the source does not have, a row under the same key
 *   with other content, another admin token): the target is another
 *   deployment's, or was changed after a copy, and the copy is refused, with
 *   what was found, unless `merge` asks for a merge.
 * A merge adds the source's rows beside the target's so that no id of one
 * side ever means a different row of the other: a source row whose id is
 * taken by a different row gets a new id from the target's sequence, and
 * every reference to it follows (tokens, posts, tags, orders, payments,
 * idempotency keys, webhook attempts and resends). Rows whose natural key
 * (a username or e-mail, a SKU, an order id...) is held by a different row
 * cannot be merged without changing what they mean: the merge is refused,
 * listing them. The source's admin tokens never become admins of the
 * target in a merge; the target keeps its own admin token.
 *
 * Everything is written in one transaction, with the target's tables locked
 * against writers, and verified inside it: every source row is read back
 * and compared, column by column, with what it should be. A difference
 * rolls the whole copy back. An interrupted copy leaves the target as it
 * was.
 *
 * Domain module: it prints nothing; the command renders what it returns.
 */
import type { Param, Sql } from './sql.js';

type Row = Record<string, unknown>;
type Serial = 'users' | 'posts' | 'unlink_events' | 'webhook_deliveries' | 'webhook_attempts' | 'stock_movements';

/** A table to copy, in an order that satisfies the foreign keys. */
export interface TableCopy {
  table: string;
  columns: readonly string[];
  /** The primary key. */
  key: readonly string[];
  /** Columns SQLite keeps as 0/1 and PostgreSQL as booleans. */
  booleans?: readonly string[];
  /** Columns compared and written lowercased (post_tags' tags). */
  lowercase?: readonly string[];
  /** A BIGSERIAL id: renumbered in a merge when taken by another row. */
  serial?: Serial;
  /** Columns holding the id of a serial table's row, remapped with it. */
  refs?: Readonly<Record<string, Serial>>;
  /** A column holding `user:ID` (idempotency keys' owner), remapped with the user. */
  userOwner?: string;
  /** Unique columns besides the key (compared lowercased) that another row may already hold. */
  unique?: readonly string[];
  /** Columns whose values are never shown (a difference names the column only). */
  secret?: readonly string[];
}

export const COPIED_TABLES: readonly TableCopy[] = [
  {
    table: 'users',
    columns: ['id', 'username', 'email', 'full_name', 'is_active', 'roles', 'password_hash', 'created_at', 'updated_at', 'bio', 'avatar_url'],
    key: ['id'],
    booleans: ['is_active'],
    serial: 'users',
    unique: ['username', 'email'],
    secret: ['password_hash'],
  },
  {
    table: 'api_tokens',
    columns: ['token_hash', 'kind', 'user_id', 'created_at', 'expires_at'],
    key: ['token_hash'],
    refs: { user_id: 'users' },
    secret: ['token_hash'],
  },
  {
    table: 'posts',
    columns: ['id', 'title', 'content', 'author_id', 'author', 'author_is_admin', 'tags', 'is_published', 'created_at', 'updated_at', 'published_at'],
    key: ['id'],
    booleans: ['author_is_admin', 'is_published'],
    serial: 'posts',
    refs: { author_id: 'users' },
  },
  {
    table: 'post_tags',
    // The post's is_published and created_at ride along (the list's index: store/blog-listing-schema.ts).
    columns: ['post_id', 'tag', 'is_published', 'created_at'],
    key: ['post_id', 'tag'],
    booleans: ['is_published'],
    lowercase: ['tag'],
    refs: { post_id: 'posts' },
  },
  { table: 'unlink_events', columns: ['id', 'received_at', 'user_key', 'referrer', 'method', 'source'], key: ['id'], serial: 'unlink_events' },
  {
    table: 'webhook_deliveries',
    columns: ['id', 'event', 'url', 'body', 'state', 'attempts', 'next_attempt_at', 'created_at', 'updated_at', 'original_id', 'traceparent', 'delivery_key'],
    key: ['id'],
    serial: 'webhook_deliveries',
    refs: { original_id: 'webhook_deliveries' },
  },
  {
    table: 'webhook_attempts',
    columns: ['id', 'delivery_id', 'attempted_at', 'status_code', 'error'],
    key: ['id'],
    serial: 'webhook_attempts',
    refs: { delivery_id: 'webhook_deliveries' },
  },
  // The commerce services (migration 8 / 4), parents before children.
  { table: 'products', columns: ['sku', 'name', 'price', 'currency', 'on_hand', 'released_total', 'created_at', 'updated_at'], key: ['sku'] },
  { table: 'stock_holds', columns: ['sku', 'reserved_total', 'updated_at'], key: ['sku'] },
  { table: 'stock_movements', columns: ['id', 'sku', 'delta', 'on_hand', 'reason', 'actor', 'at'], key: ['id'], serial: 'stock_movements' },
  { table: 'reservations', columns: ['id', 'order_id', 'state', 'expires_at', 'created_at', 'updated_at'], key: ['id'] },
  { table: 'reservation_items', columns: ['reservation_id', 'sku', 'quantity'], key: ['reservation_id', 'sku'] },
  {
    table: 'orders',
    columns: [
      'id',
      'user_id',
      'state',
      'currency',
      'total_amount',
      'reservation_id',
      'payment_id',
      'created_at',
      'updated_at',
      'paid_at',
      'cancelled_at',
      'cancel_reason',
    ],
    key: ['id'],
    refs: { user_id: 'users' },
  },
  { table: 'order_items', columns: ['order_id', 'position', 'sku', 'name', 'quantity', 'unit_price', 'amount'], key: ['order_id', 'position'] },
  {
    table: 'payments',
    columns: [
      'id',
      'order_id',
      'user_id',
      'status',
      'amount',
      'balance',
      'currency',
      'method',
      'provider',
      'provider_reference',
      'failure_code',
      'failure_message',
      'created_at',
      'updated_at',
      'approved_at',
    ],
    key: ['id'],
    refs: { user_id: 'users' },
  },
  { table: 'refunds', columns: ['id', 'payment_id', 'position', 'amount', 'reason', 'status', 'created_at', 'updated_at'], key: ['id'] },
  {
    table: 'idempotency_keys',
    columns: ['scope', 'owner', 'key', 'request_hash', 'resource_id', 'response', 'created_at', 'expires_at'],
    key: ['scope', 'owner', 'key'],
    userOwner: 'owner',
  },
  {
    table: 'sandbox_charges',
    columns: ['key', 'amount', 'currency', 'method', 'outcome', 'failure_code', 'reference', 'answered', 'created_at'],
    key: ['key'],
  },
  { table: 'sandbox_refunds', columns: ['key', 'charge_reference', 'amount', 'created_at'], key: ['key'] },
];

/** The name under which the shared admin token lives in server_secrets (src/auth/tokens.ts reads it). */
const ADMIN_TOKEN_SECRET = 'admin_token';

/** Rows per INSERT: well under PostgreSQL's 65,535 parameters for the widest table. */
const BATCH = 500;

export interface SourceImage {
  name: string;
  mime: string;
  width: number;
  height: number;
  bytes: Buffer;
}

interface TableReport {
  table: string;
  /** Rows in the source. */
  source: number;
  /** Rows written now. */
  copied: number;
  /** Source rows found identical in the target (an earlier copy). */
  alreadyThere: number;
  /** Source rows written under a new id (a merge). */
  renumbered: number;
  /** Source rows left out on purpose (a merge: the source's admin tokens). */
  skipped: number;
  /** Every source row is in the target as it should be (checked after writing). */
  verified: boolean;
}

export interface TableFinding {
  table: string;
  /** Rows of the target that the source does not have. */
  foreign: number;
  /** Source rows whose key (or unique username / e-mail) the target holds with other content. */
  conflicts: number;
  /** A few of the conflicts: the key and the columns that differ (never a secret's value). */
  examples: string[];
}

export interface CopyReport {
  merge: boolean;
  tables: TableReport[];
  /** The admin token: copied from the data dir, the target's kept, or none in the source. */
  adminToken: 'copied' | 'kept' | 'none';
}

/** The copy was refused: the target holds another deployment's data (or a merge would change what rows mean). */
export class CopyRefused extends Error {
  constructor(
    message: string,
    readonly findings: TableFinding[],
    readonly mergeable: boolean,
  ) {
    super(message);
  }
}

/** Verification found rows that are not what they should be (the copy was rolled back). */
export class CopyNotVerified extends Error {
  constructor(
    message: string,
    readonly differences: string[],
  ) {
    super(message);
  }
}

const keyOf = (spec: TableCopy, row: Row) => spec.key.map((column) => String(row[column])).join('\u0000');

/** A row as both engines agree to write it: booleans as booleans, lowercased columns lowercased, numbers as numbers. */
function normalise(spec: TableCopy, row: Row): Row {
  const out: Row = {};
  for (const column of spec.columns) {
    let value = row[column] ?? null;
    if (spec.booleans?.includes(column) && value !== null) value = value === true || value === 1 || value === '1' || value === 't';
    else if (spec.lowercase?.includes(column) && value !== null) value = String(value).toLowerCase();
    else if (typeof value === 'bigint') value = Number(value);
    out[column] = value;
  }
  return out;
}

/** The columns in which two normalised rows differ. */
function differing(spec: TableCopy, a: Row, b: Row): string[] {
  return spec.columns.filter((column) => !Object.is(a[column], b[column]) && JSON.stringify(a[column]) !== JSON.stringify(b[column]));
}

function describeKey(spec: TableCopy, row: Row): string {
  return spec.key.map((column) => `${column} ${spec.secret?.includes(column) ? '(secret)' : JSON.stringify(row[column])}`).join(', ');
}

export interface CopyOptions {
  source: Sql;
  target: Sql;
  images: readonly SourceImage[];
  /** The admin token of the data dir, if it has one. */
  adminToken: string | undefined;
  merge: boolean;
  now: Date;
  /** Rows (and images) written so far, for progress. */
  onRows?: (count: number) => void;
}

export async function copyStore(options: CopyOptions): Promise<CopyReport> {
  const { source, target } = options;
  // The source read whole first: nothing slow happens while the target's transaction is open.
  const sourceRows = new Map<string, Row[]>();
  for (const spec of COPIED_TABLES) {
    const rows = await source.all<Row>(`SELECT ${spec.columns.join(', ')} FROM ${spec.table} ORDER BY ${spec.key.join(', ')}`);
    sourceRows.set(spec.table, rows);
  }
  return target.transaction(
    async (tx) => {
      await tx.exec('SET LOCAL idle_in_transaction_session_timeout = 0');
      // Writers (a serve left running) wait until the copy is done; readers go on.
      await tx.exec(`LOCK TABLE ${[...COPIED_TABLES.map((t) => t.table), 'images', 'server_secrets'].join(', ')} IN EXCLUSIVE MODE`);
      return copyInto(tx, options, sourceRows);
    },
    { timeoutMs: 60 * 60 * 1000, statementTimeoutMs: 0 },
  );
}

interface Planned {
  spec: TableCopy;
  /** Rows to write, mapped and normalised. */
  inserts: Row[];
  /** Every source row as the target must hold it afterwards (for the verification). */
  expected: Row[];
  report: TableReport;
}

async function copyInto(tx: Sql, options: CopyOptions, sourceRows: Map<string, Row[]>): Promise<CopyReport> {
  const { merge } = options;
  const maps = new Map<Serial, Map<number, number>>();
  const findings: TableFinding[] = [];
  const plans: Planned[] = [];
  let unmergeable = false;

  const mapId = (serial: Serial, id: unknown): unknown => (id === null || id === undefined ? id : (maps.get(serial)?.get(Number(id)) ?? id));
  // References to rows of other tables, whose ids are all known by now; a table's references to its own rows (a
  // resend's original) are mapped once all of its ids are (below).
  const mapped = (spec: TableCopy, row: Row): Row => {
    const out = normalise(spec, row);
    for (const [column, serial] of Object.entries(spec.refs ?? {})) if (serial !== spec.serial) out[column] = mapId(serial, out[column]);
    if (spec.userOwner) {
      const owner = String(out[spec.userOwner]);
      const match = /^user:(\d+)$/.exec(owner);
      if (match) out[spec.userOwner] = `user:${mapId('users', match[1])}`;
    }
    return out;
  };

  for (const spec of COPIED_TABLES) {
    const rows = sourceRows.get(spec.table)!;
    const there = new Map<string, Row>();
    for (const row of await tx.all<Row>(`SELECT ${spec.columns.join(', ')} FROM ${spec.table}`)) there.set(keyOf(spec, row), normalise(spec, row));
    const uniqueThere = new Map<string, Row>();
    for (const row of there.values()) for (const column of spec.unique ?? []) uniqueThere.set(`${column}\u0000${String(row[column]).toLowerCase()}`, row);
    const idMap = new Map<number, number>();
    if (spec.serial) maps.set(spec.serial, idMap);
    const matched = new Set<string>();
    const finding: TableFinding = { table: spec.table, foreign: 0, conflicts: 0, examples: [] };
    const report: TableReport = { table: spec.table, source: rows.length, copied: 0, alreadyThere: 0, renumbered: 0, skipped: 0, verified: false };
    const plan: Planned = { spec, inserts: [], expected: [], report };
    const renumber: Row[] = [];
    const conflict = (row: Row, why: string) => {
      finding.conflicts++;
      if (finding.examples.length < 5) finding.examples.push(`${describeKey(spec, row)}: ${why}`);
    };

    for (const raw of rows) {
      const row = mapped(spec, raw);
      if (merge && spec.table === 'api_tokens' && row.kind === 'admin') {
        report.skipped++;
        continue;
      }
      const key = keyOf(spec, row);
      const same = there.get(key);
      // A different row of the target that holds this row's username or e-mail.
      const rival = (spec.unique ?? [])
        .map((column) => uniqueThere.get(`${column}\u0000${String(row[column]).toLowerCase()}`))
        .find((other) => other !== undefined && keyOf(spec, other) !== key);
      if (same && differing(spec, same, row).length === 0) {
        matched.add(key);
        if (spec.serial) idMap.set(Number(row.id), Number(row.id));
        report.alreadyThere++;
        plan.expected.push(row);
        continue;
      }
      if (rival) {
        // The same user under another id (a merge that renumbered it before) is that user; anyone else is a conflict.
        if (spec.serial && differing(spec, { ...rival, id: row.id }, row).length === 0) {
          matched.add(keyOf(spec, rival));
          idMap.set(Number(row.id), Number(rival.id));
          report.alreadyThere++;
          plan.expected.push({ ...row, id: rival.id });
          continue;
        }
        const column = (spec.unique ?? []).find((c) => String(rival[c]).toLowerCase() === String(row[c]).toLowerCase());
        conflict(row, `its ${column} ${JSON.stringify(row[column!])} belongs to another row of the target (${describeKey(spec, rival)})`);
        matched.add(keyOf(spec, rival));
        unmergeable = true;
        continue;
      }
      // From here on, a row of the target under the same key is this row's conflict, not a row of its own.
      if (same) matched.add(key);
      if (same) {
        const shared = (spec.unique ?? []).find((c) => String(same[c]).toLowerCase() === String(row[c]).toLowerCase());
        if (shared) {
          // The same name under the same id with other content: another user of that name, or this one changed on
          // one side since. No merge can keep both.
          conflict(
            row,
            `its ${shared} ${JSON.stringify(row[shared])} belongs to a different row of the target, with other ${differing(spec, same, row).join(', ')}`,
          );
          unmergeable = true;
          continue;
        }
        if (merge && spec.serial) {
          renumber.push(row);
          continue;
        }
        conflict(row, `the target holds it with other ${differing(spec, same, row).join(', ')}`);
        if (!spec.serial) unmergeable = true;
        continue;
      }
      if (spec.serial) idMap.set(Number(row.id), Number(row.id));
      plan.inserts.push(row);
      plan.expected.push(row);
    }
    if (renumber.length > 0) {
      // New ids above every id of either side, so that none lands on a source id kept because it was free.
      const highest = Math.max(0, ...rows.map((row) => Number(row.id)));
      await tx.one(`SELECT setval(pg_get_serial_sequence('${spec.table}', 'id'), GREATEST((SELECT max(id) FROM ${spec.table}), CAST($1 AS BIGINT), 1))`, [
        highest,
      ]);
      const ids = await tx.all<{ id: number }>(
        `SELECT nextval(pg_get_serial_sequence('${spec.table}', 'id')) AS id FROM generate_series(1, CAST($1 AS INTEGER))`,
        [renumber.length],
      );
      renumber.forEach((row, i) => {
        const id = Number(ids[i]!.id);
        idMap.set(Number(row.id), id);
        const moved = { ...row, id };
        plan.inserts.push(moved);
        plan.expected.push(moved);
        report.renumbered++;
      });
    }
    // References to the table's own rows (a resend's original), now that its ids are known; each row object is
    // mapped once (expected and inserts share them), from the source's value.
    const selfRefs = Object.entries(spec.refs ?? {}).filter(([, serial]) => serial === spec.serial);
    if (selfRefs.length > 0) {
      for (const row of new Set([...plan.inserts, ...plan.expected])) for (const [column] of selfRefs) row[column] = mapId(spec.serial!, row[column]);
    }
    for (const key of there.keys()) if (!matched.has(key)) finding.foreign++;
    if (finding.foreign || finding.conflicts) findings.push(finding);
    plans.push(plan);
  }

  // Images (named by their content's hash) and the admin token.
  const imageNames = new Set((await tx.all<{ name: string }>('SELECT name FROM images')).map((row) => row.name));
  const sourceImages = new Set(options.images.map((image) => image.name));
  const foreignImages = [...imageNames].filter((name) => !sourceImages.has(name)).length;
  if (foreignImages) findings.push({ table: 'images', foreign: foreignImages, conflicts: 0, examples: [] });
  const targetToken = (await tx.one<{ value: string }>('SELECT value FROM server_secrets WHERE name = $1', [ADMIN_TOKEN_SECRET]))?.value;
  const otherToken = targetToken !== undefined && targetToken !== options.adminToken;
  if (otherToken) findings.push({ table: 'server_secrets', foreign: 1, conflicts: 0, examples: ['the target has an admin token of its own'] });

  if (findings.length > 0 && (!merge || unmergeable)) {
    throw new CopyRefused(
      merge ? 'the merge would change what rows mean' : "the target holds rows that are not this SQLite database's, or differ from them",
      findings,
      !unmergeable,
    );
  }

  // Write.
  const countedBefore = await countedUsers(tx);
  for (const plan of plans) {
    const { spec } = plan;
    for (let start = 0; start < plan.inserts.length; start += BATCH) {
      const batch = plan.inserts.slice(start, start + BATCH);
      const params: Param[] = [];
      // push answers the new length: the placeholder of the value just pushed.
      const tuples = batch.map((row) => `(${spec.columns.map((column) => `$${params.push(row[column] as Param)}`).join(', ')})`);
      await tx.run(`INSERT INTO ${spec.table} (${spec.columns.join(', ')}) VALUES ${tuples.join(', ')}`, params);
      plan.report.copied += batch.length;
      options.onRows?.(batch.length);
    }
    if (spec.serial) {
      await tx.one(`SELECT setval(pg_get_serial_sequence('${spec.table}', 'id'), GREATEST((SELECT max(id) FROM ${spec.table}), 1))`);
    }
  }
  let imagesCopied = 0;
  for (const image of options.images) {
    if (imageNames.has(image.name)) continue;
    imagesCopied += await tx.run('INSERT INTO images (name, mime, width, height, size, bytes, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      image.name,
      image.mime,
      image.width,
      image.height,
      image.bytes.length,
      image.bytes,
      options.now.toISOString(),
    ]);
    options.onRows?.(1);
  }
  let adminToken: CopyReport['adminToken'] = 'none';
  if (options.adminToken !== undefined) {
    if (targetToken === undefined) {
      await tx.run('INSERT INTO server_secrets (name, value, created_at) VALUES ($1, $2, $3)', [
        ADMIN_TOKEN_SECRET,
        options.adminToken,
        options.now.toISOString(),
      ]);
      adminToken = 'copied';
    } else adminToken = targetToken === options.adminToken ? 'copied' : 'kept';
  }

  // Verify: every source row as it should be, read back from the target.
  const differences: string[] = [];
  for (const plan of plans) {
    const { spec } = plan;
    const got = new Map<string, Row>();
    for (const row of await tx.all<Row>(`SELECT ${spec.columns.join(', ')} FROM ${spec.table}`)) got.set(keyOf(spec, row), normalise(spec, row));
    let ok = true;
    for (const row of plan.expected) {
      const found = got.get(keyOf(spec, row));
      const columns = found ? differing(spec, found, row) : spec.columns;
      if (columns.length === 0) continue;
      ok = false;
      if (differences.length < 20) differences.push(`${spec.table} ${describeKey(spec, row)}: ${found ? `${columns.join(', ')} differ` : 'missing'}`);
    }
    plan.report.verified = ok;
  }
  // The count of users that triggers keep (ListUsers' total) must have counted each user written once.
  const written = plans.find((plan) => plan.spec.table === 'users')?.inserts.length ?? 0;
  const countedAfter = await countedUsers(tx);
  if (countedAfter - countedBefore !== written) {
    differences.push(`counters: the count of users went from ${countedBefore} to ${countedAfter} for ${written} users written`);
  }
  const there = new Set((await tx.all<{ name: string }>('SELECT name FROM images')).map((row) => row.name));
  const imagesVerified = options.images.every((image) => there.has(image.name));
  if (!imagesVerified) differences.push('images: some are missing');
  if (differences.length > 0) throw new CopyNotVerified(`the copy did not verify, so it was rolled back: ${differences.join('; ')}`, differences);

  return {
    merge,
    tables: [
      ...plans.map((plan) => plan.report),
      {
        table: 'images',
        source: options.images.length,
        copied: imagesCopied,
        alreadyThere: options.images.length - imagesCopied,
        renumbered: 0,
        skipped: 0,
        verified: imagesVerified,
      },
    ],
    adminToken,
  };
}

/** The number of users the triggers on `users` have counted (the `counters` row 'users'). */
async function countedUsers(tx: Sql): Promise<number> {
  const row = await tx.one<{ value: number }>("SELECT value FROM counters WHERE name = 'users'");
  if (!row) throw new Error("the counters row 'users' is missing: the target was not migrated");
  return Number(row.value);
}
