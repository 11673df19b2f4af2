/**
 * The post.created webhook (spec 002, Part B "Webhook"): signing, an outbox
 * in serve's store (SQLite or PostgreSQL, one implementation over src/store/
 * sql.ts), and the dispatcher that drains it.
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
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '../errors.js';
import type { Signals } from '../store/signals.js';
import type { Param, Sql } from '../store/sql.js';

export const POST_CREATED = 'post.created';

/** The waits after the 1st, 2nd and 3rd failure; one more failure and the delivery is failed. */
export const RETRY_DELAYS_MS: readonly number[] = [60_000, 5 * 60_000, 30 * 60_000];
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

export const DEFAULT_SEND_TIMEOUT_MS = 10_000;
/** The longest the loop sleeps before it looks at the outbox again. */
export const DEFAULT_MAX_SLEEP_MS = 30_000;
/**
 * The lease of a claim: how long a claimed delivery stays out of other
 * dispatchers' reach while it is being sent. Far above the send time-out;
 * it only matters when a process dies mid-send (the delivery is then sent
 * again, by whichever instance looks first, once the lease has ended).
 */
export const DEFAULT_LEASE_MS = 2 * 60_000;
/**
 * How long a dispatcher's word that it sends to its URLs holds (see
 * `WebhookOutbox.registerSender`). It renews it three times as often, so
 * only one that died (or lost the database) lets it lapse; then the
 * deliveries to URLs no other instance has are held.
 */
export const SENDER_TTL_MS = 90_000;

// ---------------------------------------------------------------------------
// Signatures

const SIGNATURE = /^sha256=([0-9a-f]{64})$/;

function bytesOf(body: string | Buffer | Uint8Array): Buffer {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.isBuffer(body) ? body : Buffer.from(body);
}

function digest(body: string | Buffer | Uint8Array, secret: string): Buffer {
  return createHmac('sha256', secret).update(bytesOf(body)).digest();
}

/** `sha256=` and the hex HMAC-SHA256 of the body's bytes (a string is taken as UTF-8). */
export function signBody(body: string | Buffer | Uint8Array, secret: string): string {
  return `sha256=${digest(body, secret).toString('hex')}`;
}

/**
 * The 32 bytes of a `sha256=<64 hex>` signature, or undefined when it does
 * not have that shape. Upper-case hex (and prefix) and surrounding
 * whitespace are tolerated; a bare hex digest without `sha256=` is not.
 */
export function parseSignature(signature: string): Buffer | undefined {
  if (typeof signature !== 'string') return undefined;
  const match = SIGNATURE.exec(signature.trim().toLowerCase());
  return match ? Buffer.from(match[1]!, 'hex') : undefined;
}

/**
 * Whether `signature` (the X-Webhook-Signature header) was made over these
 * exact bytes with this secret. Compares in constant time; never throws.
 * Verify the raw body as received: re-serialised JSON has other bytes.
 */
export function verifySignature(body: string | Buffer | Uint8Array, secret: string, signature: string): boolean {
  try {
    const given = parseSignature(signature);
    if (!given || typeof secret !== 'string') return false;
    const expected = digest(body, secret);
    return given.length === expected.length && timingSafeEqual(given, expected);
  } catch {
    return false;
  }
}

/** Checks a webhook URL (for `serve --webhook-url`): absolute http or https. */
export function checkWebhookUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    throw new ConfigError(`a webhook URL must be absolute, such as https://hooks.example.com/blog; got "${text}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`a webhook URL must use http or https; got ${url.protocol.replace(':', '')} in "${text}"`);
  }
  if (url.username || url.password) {
    throw new ConfigError('a webhook URL must not carry credentials: receivers check the X-Webhook-Signature instead');
  }
  return url.href;
}

// ---------------------------------------------------------------------------
// The outbox

/**
 * pending: due now or at nextAttemptAt. delivered: a 2xx came back. failed: no attempts left.
 * cancelled: an operator stopped it. held: serve no longer sends to its URL; resumed when it does again.
 */
export type DeliveryState = 'pending' | 'delivered' | 'failed' | 'cancelled' | 'held';
export const DELIVERY_STATES: readonly DeliveryState[] = ['pending', 'delivered', 'failed', 'cancelled', 'held'];
/** States a delivery can be cancelled from: it has not been finished. */
export const CANCELLABLE: readonly DeliveryState[] = ['pending', 'held'];
/** States a delivery can be resent from: nothing will send it otherwise (a held one waits for its URL). */
export const RESENDABLE: readonly DeliveryState[] = ['delivered', 'failed', 'cancelled', 'held'];

export interface DeliveryAttempt {
  /** When the request was started (ISO 8601). */
  at: string;
  /** The receiver's HTTP status, or null when none came back. */
  statusCode: number | null;
  /** Why no status came back (network error, time-out), else null. */
  error: string | null;
}

export interface Delivery {
  id: number;
  event: string;
  url: string;
  /** The exact bytes sent (UTF-8), identical on every attempt. */
  body: string;
  state: DeliveryState;
  /** How many attempts were made; equals `attempts.length`. */
  attemptCount: number;
  /** When the next attempt is due (ISO 8601); null unless pending. */
  nextAttemptAt: string | null;
  createdAt: string;
  updatedAt: string;
  /** For a resend, the delivery it repeats (the first of the line), whose id it sends as X-Webhook-Delivery; else null. */
  originalId: number | null;
  /** Oldest first. */
  attempts: DeliveryAttempt[];
}

/** The X-Webhook-Delivery of a delivery: the same for every attempt and every resend of it. */
export function deliveryKey(delivery: Pick<Delivery, 'id'> & { originalId?: number | null | undefined }): number {
  return delivery.originalId ?? delivery.id;
}

/** The spec's webhook payload: event, timestamp (ISO 8601) and data (a PostSchema for post.created). */
export interface WebhookPayload<T = unknown> {
  event: string;
  timestamp: string;
  data: T;
}

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
}

interface AttemptRow {
  delivery_id: number;
  attempted_at: string;
  status_code: number | null;
  error: string | null;
}

export interface ListFilter {
  state?: DeliveryState | undefined;
  url?: string | undefined;
  /** Only the most recent N (still listed oldest first). */
  limit?: number | undefined;
}

/** Why a delivery was left as it was by `cancel` or `resend`. */
export interface Refusal {
  id: number;
  reason: string;
}

export interface Outcome {
  /** The deliveries cancelled, or the new deliveries queued by a resend. */
  done: Delivery[];
  refused: Refusal[];
}

/** What the outbox needs of a store (src/store/store.ts): its queries, and the signals that wake every instance's dispatcher. */
export interface OutboxStore {
  readonly sql: Sql;
  readonly signals?: Signals | undefined;
}

/** The channel on which the outbox tells the dispatchers of every instance that there is something new to look at. */
export const OUTBOX_CHANNEL = 'webhook_outbox';

/** A delivery taken for one attempt, and the number of that claim, which its outcome is recorded against. */
export interface Claim {
  delivery: Delivery;
  claim: number;
}

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
function lockClause(sql: Sql, mode: 'skip' | 'wait'): string {
  if (sql.dialect !== 'postgres') return '';
  return mode === 'skip' ? ' FOR UPDATE SKIP LOCKED' : ' FOR UPDATE';
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
   * commits.
   */
  async enqueue(event: string, data: unknown, urls: readonly string[], tx?: Sql): Promise<number[]> {
    if (urls.length === 0) return [];
    const sql = tx ?? this.sql;
    const at = this.now().toISOString();
    const payload: WebhookPayload = { event, timestamp: at, data };
    // JSON.stringify escapes lone surrogates, so the text is valid UTF-8 and round-trips through either database exactly.
    const body = JSON.stringify(payload);
    const values = urls.map((_, i) => `($1, $${i + 4}, $2, 'pending', 0, $3, $3, $3)`).join(', ');
    const rows = await sql.all<{ id: number }>(
      `INSERT INTO webhook_deliveries (event, url, body, state, attempts, next_attempt_at, created_at, updated_at) VALUES ${values} RETURNING id`,
      [event, body, at, ...urls],
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
  async #tell(what: 'enqueued' | 'resent' | 'cancelled', tx: Sql | undefined): Promise<void> {
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
    const limit = filter.limit === undefined ? '' : ` LIMIT $${params.length + 1}`;
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
    const only = urls === undefined ? '' : ` AND url IN (SELECT value FROM ${jsonValues(this.sql, '$1', 'wanted')})`;
    const row = await this.sql.one<{ at: string | null }>(
      `SELECT min(next_attempt_at) AS at FROM webhook_deliveries WHERE state = 'pending'${only}`,
      urls === undefined ? [] : [JSON.stringify(urls)],
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
   */
  async claim(now: Date, until: Date, urls?: readonly string[]): Promise<Claim | undefined> {
    const only = urls === undefined ? '' : ` AND url IN (SELECT value FROM ${jsonValues(this.sql, '$3', 'wanted')})`;
    const row = await this.sql.one<DeliveryRow & { claims: number }>(
      `WITH picked AS MATERIALIZED (SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= $2${only}
                                    ORDER BY next_attempt_at, id LIMIT 1${lockClause(this.sql, 'skip')})
       UPDATE webhook_deliveries SET next_attempt_at = $1, updated_at = $2, claims = claims + 1
       WHERE id IN (SELECT id FROM picked) AND state = 'pending' AND next_attempt_at <= $2
       RETURNING *`,
      urls === undefined ? [until.toISOString(), now.toISOString()] : [until.toISOString(), now.toISOString(), JSON.stringify(urls)],
    );
    if (!row) return undefined;
    return { delivery: (await this.#withAttempts([row]))[0]!, claim: Number(row.claims) };
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
    const skip = lockClause(this.sql, 'skip');
    const held = await this.sql.all<DeliveryRow>(
      `WITH picked AS MATERIALIZED (
         SELECT id FROM webhook_deliveries WHERE state = 'pending'
           AND url NOT IN (SELECT value FROM ${jsonValues(this.sql, '$2', 'mine')})
           AND url NOT IN (SELECT sent.value FROM webhook_senders, ${jsonValues(this.sql, 'webhook_senders.urls', 'sent')}
                           WHERE webhook_senders.expires_at > $1)${skip})
       UPDATE webhook_deliveries SET state = 'held', next_attempt_at = NULL, updated_at = $1
       WHERE id IN (SELECT id FROM picked) AND state = 'pending'
       RETURNING *`,
      [at, list],
    );
    const resumed = await this.sql.all<DeliveryRow>(
      `WITH picked AS MATERIALIZED (
         SELECT id FROM webhook_deliveries WHERE state = 'held' AND url IN (SELECT value FROM ${jsonValues(this.sql, '$2', 'mine')})${skip})
       UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = $1, updated_at = $1
       WHERE id IN (SELECT id FROM picked) AND state = 'held'
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
      for (const id of ids) {
        const row = await tx.one<DeliveryRow>(
          `UPDATE webhook_deliveries SET state = 'cancelled', next_attempt_at = NULL, updated_at = $1 WHERE id = $2 AND state IN ('pending', 'held') RETURNING *`,
          [at, id],
        );
        if (row) {
          done.push(row);
          continue;
        }
        const current = await tx.one<{ state: DeliveryState }>('SELECT state FROM webhook_deliveries WHERE id = $1', [id]);
        if (!current) refused.push({ id, reason: 'no such delivery' });
        else if (current.state !== 'cancelled') refused.push({ id, reason: `it is ${current.state}; only pending or held deliveries can be cancelled` });
      }
      if (done.length > 0) await this.#tell('cancelled', tx);
      return { done: await this.#withAttempts(done, tx), refused };
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
          refused.push({ id, reason: `delivery ${open.id}, which sends the same X-Webhook-Delivery ${original}, is still ${open.state}` });
          continue;
        }
        if (source.state === 'held') {
          await tx.run(`UPDATE webhook_deliveries SET state = 'cancelled', updated_at = $1 WHERE id = $2`, [at, id]);
        }
        const row = await tx.one<DeliveryRow>(
          `INSERT INTO webhook_deliveries (event, url, body, state, attempts, next_attempt_at, created_at, updated_at, original_id)
           VALUES ($1, $2, $3, 'pending', 0, $4, $4, $4, $5) RETURNING *`,
          [source.event, options.to ?? source.url, source.body, at, original],
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
      if (!list) byDelivery.set(id, (list = []));
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

// ---------------------------------------------------------------------------
// The dispatcher

export type SendWebhook = (url: string, headers: Record<string, string>, body: string) => Promise<{ status: number }>;

export interface Timers {
  setTimeout: (callback: () => void, ms: number) => unknown;
  clearTimeout: (handle: unknown) => void;
}

/** What an attempt led to: delivered, another attempt scheduled, or no attempts left. */
export type AttemptOutcome = 'delivered' | 'retry_scheduled' | 'failed';

export interface WebhookAttempt {
  event: string;
  outcome: AttemptOutcome;
  /** How long the request took, answered or not. */
  seconds: number;
}

export type WebhookAttemptObserver = (attempt: WebhookAttempt) => void;

// An attempt that failed at a delivery cancelled (or held) meanwhile is its last one: to a dashboard, a failure.
const OUTCOMES: Readonly<Record<DeliveryState, AttemptOutcome>> = {
  delivered: 'delivered',
  pending: 'retry_scheduled',
  failed: 'failed',
  cancelled: 'failed',
  held: 'failed',
};

/** Pino-shaped, so that serve can pass its Fastify logger (`app.log`). */
export interface WebhookLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface DispatcherOptions {
  /** The outbox, or the store to build one over (with `now`). */
  outbox?: WebhookOutbox;
  store?: OutboxStore;
  /** The HMAC key the receivers share. */
  secret: string;
  /**
   * The URLs serve sends to. Pending deliveries to a URL that neither this
   * list nor another running instance has (one dropped from serve's flags)
   * are held rather than retried, and held ones to these URLs resume.
   * Undefined: every URL is sent to, and nothing is held.
   */
  urls?: readonly string[] | undefined;
  now: () => Date;
  /** miniapp's version, for the user-agent. */
  version: string;
  /** How a request goes out; default: undici with `timeoutMs`. */
  send?: SendWebhook;
  /** Time-out of the default sender (default 10 s). */
  timeoutMs?: number;
  /** The loop's timers (default: the global ones, unref'd). */
  timers?: Timers;
  /** The longest the loop sleeps between looks at the outbox (default 30 s). */
  maxSleepMs?: number;
  /** See DEFAULT_LEASE_MS. */
  leaseMs?: number;
  /** Deliveries sent at once by one run (default 4). */
  concurrency?: number;
  log?: WebhookLog;
  /** Told about every recorded attempt (serve counts them). */
  observe?: WebhookAttemptObserver | undefined;
}

const quiet: WebhookLog = { info() {}, warn() {}, error() {} };

const defaultTimers: Timers = {
  setTimeout: (callback, ms) => {
    const handle = setTimeout(callback, ms);
    // The dispatcher never keeps the process alive on its own: the server does.
    handle.unref();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** The default sender: undici, the body as given, no redirects followed, `timeoutMs` for the whole exchange. */
export function undiciSender(timeoutMs = DEFAULT_SEND_TIMEOUT_MS): SendWebhook {
  return async (url, headers, body) => {
    const { request } = await import('undici');
    const response = await request(url, {
      method: 'POST',
      headers,
      body: Buffer.from(body, 'utf8'),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    // The receiver's answer is not used; read (a bounded part of) it so the connection can be reused.
    await response.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
    return { status: response.statusCode };
  };
}

/** A short reason for a failed request, with the error code when there is one; never the body. */
export function describeSendError(error: unknown, timeoutMs: number): string {
  const chain: (Error & { code?: string })[] = [];
  let current: unknown = error;
  while (current instanceof Error && chain.length < 6) {
    chain.push(current as Error & { code?: string });
    current = (current as { cause?: unknown }).cause;
  }
  if (chain.length === 0) return String(error);
  const codes = chain.map((e) => e.code).filter((c): c is string => typeof c === 'string');
  if (chain.some((e) => e.name === 'TimeoutError') || codes.some((c) => /TIMEOUT|ETIMEDOUT/.test(c))) {
    return `no answer within ${timeoutMs / 1000} s`;
  }
  const deepest = chain.at(-1)!;
  const code = codes.at(-1);
  return code && !deepest.message.includes(code) ? `${code}: ${deepest.message}` : deepest.message || deepest.name;
}

/**
 * Drains the outbox: `runDue()` makes one attempt at every due delivery;
 * `start()` keeps doing that, sleeping until the next one is due (at most
 * `maxSleepMs`), and wakes at once when `notify()` is called or any
 * instance sharing the store enqueues, resends or cancels (the store's
 * signals: an in-process emitter for SQLite, LISTEN/NOTIFY for PostgreSQL).
 *
 * Every instance runs one; they share the outbox through claims (see
 * `WebhookOutbox.claim`): a delivery is sent by one dispatcher at a time,
 * under a lease of `leaseMs`.
 *
 * At-least-once: an attempt is recorded only after the receiver answered
 * (or failed to). If the process dies mid-send, the delivery stays pending
 * with no attempt recorded and is sent again, by any instance, once its
 * lease has ended, so a receiver may see a body twice; receivers
 * deduplicate by X-Webhook-Delivery, which is the same on every attempt.
 */
export class WebhookDispatcher {
  readonly outbox: WebhookOutbox;
  readonly #secret: string;
  readonly #now: () => Date;
  readonly #send: SendWebhook;
  readonly #timers: Timers;
  readonly #maxSleepMs: number;
  readonly #leaseMs: number;
  readonly #concurrency: number;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  readonly #log: WebhookLog;
  readonly #observe: WebhookAttemptObserver | undefined;
  readonly #urls: readonly string[] | undefined;
  /** This dispatcher among the senders of the store. */
  readonly #senderId = randomUUID();
  /** When the word must be renewed (epoch ms); undefined while this dispatcher is not among the senders. */
  #renewAt: number | undefined;

  /** The run in progress (runs never overlap within a dispatcher). */
  #run: Promise<number> | undefined;
  #loop: Promise<void> | undefined;
  #listening: Promise<void> | undefined;
  #unlisten: (() => Promise<void>) | undefined;
  #stopping = false;
  /** Set by notify(): look again before sleeping. */
  #poked = false;
  #wake: (() => void) | undefined;

  constructor(options: DispatcherOptions) {
    if (!options.outbox && !options.store) throw new TypeError('WebhookDispatcher needs an outbox or a store');
    if (!options.secret) {
      throw new ConfigError('the webhook secret is empty: receivers could not verify X-Webhook-Signature', {
        hint: 'set --webhook-secret or MINIAPP_WEBHOOK_SECRET',
      });
    }
    this.outbox = options.outbox ?? new WebhookOutbox(options.store!, options.now);
    this.#secret = options.secret;
    this.#now = options.now;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
    this.#send = options.send ?? undiciSender(this.#timeoutMs);
    this.#timers = options.timers ?? defaultTimers;
    this.#maxSleepMs = options.maxSleepMs ?? DEFAULT_MAX_SLEEP_MS;
    this.#leaseMs = Math.max(1, options.leaseMs ?? DEFAULT_LEASE_MS);
    this.#concurrency = Math.max(1, Math.floor(options.concurrency ?? 4));
    this.#userAgent = `miniapp-webhooks/${options.version}`;
    this.#log = options.log ?? quiet;
    this.#observe = options.observe;
    this.#urls = options.urls === undefined ? undefined : [...new Set(options.urls)];
  }

  /** The headers of one delivery: its event, its signature over the stored body, its id. */
  headersFor(delivery: Pick<Delivery, 'id' | 'event' | 'body'> & Partial<Pick<Delivery, 'originalId'>>): Record<string, string> {
    return {
      'content-type': 'application/json',
      'user-agent': this.#userAgent,
      'x-webhook-event': delivery.event,
      'x-webhook-signature': signBody(delivery.body, this.#secret),
      'x-webhook-delivery': String(deliveryKey(delivery)),
    };
  }

  /**
   * Makes one attempt at every delivery due now (that another dispatcher
   * has not claimed) and resolves with how many were attempted. A call
   * while a run is in progress waits for it, then runs again (so what was
   * enqueued meanwhile is not missed).
   */
  runDue(): Promise<number> {
    const previous = this.#run ?? Promise.resolve(0);
    const run = previous.catch(() => 0).then(() => this.#runOnce());
    this.#run = run;
    const clear = () => {
      if (this.#run === run) this.#run = undefined;
    };
    run.then(clear, clear);
    return run;
  }

  async #runOnce(): Promise<number> {
    if (this.#urls) await this.#holdOthers(this.#urls);
    // Each hand claims one delivery, sends it, records it, and claims the next; a hand that finds work calls
    // another (up to `concurrency`), so an empty outbox costs one query and a lease starts when sending does.
    let attempted = 0;
    let drained = false;
    const failures: unknown[] = [];
    const hands = new Set<Promise<void>>();
    const work = async (): Promise<void> => {
      while (!drained) {
        const claimed = await this.#claim();
        if (!claimed) {
          drained = true;
          return;
        }
        if (hands.size < this.#concurrency) hand();
        await this.#attempt(claimed);
        attempted++;
      }
    };
    const hand = () => {
      const running: Promise<void> = work()
        .catch((problem: unknown) => {
          failures.push(problem);
          drained = true;
        })
        .finally(() => hands.delete(running));
      hands.add(running);
    };
    hand();
    while (hands.size > 0) await Promise.all(hands);
    if (failures.length > 0) throw failures[0];
    return attempted;
  }

  #claim(): Promise<Claim | undefined> {
    const now = this.#now();
    return this.outbox.claim(now, new Date(now.getTime() + this.#leaseMs), this.#urls);
  }

  async #holdOthers(urls: readonly string[]): Promise<void> {
    const now = this.#now().getTime();
    if (this.#renewAt === undefined || now >= this.#renewAt) {
      await this.outbox.registerSender(this.#senderId, urls, SENDER_TTL_MS);
      this.#renewAt = now + SENDER_TTL_MS / 3;
    }
    const { held, resumed } = await this.outbox.holdOthers(urls);
    const byUrl = (deliveries: Delivery[]) => [...new Set(deliveries.map((d) => d.url))];
    if (held.length > 0) {
      this.#log.warn(
        { deliveryIds: held.map((d) => d.id), urls: byUrl(held) },
        `holding ${held.length} webhook deliver${held.length === 1 ? 'y' : 'ies'} to URLs no running serve sends to; resend or cancel them with \`miniapp webhooks\``,
      );
    }
    if (resumed.length > 0) {
      this.#log.info({ deliveryIds: resumed.map((d) => d.id), urls: byUrl(resumed) }, `resuming ${resumed.length} held webhook deliver${resumed.length === 1 ? 'y' : 'ies'}`);
    }
  }

  async #attempt({ delivery, claim }: Claim): Promise<void> {
    const started = this.#now();
    let statusCode: number | null = null;
    let error: string | null = null;
    // A monotonic clock for the duration: `now` may be a test's fixed or stepped clock.
    const sendStarted = performance.now();
    try {
      statusCode = (await this.#send(delivery.url, this.headersFor(delivery), delivery.body)).status;
    } catch (problem) {
      error = describeSendError(problem, this.#timeoutMs);
    }
    const seconds = (performance.now() - sendStarted) / 1000;
    const finished = this.#now();
    const succeeded = statusCode !== null && statusCode >= 200 && statusCode < 300;
    const attemptsMade = delivery.attemptCount + 1;
    const next = afterAttempt(attemptsMade, succeeded, finished);
    const state = await this.outbox.recordAttempt({ id: delivery.id, claim }, { at: started.toISOString(), statusCode, error }, { ...next, at: finished.toISOString() });
    this.#observe?.({ event: delivery.event, outcome: OUTCOMES[state], seconds });
    const fields = { deliveryId: delivery.id, event: delivery.event, url: delivery.url, attempt: attemptsMade, statusCode, error };
    if (state === 'delivered') this.#log.info(fields, 'webhook delivered');
    else if (state === 'failed') this.#log.error(fields, `webhook failed after ${attemptsMade} attempts; giving up`);
    else if (state === 'pending') this.#log.warn({ ...fields, nextAttemptAt: next.nextAttemptAt }, 'webhook attempt failed; will retry');
    else this.#log.warn(fields, `webhook attempt failed; the delivery was ${state} meanwhile, so no retry`);
  }

  /** Whether the loop is running. */
  get running(): boolean {
    return this.#loop !== undefined;
  }

  /**
   * Starts the loop (once): due deliveries, including those left by an
   * earlier process, go out at once. Resolves when the dispatcher hears
   * the other instances (or knows it cannot, and polls).
   */
  async start(): Promise<void> {
    if (!this.#loop) {
      this.#stopping = false;
      const listening = this.#listen();
      this.#listening = listening;
      // Listening first: what is enqueued between the loop's first look and the subscription is not missed.
      this.#loop = listening.then(() => this.#runLoop());
    }
    await this.#listening;
  }

  async #listen(): Promise<void> {
    try {
      this.#unlisten = await this.outbox.listen(() => this.notify());
    } catch (problem) {
      this.#log.warn({ error: (problem as Error).message }, `cannot hear the other instances; looking at the outbox every ${this.#maxSleepMs / 1000} s instead`);
    }
  }

  /** Says that something was enqueued: the loop looks at the outbox now instead of when it would wake. */
  notify(): void {
    this.#poked = true;
    this.#wake?.();
  }

  /** Stops the loop, waits for the attempts in flight to be recorded, and leaves the senders. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#wake?.();
    await this.#loop;
    await this.#run?.catch(() => 0);
    const unlisten = this.#unlisten;
    this.#unlisten = undefined;
    await unlisten?.();
    if (this.#renewAt !== undefined) {
      this.#renewAt = undefined;
      // Failing that (the database is away), the word lapses by itself.
      await this.outbox.removeSender(this.#senderId).catch(() => undefined);
    }
    this.#loop = undefined;
    this.#listening = undefined;
  }

  async #runLoop(): Promise<void> {
    while (!this.#stopping) {
      this.#poked = false;
      try {
        await this.runDue();
      } catch (problem) {
        this.#log.error({ error: (problem as Error).message }, 'webhook dispatch failed; will look again');
      }
      if (this.#stopping) break;
      if (this.#poked) continue;
      const ms = await this.#sleepMs();
      if (this.#stopping) break;
      if (this.#poked) continue;
      await this.#sleep(ms);
    }
  }

  async #sleepMs(): Promise<number> {
    let dueAt: Date | undefined;
    try {
      // Only what this dispatcher may send: a delivery to another instance's URL is that instance's to wake for.
      dueAt = await this.outbox.nextDueAt(this.#urls);
    } catch {
      dueAt = undefined;
    }
    // The senders' list is renewed before its word lapses, even when nothing is due.
    const limit = this.#renewAt === undefined ? this.#maxSleepMs : Math.min(this.#maxSleepMs, Math.max(0, this.#renewAt - this.#now().getTime()));
    if (!dueAt) return limit;
    return Math.min(limit, Math.max(0, dueAt.getTime() - this.#now().getTime()));
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      let handle: unknown;
      const done = () => {
        this.#timers.clearTimeout(handle);
        this.#wake = undefined;
        resolve();
      };
      this.#wake = done;
      handle = this.#timers.setTimeout(done, ms);
    });
  }
}
