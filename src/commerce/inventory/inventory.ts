/**
 * Stock of the commerce services over the store (one implementation for
 * SQLite and PostgreSQL): the catalogue entry and on-hand count of each SKU,
 * the ledger of every change of on_hand, and reservations.
 *
 * available = on_hand - reserved, where reserved is what the SKU's
 * stock_holds row has ever reserved less what its products row has ever
 * released (sold, given back, expired). The two counters live in two rows so
 * that the two halves of a checkout lock different rows: placing an order
 * adds to stock_holds only, settling it writes products only (on_hand and
 * released_total), and on PostgreSQL neither waits for the other on a SKU
 * every order wants. Whatever only adds to what is available (a sale takes
 * the same units from on_hand and from reserved, a release gives them back)
 * can be read late without harm; what takes from it (a reservation, or
 * on_hand set or adjusted down) locks the SKU's stock_holds row first, so
 * those are ordered and each checks against what the one before left. A
 * reservation is one conditional UPDATE of that row (`... WHERE available >=
 * $qty`); on PostgreSQL, the statement that places an order locks the rows
 * first and checks the same condition on them before it writes anything
 * (order/postgres-steps.ts). A trigger on each side keeps 0 <= reserved <=
 * on_hand in the database (migration SQLite 14 / PostgreSQL 10), as the
 * CHECK on one row did. Items are always taken in SKU order, stock_holds
 * before products, so two changes of the same SKUs cannot deadlock.
 *
 * Domain module: nothing here prints or reads the environment.
 */
import { rowCheck, type Sql } from '../../store/sql.js';
import {
  CommerceError,
  DEFAULT_CURRENCY,
  DEFAULT_RESERVATION_TTL_MS,
  newId,
  notFound,
  num,
  precondition,
  sortedItems,
  type Quantity,
} from '../kernel/common.js';
import { Statement } from '../kernel/statement.js';

export interface StockLevel {
  sku: string;
  name: string;
  price: number;
  currency: string;
  onHand: number;
  reserved: number;
  available: number;
  updatedAt: string;
}

export type ReservationState = 'active' | 'held' | 'committed' | 'released' | 'expired';

export interface ReservationRecord {
  id: string;
  state: ReservationState;
  items: Quantity[];
  expiresAt: string;
  orderId: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface StockMovement {
  id: number;
  sku: string;
  delta: number;
  onHand: number;
  reason: string;
  actor: string;
  at: string;
}

interface ProductRow {
  sku: string;
  name: string;
  price: number;
  currency: string;
  on_hand: number;
  reserved: number;
  updated_at: string;
}

/** A SKU's level: its products row with its stock_holds row (`p`, `h`); changed last by whichever changed last. */
const SELECT_LEVEL = `SELECT p.sku, p.name, p.price, p.currency, p.on_hand, h.reserved_total - p.released_total AS reserved,
  CASE WHEN h.updated_at > p.updated_at THEN h.updated_at ELSE p.updated_at END AS updated_at
  FROM products p JOIN stock_holds h ON h.sku = p.sku`;

/** What is available of the SKU of products row `p` and stock_holds row `h`. */
const AVAILABLE = '(p.on_hand - (h.reserved_total - p.released_total))';

function level(row: ProductRow): StockLevel {
  const onHand = num(row.on_hand);
  const reserved = num(row.reserved);
  return {
    sku: row.sku,
    name: row.name,
    price: num(row.price),
    currency: row.currency,
    onHand,
    reserved,
    available: onHand - reserved,
    updatedAt: row.updated_at,
  };
}

/**
 * On PostgreSQL, locks the stock_holds rows of `skus` (in SKU order), as
 * whatever may take from what is available does first: after it, no
 * reservation of them is in flight, and the next statement reads them as
 * the last one left them. SQLite's write transactions are serialised already.
 */
async function lockHolds(tx: Sql, skus: readonly string[]): Promise<void> {
  if (tx.dialect !== 'postgres' || skus.length === 0) return;
  await tx.all(`SELECT sku FROM stock_holds WHERE sku IN (${skus.map((_, i) => `$${i + 1}`).join(', ')}) ORDER BY sku FOR UPDATE`, [...skus].sort());
}

const LEDGER = `INSERT INTO stock_movements (sku, delta, on_hand, reason, actor, at)
  SELECT sku, $2, on_hand, $3, $4, $5 FROM products WHERE sku = $1`;

/**
 * FAILED_PRECONDITION: not enough stock for a reservation. `mayFree` says
 * that trying again may succeed: a reservation had run out without being
 * expired yet, or units came free since (see Orders.create).
 */
export class ShortStock extends CommerceError {
  constructor(
    message: string,
    readonly mayFree: boolean,
  ) {
    super('FAILED_PRECONDITION', message);
  }
}

/**
 * The SQL of a reservation's moves, for a reservation named by an SQL
 * expression: a placeholder when the change is made statement by statement
 * in a transaction, or a subquery on an earlier piece when it is one
 * statement of data-modifying CTEs (PostgreSQL; order/postgres-steps.ts).
 * Either way the same SQL.
 */
const reservationSql = {
  /** A new active reservation (RETURNING its id). */
  insert(s: Statement, id: string, orderId: string | null, expiresAt: string, at: string): string {
    const now = s.$(at);
    return `INSERT INTO reservations (id, order_id, state, expires_at, created_at, updated_at) VALUES (${s.$(id)}, ${s.$(orderId)}, 'active', ${s.$(expiresAt)}, ${now}, ${now}) RETURNING id`;
  },
  /** The reservation from one of `from` to `to` (and only when due, for an expiry). */
  move(s: Statement, reservation: string, from: readonly ReservationState[], to: ReservationState, at: string, due = false): string {
    const now = s.$(at);
    return `UPDATE reservations SET state = ${s.$(to)}, updated_at = ${now} WHERE id = ${reservation} AND ${rowCheck(`state IN (${from.map((state) => s.$(state)).join(', ')})${due ? ` AND expires_at <= ${now}` : ''}`)}`;
  },
  /**
   * Locks its SKUs' products rows in SKU order, the order every change of
   * stock takes them in (PostgreSQL; SQLite's write transactions are
   * serialised already). FOR NO KEY UPDATE, the lock the UPDATE takes: it
   * leaves alone the key-share locks with which the orders being placed
   * meanwhile check that their SKUs exist.
   */
  lock(reservation: string): string {
    return `SELECT p.sku FROM products p JOIN reservation_items i ON i.sku = p.sku WHERE i.reservation_id = ${reservation} ORDER BY p.sku FOR NO KEY UPDATE OF p`;
  },
  /** Its units are let go of (released_total), and leave on_hand too when they are sold: its products rows only. */
  stock(s: Statement, reservation: string, sold: boolean, at: string): string {
    return `UPDATE products SET ${sold ? 'on_hand = products.on_hand - i.quantity, ' : ''}released_total = products.released_total + i.quantity, updated_at = ${s.$(at)}
      FROM reservation_items i WHERE i.reservation_id = ${reservation} AND i.sku = products.sku`;
  },
};

export interface SetStock {
  sku: string;
  /** The new on-hand quantity; undefined keeps an existing SKU's (a new SKU needs one). */
  quantity?: number | undefined;
  price?: number | undefined;
  name?: string | undefined;
  currency?: string | undefined;
  reason: string;
  actor: string;
}

export class Inventory {
  constructor(
    private readonly sql: Sql,
    private readonly now: () => Date,
  ) {}

  /** Levels of the SKUs named (NOT_FOUND naming the unknown ones), or of every SKU. */
  async levels(skus: readonly string[] = [], sql: Sql = this.sql): Promise<StockLevel[]> {
    if (skus.length === 0) return (await sql.all<ProductRow>(`${SELECT_LEVEL} ORDER BY p.sku`)).map(level);
    const placeholders = skus.map((_, i) => `$${i + 1}`).join(', ');
    const rows = await sql.all<ProductRow>(`${SELECT_LEVEL} WHERE p.sku IN (${placeholders})`, skus);
    const bySku = new Map(rows.map((row) => [row.sku, level(row)]));
    const unknown = skus.filter((sku) => !bySku.has(sku));
    if (unknown.length > 0) throw notFound(`no such SKU: ${unknown.join(', ')}`);
    return skus.map((sku) => bySku.get(sku)!);
  }

  /** Creates a SKU or sets its on-hand quantity (and price, name, currency), with a ledger line. */
  async set(change: SetStock): Promise<StockLevel> {
    return this.sql.transaction(async (tx) => {
      const at = this.now().toISOString();
      await lockHolds(tx, [change.sku]);
      const current = await tx.one<ProductRow>(`${SELECT_LEVEL} WHERE p.sku = $1${tx.dialect === 'postgres' ? ' FOR UPDATE OF p' : ''}`, [change.sku]);
      if (!current) {
        if (change.price === undefined) throw precondition(`SKU ${change.sku} is new: give its price (minor units of the currency)`);
        if (change.quantity === undefined) throw precondition(`SKU ${change.sku} is new: give its quantity on hand`);
        const created = await tx.run(
          `INSERT INTO products (sku, name, price, currency, on_hand, released_total, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 0, $6, $6)
           ON CONFLICT (sku) DO NOTHING`,
          [change.sku, change.name || change.sku, change.price, change.currency || DEFAULT_CURRENCY, change.quantity, at],
        );
        // Created by another call meanwhile: set it as an existing SKU.
        if (created === 0) return this.set(change);
        await tx.run('INSERT INTO stock_holds (sku, reserved_total, updated_at) VALUES ($1, 0, $2)', [change.sku, at]);
        await tx.run(LEDGER, [change.sku, change.quantity, change.reason, change.actor, at]);
        return (await this.levels([change.sku], tx))[0]!;
      }
      // The price is in the currency's minor unit: kept across a change of currency, 12,000 won would become $120.00.
      if (change.currency && change.currency !== current.currency && change.price === undefined) {
        throw precondition(`SKU ${change.sku} is priced in ${current.currency}: give its price in ${change.currency} (minor units) with the new currency`);
      }
      const reserved = num(current.reserved);
      const quantity = change.quantity ?? num(current.on_hand);
      if (quantity < reserved) {
        throw precondition(`SKU ${change.sku} has ${reserved} units reserved: on_hand cannot be set to ${quantity} (at least ${reserved})`);
      }
      // Without a quantity the on-hand count is not written at all: an order reserving or committing meanwhile keeps its change.
      await tx.run('UPDATE products SET on_hand = COALESCE($2, on_hand), price = $3, name = $4, currency = $5, updated_at = $6 WHERE sku = $1', [
        change.sku,
        change.quantity ?? null,
        change.price ?? num(current.price),
        change.name || current.name,
        change.currency || current.currency,
        at,
      ]);
      const delta = quantity - num(current.on_hand);
      if (change.quantity !== undefined && delta !== 0) await tx.run(LEDGER, [change.sku, delta, change.reason, change.actor, at]);
      return (await this.levels([change.sku], tx))[0]!;
    });
  }

  /** Adds or removes units, with a ledger line; never below what is reserved. */
  async adjust(sku: string, delta: number, reason: string, actor: string): Promise<StockLevel> {
    return this.sql.transaction(async (tx) => {
      const at = this.now().toISOString();
      await lockHolds(tx, [sku]);
      const changed = await tx.run(
        'UPDATE products SET on_hand = on_hand + $2, updated_at = $3 WHERE sku = $1 AND on_hand + $2 >= (SELECT h.reserved_total FROM stock_holds h WHERE h.sku = products.sku) - released_total',
        [sku, delta, at],
      );
      if (changed === 0) {
        const [current] = await this.levels([sku], tx);
        throw precondition(
          `SKU ${sku} has ${current!.onHand} on hand, ${current!.reserved} reserved: removing ${-delta} would leave less than is reserved (at most ${current!.available} can be removed)`,
        );
      }
      await tx.run(LEDGER, [sku, delta, reason, actor, at]);
      return (await this.levels([sku], tx))[0]!;
    });
  }

  /**
   * Reserves every item or none, in `tx`: ShortStock naming each SKU that
   * is short (NOT_FOUND for unknown ones) and nothing held. The SKUs'
   * stock_holds rows are locked first (PostgreSQL), then the rows of the
   * reservation are written and the stock is taken last (after
   * `beforeTaking`, where the caller writes what goes with it). `id`,
   * `now` and `expiresAt` are the caller's when it names the reservation in
   * what it writes.
   */
  async reserve(
    tx: Sql,
    items: readonly Quantity[],
    options: {
      id?: string;
      now?: Date;
      expiresAt?: string;
      ttlMs?: number;
      orderId?: string;
      skusChecked?: boolean;
      beforeTaking?: (reservation: ReservationRecord) => Promise<void>;
    } = {},
  ): Promise<ReservationRecord> {
    const now = options.now ?? this.now();
    const at = now.toISOString();
    const sorted = sortedItems(items);
    if (!options.skusChecked)
      await this.levels(
        sorted.map((item) => item.sku),
        tx,
      );
    const id = options.id ?? newId('res');
    const expiresAt = options.expiresAt ?? new Date(now.getTime() + (options.ttlMs ?? DEFAULT_RESERVATION_TTL_MS)).toISOString();
    // Before the reservation's items, whose reference to stock_holds takes a key-share lock on these rows (PostgreSQL):
    // two reservations that took that first and then wanted the rows whole would wait for each other.
    await lockHolds(
      tx,
      sorted.map((item) => item.sku),
    );
    const row = new Statement();
    await tx.one(reservationSql.insert(row, id, options.orderId ?? null, expiresAt, at), row.params);
    const lines = new Statement();
    const values = lines.rows(sorted.map((item) => [id, item.sku, item.quantity]));
    await tx.run(`INSERT INTO reservation_items (reservation_id, sku, quantity) VALUES ${values}`, lines.params);
    const reservation: ReservationRecord = { id, state: 'active', items: sorted, expiresAt, orderId: options.orderId ?? null, createdAt: at, updatedAt: at };
    await options.beforeTaking?.(reservation);
    const missing: Quantity[] = [];
    for (const item of sorted) {
      const changed = await tx.run(
        `UPDATE stock_holds SET reserved_total = reserved_total + $2, updated_at = $3
         WHERE sku = $1 AND EXISTS (SELECT 1 FROM products p WHERE p.sku = $1 AND p.on_hand - (stock_holds.reserved_total - p.released_total) >= $2)`,
        [item.sku, item.quantity, at],
      );
      if (changed === 0) missing.push(item);
    }
    if (missing.length > 0) throw await this.#short(tx, missing, at);
    return reservation;
  }

  /**
   * The refusal of a reservation that found `missing` short: what is
   * available of each, and whether trying again may succeed. Read in one
   * statement, so that a reservation expired meanwhile shows either as due
   * or as units available again.
   */
  async #short(tx: Sql, missing: readonly Quantity[], at: string): Promise<ShortStock> {
    const placeholders = missing.map((_, i) => `$${i + 2}`).join(', ');
    const rows = await tx.all<{ sku: string; available: number; due: number }>(
      `SELECT p.sku, ${AVAILABLE} AS available,
         CASE WHEN EXISTS (SELECT 1 FROM reservations WHERE state = 'active' AND expires_at <= $1) THEN 1 ELSE 0 END AS due
       FROM products p JOIN stock_holds h ON h.sku = p.sku WHERE p.sku IN (${placeholders})`,
      [at, ...missing.map((m) => m.sku)],
    );
    const available = new Map(rows.map((row) => [row.sku, num(row.available)]));
    const due = rows.some((row) => num(row.due) === 1);
    return new ShortStock(
      `not enough stock: ${missing.map((m) => `${m.sku} (asked ${m.quantity}, available ${available.get(m.sku)!})`).join(', ')}`,
      due || missing.some((m) => available.get(m.sku)! >= m.quantity),
    );
  }

  /** A reservation's items, in SKU order (the order every change takes the SKUs' rows in). */
  async #items(sql: Sql, id: string): Promise<Quantity[]> {
    const items = await sql.all<{ sku: string; quantity: number }>('SELECT sku, quantity FROM reservation_items WHERE reservation_id = $1 ORDER BY sku', [id]);
    return items.map((item) => ({ sku: item.sku, quantity: num(item.quantity) }));
  }

  async reservation(id: string, sql: Sql = this.sql): Promise<ReservationRecord | undefined> {
    const row = await sql.one<{ id: string; state: ReservationState; expires_at: string; order_id: string | null; created_at: string; updated_at: string }>(
      'SELECT id, state, expires_at, order_id, created_at, updated_at FROM reservations WHERE id = $1',
      [id],
    );
    if (!row) return undefined;
    return {
      id: row.id,
      state: row.state,
      items: await this.#items(sql, id),
      expiresAt: row.expires_at,
      orderId: row.order_id,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    };
  }

  /** Moves a reservation from one of `from` to `to`; false when it was not in one of them (someone else moved it), or, `due`, had not run out. */
  async #move(tx: Sql, id: string, from: readonly ReservationState[], to: ReservationState, due = false): Promise<boolean> {
    const s = new Statement();
    return (await tx.run(reservationSql.move(s, s.$(id), from, to, this.now().toISOString(), due), s.params)) === 1;
  }

  /**
   * Marks an active, unexpired reservation held by a payment in progress (it
   * does not expire until the outcome is known); false when it is not
   * active any more or has expired.
   */
  async hold(tx: Sql, id: string): Promise<boolean> {
    const changed = await tx.run(
      `UPDATE reservations SET state = 'held', updated_at = $2 WHERE id = $1 AND ${rowCheck("state = 'active' AND expires_at > $2")}`,
      [id, this.now().toISOString()],
    );
    return changed === 1;
  }

  /** Gives the units of an active or held reservation back (released, or expired); false when it was neither. */
  async release(tx: Sql, id: string, to: 'released' | 'expired' = 'released'): Promise<boolean> {
    const moved = to === 'expired' ? await this.#move(tx, id, ['active'], 'expired', true) : await this.#move(tx, id, ['active', 'held'], 'released');
    if (moved) await this.#unreserve(tx, id, false);
    return moved;
  }

  /** Makes an active or held reservation a sale: its units leave on_hand and reserved, with ledger lines; false when it was neither. */
  async commit(tx: Sql, id: string, reason: string, actor: string): Promise<boolean> {
    if (!(await this.#move(tx, id, ['active', 'held'], 'committed'))) return false;
    await this.#unreserve(tx, id, true);
    await tx.run(
      `INSERT INTO stock_movements (sku, delta, on_hand, reason, actor, at)
       SELECT p.sku, -i.quantity, p.on_hand, $2, $3, $4 FROM reservation_items i JOIN products p ON p.sku = i.sku WHERE i.reservation_id = $1 ORDER BY p.sku`,
      [id, reason, actor, this.now().toISOString()],
    );
    return true;
  }

  /** A reservation's units leave reserved (and on_hand when sold), in one statement whatever their number. */
  async #unreserve(tx: Sql, id: string, sold: boolean): Promise<void> {
    if (tx.dialect === 'postgres') await tx.all(reservationSql.lock('$1'), [id]);
    const s = new Statement();
    await tx.run(reservationSql.stock(s, s.$(id), sold, this.now().toISOString()), s.params);
  }

  /**
   * Reservations as pieces of one PostgreSQL statement (placing orders:
   * order/postgres-steps.ts): one for each row of a piece `claimed` (its
   * columns reservation_id, id, the order's, expires_at and created_at), of
   * its rows of a piece `item` (ord, sku, quantity), whose SKUs' stock_holds
   * rows an earlier piece has locked and found to have enough for all of
   * them. So no UPDATE of stock fails here; were one to take more than is
   * there, the trigger would refuse the whole statement, not leave half of
   * it.
   */
  reserveAllPieces(s: Statement, at: string): string[] {
    return [
      `reservation AS (INSERT INTO reservations (id, order_id, state, expires_at, created_at, updated_at)
        SELECT reservation_id, id, 'active', expires_at, created_at, created_at FROM claimed RETURNING id)`,
      'reservation_item AS (INSERT INTO reservation_items (reservation_id, sku, quantity) SELECT c.reservation_id, i.sku, i.quantity FROM claimed c JOIN item i ON i.ord = c.ord)',
      `taken AS (UPDATE stock_holds SET reserved_total = stock_holds.reserved_total + t.quantity, updated_at = ${s.$(at)}
        FROM (SELECT i.sku, SUM(i.quantity) AS quantity FROM claimed c JOIN item i ON i.ord = c.ord GROUP BY i.sku) t WHERE t.sku = stock_holds.sku)`,
    ];
  }

  /**
   * The ends of reservations, each committed (a sale, with ledger lines) or
   * released, as pieces of one PostgreSQL statement: `ending` is a query of
   * their rows (id, sold, reason: a sale's ledger reason, at). The same
   * moves as commit and release: every SKU's products row locked first, in
   * SKU order, then changed once by what all of them take; a sale's ledger
   * lines say the on_hand after each of them, in the order of their ids.
   */
  endAllPieces(s: Statement, ending: string): string[] {
    const at = s.$(this.now().toISOString());
    return [
      `ending AS (${ending})`,
      `ended AS (UPDATE reservations SET state = CASE WHEN e.sold THEN 'committed' ELSE 'released' END, updated_at = e.at
        FROM ending e WHERE reservations.id = e.id AND ${rowCheck("reservations.state IN ('active', 'held')")} RETURNING reservations.id, e.sold, e.reason)`,
      `locked AS (${reservationSql.lock('ANY (SELECT id FROM ended)')})`,
      `line AS (SELECT i.sku, i.quantity, e.sold, e.reason, row_number() OVER (ORDER BY i.sku, e.id) AS n FROM ended e JOIN reservation_items i ON i.reservation_id = e.id)`,
      // Only rows the piece before has locked (all of them, in SKU order, before any is changed).
      `stocked AS (UPDATE products SET on_hand = products.on_hand - t.sold, released_total = products.released_total + t.quantity, updated_at = ${at}
        FROM (SELECT sku, SUM(quantity) AS quantity, SUM(CASE WHEN sold THEN quantity ELSE 0 END) AS sold FROM line GROUP BY sku) t
        WHERE t.sku = products.sku AND products.sku IN (SELECT sku FROM locked) RETURNING products.sku, products.on_hand)`,
      // on_hand after a line: what is left once it and the lines before it are taken, the lines after it still there.
      `ledger AS (INSERT INTO stock_movements (sku, delta, on_hand, reason, actor, at)
        SELECT l.sku, -l.quantity, st.on_hand + COALESCE(SUM(l.quantity) OVER (PARTITION BY l.sku ORDER BY l.n ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING), 0),
          l.reason, 'system', ${at}
        FROM line l JOIN stocked st ON st.sku = l.sku WHERE l.sold ORDER BY l.n)`,
    ];
  }

  /** Puts units of a committed sale back on hand (a cancelled paid order), with ledger lines. */
  async restock(tx: Sql, items: readonly Quantity[], reason: string, actor: string): Promise<void> {
    const at = this.now().toISOString();
    for (const item of sortedItems(items)) {
      await tx.run('UPDATE products SET on_hand = on_hand + $2, updated_at = $3 WHERE sku = $1', [item.sku, item.quantity, at]);
      await tx.run(LEDGER, [item.sku, item.quantity, reason, actor, at]);
    }
  }

  /** Active reservations past their time, oldest first. */
  async due(limit = 100): Promise<string[]> {
    const rows = await this.sql.all<{ id: string }>(
      "SELECT id FROM reservations WHERE state = 'active' AND expires_at <= $1 ORDER BY expires_at LIMIT CAST($2 AS INTEGER)",
      [this.now().toISOString(), limit],
    );
    return rows.map((row) => row.id);
  }

  /** The ledger of a SKU, newest first. */
  async movements(sku: string, limit: number): Promise<StockMovement[]> {
    await this.levels([sku]);
    const rows = await this.sql.all<{ id: number; sku: string; delta: number; on_hand: number; reason: string; actor: string; at: string }>(
      'SELECT id, sku, delta, on_hand, reason, actor, at FROM stock_movements WHERE sku = $1 ORDER BY id DESC LIMIT CAST($2 AS INTEGER)',
      [sku, limit],
    );
    return rows.map((row) => ({
      id: num(row.id),
      sku: row.sku,
      delta: num(row.delta),
      onHand: num(row.on_hand),
      reason: row.reason,
      actor: row.actor,
      at: row.at,
    }));
  }
}
