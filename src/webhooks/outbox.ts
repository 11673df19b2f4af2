/**
 * The outbox of webhook deliveries, in serve's store (SQLite or PostgreSQL,
 * one implementation over src/store/sql.ts), with the delivery log and what
 * operators do to it (list, cancel, resend). The blog (post.created) and
 * commerce (order.paid, order.refunded, order.cancelled, payment.refunded) enqueue into it;
 * the dispatcher (dispatcher.ts) drains it.
 *
 * Delivery is at-least-once. A payload is serialised once, when it is
 * enqueued, and those exact bytes are stored and sent on every attempt, so a
 * retry carries the same body and the same signature. A 2xx answer delivers
 * it; anything else (another status, a network error, a time-out) is retried
 * 1, 5 and 30 minutes after the failed attempt; a fourth failure marks the
 * delivery failed. The schedule lives in the database, so a restart resumes
 * it where it was: what is overdue goes out at once, the rest on time.
 *
 * Every instance of serve runs a dispatcher over the one outbox. A delivery
 * is sent by one of them at a time: a dispatcher claims it (one statement;
 * SKIP LOCKED on PostgreSQL) for a lease, and one that dies mid-send loses
 * the claim when the lease ends, when any dispatcher sends it again, with
 * the same X-Webhook-Delivery id. An enqueue, resend or cancel wakes the
 * dispatchers of every instance through the store's signals.
 *
 * The dispatchers say which URLs they send to (`webhook_senders`). Pending
 * deliveries to a URL that no running dispatcher has (one dropped from
 * serve's flags) are held (state `held`, not attempted) instead of retried
 * for ever, and resume when a dispatcher has their URL again; an instance
 * never holds what another one sends. An operator cancels pending or held
 * deliveries, and resends any finished one as a new delivery with the same
 * body and the same X-Webhook-Delivery id (see `resend`). All of it is plain
 * SQL on the shared database, safe while serve runs: a cancelled delivery is
 * never claimed, and an attempt already in flight when it was cancelled is
 * recorded without undoing the cancel.
 *
 * Domain module: it never prints and never reads process.env.
 */
import type { Signals } from '../store/signals.js';
import { rowCheck, type Param, type Sql } from '../store/sql.js';
import {
  newDeliveryKey,
  RETRY_DELAYS_MS,
  type Claim,
  type Delivery,
  type DeliveryAttempt,
  type DeliveryState,
  type ListFilter,
  type Outcome,
  type Refusal,
  type WebhookPayload,
} from './delivery.js';

/**
 * How long a dispatcher's word that it sends to its URLs holds (see
 * `WebhookOutbox.registerSender`). It renews it three times as often, so
 * only one that died (or lost the database) lets it lapse; then the
 * deliveries to URLs no other instance has are held.
 */
export const SENDER_TTL_MS = 90_000;

interface DeliveryRow {
  id: number;
  event: string;
  url: string;
  body: string;
  state: DeliveryState;
  attempts: number;
  next_attempt_at: string | null;
  created_at: string;
  updated_at: string;
  /** Absent in a database of schema 4 opened read-only (`webhooks list` before serve has migrated it). */
  original_id?: number | null;
  /** Absent or null in a database not migrated to the delivery keys yet. */
  delivery_key?: string | null;
}

interface AttemptRow {
  delivery_id: number;
  attempted_at: string;
  status_code: number | null;
  error: string | null;
}
/** What the outbox needs of a store (src/store/store.ts): its queries, and the signals that wake every instance's dispatcher. */
export interface OutboxStore {
  readonly sql: Sql;
  readonly signals?: Signals | undefined;
}

/** The channel on which the outbox tells the dispatchers of every instance that there is something new to look at. */
export const OUTBOX_CHANNEL = 'webhook_outbox';
/**
 * The rows of a JSON array (`expression`, a parameter or a column) as a
 * FROM item named `alias` with one column, `value` (text on PostgreSQL).
 */
function jsonValues(sql: Sql, expression: string, alias: string): string {
  // Through text: the parameter is a JSON text whatever type the server would infer for it.
  return sql.dialect === 'postgres' ? `json_array_elements_text((${expression})::text::json) AS ${alias}(value)` : `json_each(${expression}) AS ${alias}`;
}

/**
 * The row locks a sub-select takes on PostgreSQL: `skip` passes over rows
 * another instance is claiming right now, `wait` queues behind it. SQLite
 * has one writer at a time (a write transaction begins IMMEDIATE): nothing
 * to add.
 */
function lockClause(sql: Sql, mode: 'skip' | 'wait', of?: string): string {
  if (sql.dialect !== 'postgres') return '';
  const rows = of === undefined ? '' : ` OF ${of}`;
  return mode === 'skip' ? ` FOR UPDATE${rows} SKIP LOCKED` : ` FOR UPDATE${rows}`;
}

/**
 * The deliveries to the URL `url` (an SQL expression) in `state`, due by
 * `dueBy` when given, written as one range of webhook_deliveries_url:
 * row comparisons on (url, state[, next_attempt_at]), which select
 * exactly the rows that `url = ... AND state = ... AND next_attempt_at <=
 * ...` would. Only that index answers them. Written as equalities, they
 * also fit webhook_deliveries_due (state, next_attempt_at), and a planner
 * told by the last ANALYZE that few deliveries are pending (or held)
 * walks all of them there, every URL's, to find one URL's. Order by
 * `url, state, next_attempt_at, id` to read them in the index's order.
 */
function ofUrl(url: string, state: 'pending' | 'held', dueBy?: string): string {
  return dueBy === undefined
    ? `(url, state) >= (${url}, '${state}') AND (url, state) <= (${url}, '${state}')`
    : `(url, state, next_attempt_at) >= (${url}, '${state}', '') AND (url, state, next_attempt_at) <= (${url}, '${state}', ${dueBy})`;
}

/**
 * `id` is one of the ids the CTE `picked` found, read through the primary
 * key. PostgreSQL cannot tell how many rows a join of a list with a range
 * finds, guesses many, and then scans the whole table for them (a
 * semi-join); an array of them is taken as a few, as they are.
 */
function pickedIds(sql: Sql): string {
  return sql.dialect === 'postgres' ? 'id = ANY (ARRAY(SELECT id FROM picked))' : 'id IN (SELECT id FROM picked)';
}

const byId = (a: DeliveryRow, b: DeliveryRow) => Number(a.id) - Number(b.id);

export class WebhookOutbox {
  readonly sql: Sql;
  readonly #signals: Signals | undefined;

  constructor(
    store: OutboxStore,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.sql = store.sql;
    this.#signals = store.signals;
  }

  /**
   * Queues one delivery of `event` per URL, due now, and returns their ids.
   * The payload is built and serialised once, so every URL gets the same
   * bytes. All rows or none (one statement); with `tx`, the caller's
   * transaction (the post's write), so a post is never committed without
   * its deliveries. The dispatchers of every instance are told once it
   * commits. `traceparent`, the span that made the event (when tracing is
   * on), is kept for the attempts' spans to link to.
   */
  async enqueue(event: string, data: unknown, urls: readonly string[], tx?: Sql, traceparent?: string): Promise<number[]> {
    if (urls.length === 0) return [];
    const sql = tx ?? this.sql;
    const at = this.now().toISOString();
    const payload: WebhookPayload = { event, timestamp: at, data };
    // JSON.stringify escapes lone surrogates, so the text is valid UTF-8 and round-trips through either database exactly.
    const body = JSON.stringify(payload);
    // The trace column only when there is a trace: without one the statement is the one every schema since 1 takes.
    const traced = traceparent !== undefined;
    const first = traced ? 5 : 4;
    // Each delivery's X-Webhook-Delivery key, unique across databases (delivery.ts).
    const keys = urls.map(() => newDeliveryKey(this.now()));
    const values = urls.map((_, i) => `($1, $${i + first}, $2, 'pending', 0, $3, $3, $3, $${i + first + urls.length}${traced ? ', $4' : ''})`).join(', ');
    const rows = await sql.all<{ id: number }>(
      `INSERT INTO webhook_deliveries (event, url, body, state, attempts, next_attempt_at, created_at, updated_at, delivery_key${traced ? ', traceparent' : ''}) VALUES ${values} RETURNING id`,
      traced ? [event, body, at, traceparent, ...urls, ...keys] : [event, body, at, ...urls, ...keys],
    );
    await this.#tell('enqueued', tx);
    // Ids follow the order of the VALUES, so sorted they follow `urls`.
    return rows.map((row) => Number(row.id)).sort((a, b) => a - b);
  }

  /**
   * Calls `wake` whenever any instance enqueues, resends or cancels, and
   * each time the subscription is (re)connected, when something may have
   * been missed. Resolves with the unsubscribe.
   */
  async listen(wake: () => void): Promise<() => Promise<void>> {
    if (!this.#signals) return async () => undefined;
    return this.#signals.subscribe(OUTBOX_CHANNEL, () => wake(), wake);
  }

  /** Tells the dispatchers, when `tx` commits (at once without one). */
  async #tell(what: 'enqueued' | 'resent' | 'cancelled' | 'released', tx: Sql | undefined): Promise<void> {
    if (!this.#signals) return;
    if (tx) {
      await this.#signals.publish(OUTBOX_CHANNEL, what, tx);
      return;
    }
    // The change is committed already; a lost wake-up only means the dispatchers find it at their next look.
    await this.#signals.publish(OUTBOX_CHANNEL, what, this.sql).catch(() => undefined);
  }

  /** Deliveries with their attempts, oldest first (by id), like `callbacks list`; with a limit, the most recent ones. */
  async list(filter: ListFilter = {}): Promise<Delivery[]> {
    const { where, params } = whereOf(filter);
    const limit = filter.limit === undefined ? '' : ` LIMIT CAST($${params.length + 1} AS INTEGER)`;
    const rows = await this.sql.all<DeliveryRow>(
      `SELECT * FROM (SELECT * FROM webhook_deliveries ${where} ORDER BY id DESC${limit}) AS newest ORDER BY id`,
      filter.limit === undefined ? params : [...params, filter.limit],
    );
    return this.#withAttempts(rows);
  }

  /** How many deliveries match, whatever the limit. */
  async count(filter: Omit<ListFilter, 'limit'> = {}): Promise<number> {
    const { where, params } = whereOf(filter);
    return Number((await this.sql.one<{ n: number }>(`SELECT count(*) AS n FROM webhook_deliveries ${where}`, params))!.n);
  }

  async get(id: number): Promise<Delivery | undefined> {
    const row = await this.sql.one<DeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = $1', [id]);
    return row ? (await this.#withAttempts([row]))[0] : undefined;
  }

  /** Pending deliveries whose next attempt is due at `now`, the most overdue first. */
  async due(now: Date): Promise<Delivery[]> {
    return this.#withAttempts(
      await this.sql.all<DeliveryRow>(`SELECT * FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= $1 ORDER BY next_attempt_at, id`, [
        now.toISOString(),
      ]),
    );
  }

  /** How many deliveries are pending: due now, being sent, or waiting for a retry. */
  async pendingCount(): Promise<number> {
    return Number((await this.sql.one<{ n: number }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE state = 'pending'`))!.n);
  }

  /** When the earliest pending delivery (to one of `urls`, when given) is due, or undefined when none is pending. */
  async nextDueAt(urls?: readonly string[]): Promise<Date | undefined> {
    // For a list of URLs, each URL's earliest (one descent of webhook_deliveries_url each), not the minimum over
    // every pending delivery of theirs: the cost stays that of the list, whatever the backlog.
    const row =
      urls === undefined
        ? await this.sql.one<{ at: string | null }>(`SELECT min(next_attempt_at) AS at FROM webhook_deliveries WHERE state = 'pending'`)
        : await this.sql.one<{ at: string | null }>(
            `SELECT min(first.at) AS at FROM (
               SELECT (SELECT next_attempt_at FROM webhook_deliveries WHERE ${ofUrl('wanted.value', 'pending')}
                       ORDER BY url, state, next_attempt_at LIMIT 1) AS at
               FROM ${jsonValues(this.sql, '$1', 'wanted')}) AS first`,
            [JSON.stringify(urls)],
          );
    return row?.at ? new Date(row.at) : undefined;
  }

  /**
   * Takes the most overdue delivery due at `now` (to one of `urls`, when
   * given) for one attempt: its next attempt moves to `until`, the end of
   * the lease, and its claim number goes up. One statement, so no two
   * dispatchers take the same delivery: on PostgreSQL the row is locked
   * and others skip it (SKIP LOCKED) and look at the next; SQLite writes
   * one at a time. A claimer that dies leaves the delivery pending, due
   * again when the lease ends, for any dispatcher to take.
   *
   * The pick is a MATERIALIZED CTE, not `id IN (SELECT ... LIMIT 1)`:
   * PostgreSQL may run such a sub-select again for each row it updates,
   * and it then picks (and claims) one row after another.
   *
   * With `urls`, the pick is the most overdue of each URL's first due
   * delivery (each found in one descent of webhook_deliveries_url, the
   * lock taken there), not a walk of every due delivery in time order
   * until one to these URLs comes up: deliveries to other instances'
   * URLs, or a backlog for a receiver that is down, cost nothing here.
   */
  async claim(now: Date, until: Date, urls?: readonly string[]): Promise<Claim | undefined> {
    const skip = lockClause(this.sql, 'skip');
    const pick =
      urls === undefined
        ? `SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= $2 ORDER BY next_attempt_at, id LIMIT 1${skip}`
        : `SELECT id FROM webhook_deliveries WHERE id IN (
             SELECT (SELECT id FROM webhook_deliveries WHERE ${ofUrl('wanted.value', 'pending', '$2')}
                     ORDER BY url, state, next_attempt_at, id LIMIT 1${skip})
             FROM ${jsonValues(this.sql, '$3', 'wanted')})
           ORDER BY next_attempt_at, id LIMIT 1`;
    const row = await this.sql.one<DeliveryRow & { claims: number; traceparent: string | null }>(
      `WITH picked AS MATERIALIZED (${pick})
       UPDATE webhook_deliveries SET next_attempt_at = $1, updated_at = $2, claims = claims + 1
       WHERE id IN (SELECT id FROM picked) AND ${rowCheck("state = 'pending' AND next_attempt_at <= $2")}
       RETURNING *`,
      urls === undefined ? [until.toISOString(), now.toISOString()] : [until.toISOString(), now.toISOString(), JSON.stringify(urls)],
    );
    if (!row) return undefined;
    return { delivery: (await this.#withAttempts([row]))[0]!, claim: Number(row.claims), traceparent: row.traceparent };
  }

  /**
   * Gives back a claim before its lease ends, with no attempt recorded: the
   * delivery is due now, for any dispatcher (another instance's, told at
   * once) to send, instead of waiting out the lease. A dispatcher that
   * stops does this with the deliveries whose attempt it cut short. Only
   * while the claim is the delivery's latest and the delivery pending;
   * says whether it was.
   */
  async release(claim: { id: number; claim: number }): Promise<boolean> {
    const at = this.now().toISOString();
    const row = await this.sql.one<{ id: number }>(
      `UPDATE webhook_deliveries SET next_attempt_at = $1, updated_at = $1 WHERE id = $2 AND ${rowCheck("claims = $3 AND state = 'pending'")} RETURNING id`,
      [at, claim.id, claim.claim],
    );
    if (row) await this.#tell('released', undefined);
    return Boolean(row);
  }

  /**
   * Records one attempt made under `claim` and the delivery's new state,
   * together, and returns the state the delivery is in. The outcome counts
   * only while the claim is the delivery's latest and the delivery pending:
   * one cancelled or held while the attempt was in flight stays so, and a
   * sender whose lease ran out (another instance claimed the delivery
   * since) cannot reschedule it. A delivery that arrived is marked
   * delivered whatever happened meanwhile: the receiver has it, and the
   * list should say so.
   */
  async recordAttempt(
    claim: { id: number; claim: number },
    attempt: DeliveryAttempt,
    next: { state: DeliveryState; nextAttemptAt: string | null; at: string },
  ): Promise<DeliveryState> {
    return this.sql.transaction(async (tx) => {
      await tx.run('INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error) VALUES ($1, $2, $3, $4)', [
        claim.id,
        attempt.at,
        attempt.statusCode,
        attempt.error,
      ]);
      const row = await tx.one<{ state: DeliveryState }>(
        `UPDATE webhook_deliveries SET attempts = attempts + 1,
           state = CASE WHEN $2 = 'delivered' OR (state = 'pending' AND claims = $5) THEN $2 ELSE state END,
           next_attempt_at = CASE WHEN $2 = 'delivered' OR (state = 'pending' AND claims = $5) THEN $3
                                  WHEN state = 'pending' THEN next_attempt_at ELSE NULL END,
           updated_at = $4
         WHERE id = $1 RETURNING state`,
        [claim.id, next.state, next.nextAttemptAt, next.at, claim.claim],
      );
      return row?.state ?? next.state;
    });
  }

  /**
   * Says that dispatcher `sender` sends to `urls` for the next `ttlMs` (a
   * running dispatcher says it again before then), and forgets the senders
   * whose time ran out.
   */
  async registerSender(sender: string, urls: readonly string[], ttlMs: number): Promise<void> {
    const now = this.now();
    await this.sql.run(
      `INSERT INTO webhook_senders (id, urls, expires_at) VALUES ($1, $2, $3)
       ON CONFLICT (id) DO UPDATE SET urls = excluded.urls, expires_at = excluded.expires_at`,
      [sender, JSON.stringify(urls), new Date(now.getTime() + ttlMs).toISOString()],
    );
    await this.sql.run('DELETE FROM webhook_senders WHERE expires_at <= $1', [now.toISOString()]);
  }

  /** A dispatcher that stops says so: its URLs no longer keep deliveries from being held. */
  async removeSender(sender: string): Promise<void> {
    await this.sql.run('DELETE FROM webhook_senders WHERE id = $1', [sender]);
  }

  /**
   * Holds the pending deliveries to URLs that neither `urls` nor any live
   * sender (another instance's dispatcher) has, and resumes (due now, the
   * attempts made so far still counted) the held ones to URLs in `urls`.
   * Returns what moved, for serve's log.
   */
  async holdOthers(urls: readonly string[]): Promise<{ held: Delivery[]; resumed: Delivery[] }> {
    const at = this.now().toISOString();
    const list = JSON.stringify(urls);
    const lockedHere = lockClause(this.sql, 'skip', 'webhook_deliveries');
    // The URLs are found by skipping through webhook_deliveries_url (one descent per URL the table has ever had, a
    // handful), and only the pending deliveries of the URLs nobody sends to are read: not every pending delivery,
    // each time any dispatcher looks at the outbox.
    const held = await this.sql.all<DeliveryRow>(
      `WITH RECURSIVE known (url) AS (
         SELECT min(url) FROM webhook_deliveries
         UNION ALL
         SELECT (SELECT min(url) FROM webhook_deliveries WHERE url > known.url) FROM known WHERE known.url IS NOT NULL
       ), orphaned (lost) AS (
         SELECT url FROM known WHERE url IS NOT NULL
           AND url NOT IN (SELECT value FROM ${jsonValues(this.sql, '$2', 'mine')})
           AND url NOT IN (SELECT sent.value FROM webhook_senders, ${jsonValues(this.sql, 'webhook_senders.urls', 'sent')}
                           WHERE webhook_senders.expires_at > $1)
       ), picked AS MATERIALIZED (
         SELECT webhook_deliveries.id FROM orphaned JOIN webhook_deliveries ON ${ofUrl('orphaned.lost', 'pending')}${lockedHere})
       UPDATE webhook_deliveries SET state = 'held', next_attempt_at = NULL, updated_at = $1
       WHERE ${pickedIds(this.sql)} AND ${rowCheck("state = 'pending'")}
       RETURNING *`,
      [at, list],
    );
    const resumed = await this.sql.all<DeliveryRow>(
      `WITH picked AS MATERIALIZED (
         SELECT webhook_deliveries.id FROM ${jsonValues(this.sql, '$2', 'mine')} JOIN webhook_deliveries ON ${ofUrl('mine.value', 'held')}${lockedHere})
       UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = $1, updated_at = $1
       WHERE ${pickedIds(this.sql)} AND ${rowCheck("state = 'held'")}
       RETURNING *`,
      [at, list],
    );
    return { held: await this.#withAttempts(held.sort(byId)), resumed: await this.#withAttempts(resumed.sort(byId)) };
  }

  /** Cancels these deliveries where they are pending or held; an already cancelled one is no refusal. */
  async cancel(ids: readonly number[]): Promise<Outcome> {
    const at = this.now().toISOString();
    return this.sql.transaction(async (tx) => {
      const done: DeliveryRow[] = [];
      const refused: Refusal[] = [];
      const already: number[] = [];
      for (const id of ids) {
        const row = await tx.one<DeliveryRow>(
          `UPDATE webhook_deliveries SET state = 'cancelled', next_attempt_at = NULL, updated_at = $1 WHERE id = $2 AND ${rowCheck("state IN ('pending', 'held')")} RETURNING *`,
          [at, id],
        );
        if (row) {
          done.push(row);
          continue;
        }
        const current = await tx.one<{ state: DeliveryState }>('SELECT state FROM webhook_deliveries WHERE id = $1', [id]);
        if (!current) refused.push({ id, reason: 'no such delivery' });
        else if (current.state === 'cancelled') already.push(id);
        else refused.push({ id, reason: `it is ${current.state}; only pending or held deliveries can be cancelled` });
      }
      if (done.length > 0) await this.#tell('cancelled', tx);
      return { done: await this.#withAttempts(done, tx), refused, already };
    });
  }

  /** Cancels every pending or held delivery to `url`. */
  async cancelUrl(url: string): Promise<Delivery[]> {
    const rows = await this.sql.all<DeliveryRow>(
      `UPDATE webhook_deliveries SET state = 'cancelled', next_attempt_at = NULL, updated_at = $1
       WHERE url = $2 AND state IN ('pending', 'held') RETURNING *`,
      [this.now().toISOString(), url],
    );
    if (rows.length > 0) await this.#tell('cancelled', undefined);
    return this.#withAttempts(rows.sort(byId));
  }

  /**
   * Queues each delivery again as a new pending one, due now, with a fresh
   * set of attempts: the same event and body (so the same signature under
   * the same secret), to the same URL or to `to`, and the same
   * X-Webhook-Delivery id, so a receiver that de-duplicates drops a body it
   * has already processed and processes one it never did. The delivery
   * resent keeps its state and history, except that a held one is marked
   * cancelled, or serve would also resume it once its URL is back. Refused
   * when the delivery, or an earlier resend of it, is still pending or held.
   */
  async resend(ids: readonly number[], options: { to?: string | undefined } = {}): Promise<Outcome> {
    const at = this.now().toISOString();
    const lock = lockClause(this.sql, 'wait');
    return this.sql.transaction(async (tx) => {
      const done: DeliveryRow[] = [];
      const refused: Refusal[] = [];
      for (const id of ids) {
        const source = await tx.one<DeliveryRow>(`SELECT * FROM webhook_deliveries WHERE id = $1${lock}`, [id]);
        if (!source) {
          refused.push({ id, reason: 'no such delivery' });
          continue;
        }
        if (source.state === 'pending') {
          refused.push({ id, reason: `it is still pending (next attempt ${source.next_attempt_at ?? 'now'}); cancel it first to send it anew` });
          continue;
        }
        const original = Number(source.original_id ?? source.id);
        // Resends of one delivery take turns on its first row, so two at once cannot both find the line finished.
        if (original !== Number(source.id)) await tx.one(`SELECT id FROM webhook_deliveries WHERE id = $1${lock}`, [original]);
        const open = await tx.one<{ id: number; state: DeliveryState }>(
          `SELECT id, state FROM webhook_deliveries WHERE (id = $1 OR original_id = $1) AND id != $2 AND state IN ('pending', 'held') LIMIT 1`,
          [original, id],
        );
        if (open) {
          refused.push({
            id,
            reason: `delivery ${open.id}, which sends the same X-Webhook-Delivery ${source.delivery_key ?? original}, is still ${open.state}`,
          });
          continue;
        }
        if (source.state === 'held') {
          await tx.run(`UPDATE webhook_deliveries SET state = 'cancelled', updated_at = $1 WHERE id = $2`, [at, id]);
        }
        const row = await tx.one<DeliveryRow>(
          `INSERT INTO webhook_deliveries (event, url, body, state, attempts, next_attempt_at, created_at, updated_at, original_id, delivery_key)
           VALUES ($1, $2, $3, 'pending', 0, $4, $4, $4, $5, $6) RETURNING *`,
          [source.event, options.to ?? source.url, source.body, at, original, source.delivery_key ?? newDeliveryKey(this.now())],
        );
        done.push(row!);
      }
      if (done.length > 0) await this.#tell('resent', tx);
      return { done: await this.#withAttempts(done, tx), refused };
    });
  }

  async #withAttempts(rows: DeliveryRow[], sql: Sql = this.sql): Promise<Delivery[]> {
    if (rows.length === 0) return [];
    const byDelivery = new Map<number, DeliveryAttempt[]>();
    const attempts = await sql.all<AttemptRow>(
      `SELECT delivery_id, attempted_at, status_code, error FROM webhook_attempts
       WHERE delivery_id IN (SELECT CAST(value AS BIGINT) FROM ${jsonValues(sql, '$1', 'ids')}) ORDER BY delivery_id, id`,
      [JSON.stringify(rows.map((row) => Number(row.id)))],
    );
    for (const a of attempts) {
      const id = Number(a.delivery_id);
      let list = byDelivery.get(id);
      if (!list) {
        list = [];
        byDelivery.set(id, list);
      }
      list.push({ at: a.attempted_at, statusCode: a.status_code, error: a.error });
    }
    return rows.map((row) => ({
      id: Number(row.id),
      event: row.event,
      url: row.url,
      body: row.body,
      state: row.state,
      attemptCount: Number(row.attempts),
      nextAttemptAt: row.next_attempt_at,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      originalId: row.original_id === null || row.original_id === undefined ? null : Number(row.original_id),
      key: row.delivery_key ?? null,
      attempts: byDelivery.get(Number(row.id)) ?? [],
    }));
  }
}

function whereOf(filter: Omit<ListFilter, 'limit'>): { where: string; params: Param[] } {
  const clauses: string[] = [];
  const params: Param[] = [];
  if (filter.state) {
    params.push(filter.state);
    clauses.push(`state = $${params.length}`);
  }
  if (filter.url) {
    params.push(filter.url);
    clauses.push(`url = $${params.length}`);
  }
  return { where: clauses.length ? `WHERE ${clauses.join(' AND ')}` : '', params };
}

/**
 * What follows an attempt: delivered on success; after a failure, pending
 * again 1, 5 or 30 minutes after it (by how many attempts were made), or
 * failed after the fourth.
 */
export function afterAttempt(attemptsMade: number, succeeded: boolean, at: Date): { state: DeliveryState; nextAttemptAt: string | null } {
  if (succeeded) return { state: 'delivered', nextAttemptAt: null };
  const delay = RETRY_DELAYS_MS[attemptsMade - 1];
  if (delay === undefined) return { state: 'failed', nextAttemptAt: null };
  return { state: 'pending', nextAttemptAt: new Date(at.getTime() + delay).toISOString() };
}
