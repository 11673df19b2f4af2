/**
 * The post.created webhook (spec 002, Part B "Webhook"): signing, an outbox
 * in SQLite, and the dispatcher that drains it.
 *
 * Delivery is at-least-once. A payload is serialised once, when it is
 * enqueued, and those exact bytes are stored and sent on every attempt, so a
 * retry carries the same body and the same signature. A 2xx answer delivers
 * it; anything else (another status, a network error, a time-out) is retried
 * 1, 5 and 30 minutes after the failed attempt; a fourth failure marks the
 * delivery failed. The schedule lives in the database, so a restart resumes
 * it where it was: what is overdue goes out at once, the rest on time.
 *
 * A dispatcher told which URLs serve sends to holds the pending deliveries
 * to any other URL (state `held`, not attempted) instead of retrying them
 * for ever, and resumes them when serve has their URL again. An operator
 * cancels pending or held deliveries, and resends any finished one as a new
 * delivery with the same body and the same X-Webhook-Delivery id (see
 * `resend`). All of it is plain SQL on the shared database, safe while
 * serve runs: a cancelled delivery is never claimed, and an attempt already
 * in flight when it was cancelled is recorded without undoing the cancel.
 *
 * Domain module: it never prints and never reads process.env.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '../errors.js';
import type { Db } from '../store/database.js';

export const POST_CREATED = 'post.created';

/** The waits after the 1st, 2nd and 3rd failure; one more failure and the delivery is failed. */
export const RETRY_DELAYS_MS: readonly number[] = [60_000, 5 * 60_000, 30 * 60_000];
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

export const DEFAULT_SEND_TIMEOUT_MS = 10_000;
/** The longest the loop sleeps before it looks at the outbox again. */
export const DEFAULT_MAX_SLEEP_MS = 30_000;
/**
 * How long a claimed delivery stays out of other dispatchers' reach while it
 * is being sent. Far above the send time-out; it only matters when two
 * processes share a database, or when a process dies mid-send (the delivery
 * is then retried once the claim lapses).
 */
export const DEFAULT_CLAIM_MS = 2 * 60_000;

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

export class WebhookOutbox {
  constructor(
    readonly db: Db,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /**
   * Queues one delivery of `event` per URL, due now, and returns their ids.
   * The payload is built and serialised once, so every URL gets the same
   * bytes. All rows or none: when called inside the caller's transaction
   * (creating the post), it joins it, so a post is never committed without
   * its deliveries. Call the dispatcher's `notify()` after the commit.
   */
  enqueue(event: string, data: unknown, urls: readonly string[]): number[] {
    if (urls.length === 0) return [];
    const at = this.now().toISOString();
    const payload: WebhookPayload = { event, timestamp: at, data };
    // JSON.stringify escapes lone surrogates, so the text is valid UTF-8 and round-trips through SQLite exactly.
    const body = JSON.stringify(payload);
    const insert = this.db.prepare(
      `INSERT INTO webhook_deliveries (event, url, body, state, attempts, next_attempt_at, created_at, updated_at)
       VALUES (?, ?, ?, 'pending', 0, ?, ?, ?)`,
    );
    return this.db.transaction(() => urls.map((url) => Number(insert.run(event, url, body, at, at, at).lastInsertRowid)))();
  }

  /** Deliveries with their attempts, oldest first (by id), like `callbacks list`; with a limit, the most recent ones. */
  list(filter: ListFilter = {}): Delivery[] {
    const { where, params } = whereOf(filter);
    const newest = `SELECT * FROM webhook_deliveries ${where} ORDER BY id DESC${filter.limit === undefined ? '' : ' LIMIT ?'}`;
    const rows = this.db.prepare(`SELECT * FROM (${newest}) ORDER BY id`).all(...params, ...(filter.limit === undefined ? [] : [filter.limit])) as DeliveryRow[];
    return this.#withAttempts(rows);
  }

  /** How many deliveries match, whatever the limit. */
  count(filter: Omit<ListFilter, 'limit'> = {}): number {
    const { where, params } = whereOf(filter);
    return (this.db.prepare(`SELECT count(*) AS n FROM webhook_deliveries ${where}`).get(...params) as { n: number }).n;
  }

  get(id: number): Delivery | undefined {
    const row = this.db.prepare('SELECT * FROM webhook_deliveries WHERE id = ?').get(id) as DeliveryRow | undefined;
    return row ? this.#withAttempts([row])[0] : undefined;
  }

  /** Pending deliveries whose next attempt is due at `now`, the most overdue first. */
  due(now: Date): Delivery[] {
    return this.#withAttempts(
      this.db
        .prepare(`SELECT * FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at, id`)
        .all(now.toISOString()) as DeliveryRow[],
    );
  }

  /** How many deliveries are pending: due now, or waiting for a retry. */
  pendingCount(): number {
    return (this.db.prepare(`SELECT count(*) AS n FROM webhook_deliveries WHERE state = 'pending'`).get() as { n: number }).n;
  }

  /** When the earliest pending delivery is due, or undefined when none is pending. */
  nextDueAt(): Date | undefined {
    const row = this.db.prepare(`SELECT min(next_attempt_at) AS at FROM webhook_deliveries WHERE state = 'pending'`).get() as {
      at: string | null;
    };
    return row.at === null ? undefined : new Date(row.at);
  }

  /**
   * Takes a due delivery for one attempt by moving its next attempt to
   * `until`, if it is still pending and still due at `expectedNextAt`
   * (compare-and-set). False when another dispatcher took it first.
   */
  claim(id: number, expectedNextAt: string, until: Date, now: Date): boolean {
    return (
      this.db
        .prepare(`UPDATE webhook_deliveries SET next_attempt_at = ?, updated_at = ? WHERE id = ? AND state = 'pending' AND next_attempt_at = ?`)
        .run(until.toISOString(), now.toISOString(), id, expectedNextAt).changes === 1
    );
  }

  /**
   * Records one attempt and the delivery's new state, together, and returns
   * that state. A delivery cancelled while the attempt was in flight stays
   * cancelled, unless the attempt delivered it: the receiver has it, and
   * the list should say so.
   */
  recordAttempt(id: number, attempt: DeliveryAttempt, next: { state: DeliveryState; nextAttemptAt: string | null; at: string }): DeliveryState {
    return this.db.transaction(() => {
      this.db
        .prepare('INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error) VALUES (?, ?, ?, ?)')
        .run(id, attempt.at, attempt.statusCode, attempt.error);
      const row = this.db
        .prepare(
          `UPDATE webhook_deliveries SET attempts = attempts + 1,
             state = CASE WHEN state = 'pending' OR ? = 'delivered' THEN ? ELSE state END,
             next_attempt_at = CASE WHEN state = 'pending' OR ? = 'delivered' THEN ? ELSE NULL END,
             updated_at = ?
           WHERE id = ? RETURNING state`,
        )
        .get(next.state, next.state, next.state, next.nextAttemptAt, next.at, id) as { state: DeliveryState } | undefined;
      return row?.state ?? next.state;
    })();
  }

  /**
   * Holds the pending deliveries to URLs outside `urls` and resumes (due
   * now, the attempts made so far still counted) the held ones to URLs in
   * it. Returns what moved, for serve's log.
   */
  holdOthers(urls: readonly string[]): { held: Delivery[]; resumed: Delivery[] } {
    const at = this.now().toISOString();
    const list = JSON.stringify(urls);
    return this.db.transaction(() => {
      const held = this.db
        .prepare(
          `UPDATE webhook_deliveries SET state = 'held', next_attempt_at = NULL, updated_at = ?
           WHERE state = 'pending' AND url NOT IN (SELECT value FROM json_each(?)) RETURNING *`,
        )
        .all(at, list) as DeliveryRow[];
      const resumed = this.db
        .prepare(
          `UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = ?, updated_at = ?
           WHERE state = 'held' AND url IN (SELECT value FROM json_each(?)) RETURNING *`,
        )
        .all(at, at, list) as DeliveryRow[];
      return { held: this.#withAttempts(held), resumed: this.#withAttempts(resumed) };
    })();
  }

  /** Cancels these deliveries where they are pending or held; an already cancelled one is no refusal. */
  cancel(ids: readonly number[]): Outcome {
    const at = this.now().toISOString();
    const update = this.db.prepare(
      `UPDATE webhook_deliveries SET state = 'cancelled', next_attempt_at = NULL, updated_at = ? WHERE id = ? AND state IN ('pending', 'held') RETURNING *`,
    );
    return this.db.transaction(() => {
      const done: DeliveryRow[] = [];
      const refused: Refusal[] = [];
      for (const id of ids) {
        const row = update.get(at, id) as DeliveryRow | undefined;
        if (row) {
          done.push(row);
          continue;
        }
        const current = this.db.prepare('SELECT state FROM webhook_deliveries WHERE id = ?').get(id) as { state: DeliveryState } | undefined;
        if (!current) refused.push({ id, reason: 'no such delivery' });
        else if (current.state !== 'cancelled') refused.push({ id, reason: `it is ${current.state}; only pending or held deliveries can be cancelled` });
      }
      return { done: this.#withAttempts(done), refused };
    })();
  }

  /** Cancels every pending or held delivery to `url`. */
  cancelUrl(url: string): Delivery[] {
    const rows = this.db
      .prepare(
        `UPDATE webhook_deliveries SET state = 'cancelled', next_attempt_at = NULL, updated_at = ?
         WHERE url = ? AND state IN ('pending', 'held') RETURNING *`,
      )
      .all(this.now().toISOString(), url) as DeliveryRow[];
    return this.#withAttempts(rows.sort((a, b) => a.id - b.id));
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
  resend(ids: readonly number[], options: { to?: string | undefined } = {}): Outcome {
    const at = this.now().toISOString();
    return this.db.transaction(() => {
      const done: DeliveryRow[] = [];
      const refused: Refusal[] = [];
      for (const id of ids) {
        const source = this.db.prepare('SELECT * FROM webhook_deliveries WHERE id = ?').get(id) as DeliveryRow | undefined;
        if (!source) {
          refused.push({ id, reason: 'no such delivery' });
          continue;
        }
        if (source.state === 'pending') {
          refused.push({ id, reason: `it is still pending (next attempt ${source.next_attempt_at ?? 'now'}); cancel it first to send it anew` });
          continue;
        }
        const original = source.original_id ?? source.id;
        const open = this.db
          .prepare(`SELECT id, state FROM webhook_deliveries WHERE (id = ? OR original_id = ?) AND id != ? AND state IN ('pending', 'held') LIMIT 1`)
          .get(original, original, id) as { id: number; state: DeliveryState } | undefined;
        if (open) {
          refused.push({ id, reason: `delivery ${open.id}, which sends the same X-Webhook-Delivery ${original}, is still ${open.state}` });
          continue;
        }
        if (source.state === 'held') {
          this.db.prepare(`UPDATE webhook_deliveries SET state = 'cancelled', updated_at = ? WHERE id = ?`).run(at, id);
        }
        done.push(
          this.db
            .prepare(
              `INSERT INTO webhook_deliveries (event, url, body, state, attempts, next_attempt_at, created_at, updated_at, original_id)
               VALUES (?, ?, ?, 'pending', 0, ?, ?, ?, ?) RETURNING *`,
            )
            .get(source.event, options.to ?? source.url, source.body, at, at, at, original) as DeliveryRow,
        );
      }
      return { done: this.#withAttempts(done), refused };
    })();
  }

  #withAttempts(rows: DeliveryRow[]): Delivery[] {
    if (rows.length === 0) return [];
    const byId = new Map<number, DeliveryAttempt[]>();
    const attempts = this.db
      .prepare(
        `SELECT delivery_id, attempted_at, status_code, error FROM webhook_attempts
         WHERE delivery_id IN (SELECT value FROM json_each(?)) ORDER BY delivery_id, id`,
      )
      .all(JSON.stringify(rows.map((row) => row.id))) as AttemptRow[];
    for (const a of attempts) {
      let list = byId.get(a.delivery_id);
      if (!list) byId.set(a.delivery_id, (list = []));
      list.push({ at: a.attempted_at, statusCode: a.status_code, error: a.error });
    }
    return rows.map((row) => ({
      id: row.id,
      event: row.event,
      url: row.url,
      body: row.body,
      state: row.state,
      attemptCount: row.attempts,
      nextAttemptAt: row.next_attempt_at,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      originalId: row.original_id ?? null,
      attempts: byId.get(row.id) ?? [],
    }));
  }
}

function whereOf(filter: Omit<ListFilter, 'limit'>): { where: string; params: unknown[] } {
  const clauses: string[] = [];
  const params: unknown[] = [];
  if (filter.state) {
    clauses.push('state = ?');
    params.push(filter.state);
  }
  if (filter.url) {
    clauses.push('url = ?');
    params.push(filter.url);
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
  /** The outbox, or the database to build one over (with `now`). */
  outbox?: WebhookOutbox;
  db?: Db;
  /** The HMAC key the receivers share. */
  secret: string;
  /**
   * The URLs serve sends to. Pending deliveries to any other URL (one
   * dropped from serve's flags) are held rather than retried, and held
   * ones to these URLs resume. Undefined: every URL is sent to.
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
  /** See DEFAULT_CLAIM_MS. */
  claimMs?: number;
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
 * `maxSleepMs`, and less when `notify()` says something was enqueued).
 *
 * At-least-once: an attempt is recorded only after the receiver answered
 * (or failed to). If the process dies mid-send, the delivery stays pending
 * with no attempt recorded and is sent again after a restart, once its claim
 * (DEFAULT_CLAIM_MS) has lapsed, so a receiver may see a body twice;
 * receivers deduplicate by X-Webhook-Delivery.
 */
export class WebhookDispatcher {
  readonly outbox: WebhookOutbox;
  readonly #secret: string;
  readonly #now: () => Date;
  readonly #send: SendWebhook;
  readonly #timers: Timers;
  readonly #maxSleepMs: number;
  readonly #claimMs: number;
  readonly #concurrency: number;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  readonly #log: WebhookLog;
  readonly #observe: WebhookAttemptObserver | undefined;
  readonly #urls: ReadonlySet<string> | undefined;

  /** The run in progress (runs never overlap within a dispatcher). */
  #run: Promise<number> | undefined;
  #loop: Promise<void> | undefined;
  #stopping = false;
  /** Set by notify(): look again before sleeping. */
  #poked = false;
  #wake: (() => void) | undefined;

  constructor(options: DispatcherOptions) {
    if (!options.outbox && !options.db) throw new TypeError('WebhookDispatcher needs an outbox or a db');
    if (!options.secret) {
      throw new ConfigError('the webhook secret is empty: receivers could not verify X-Webhook-Signature', {
        hint: 'set --webhook-secret or MINIAPP_WEBHOOK_SECRET',
      });
    }
    this.outbox = options.outbox ?? new WebhookOutbox(options.db!, options.now);
    this.#secret = options.secret;
    this.#now = options.now;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
    this.#send = options.send ?? undiciSender(this.#timeoutMs);
    this.#timers = options.timers ?? defaultTimers;
    this.#maxSleepMs = options.maxSleepMs ?? DEFAULT_MAX_SLEEP_MS;
    this.#claimMs = options.claimMs ?? DEFAULT_CLAIM_MS;
    this.#concurrency = Math.max(1, Math.floor(options.concurrency ?? 4));
    this.#userAgent = `miniapp-webhooks/${options.version}`;
    this.#log = options.log ?? quiet;
    this.#observe = options.observe;
    this.#urls = options.urls === undefined ? undefined : new Set(options.urls);
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
   * Makes one attempt at every delivery due now and resolves with how many
   * were attempted. A call while a run is in progress waits for it, then
   * runs again (so what was enqueued meanwhile is not missed).
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
    if (this.#urls) this.#holdOthers([...this.#urls]);
    // A resend to another URL can land between the hold above and this read: it waits for the next run's hold.
    const due = this.outbox.due(this.#now()).filter((delivery) => !this.#urls || this.#urls.has(delivery.url));
    let next = 0;
    let attempted = 0;
    const worker = async () => {
      while (next < due.length) {
        const delivery = due[next++]!;
        if (await this.#attempt(delivery)) attempted++;
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, due.length) }, worker));
    return attempted;
  }

  #holdOthers(urls: string[]): void {
    const { held, resumed } = this.outbox.holdOthers(urls);
    const byUrl = (deliveries: Delivery[]) => [...new Set(deliveries.map((d) => d.url))];
    if (held.length > 0) {
      this.#log.warn(
        { deliveryIds: held.map((d) => d.id), urls: byUrl(held) },
        `holding ${held.length} webhook deliver${held.length === 1 ? 'y' : 'ies'} to URLs serve no longer sends to; resend or cancel them with \`miniapp webhooks\``,
      );
    }
    if (resumed.length > 0) {
      this.#log.info({ deliveryIds: resumed.map((d) => d.id), urls: byUrl(resumed) }, `resuming ${resumed.length} held webhook deliver${resumed.length === 1 ? 'y' : 'ies'}`);
    }
  }

  async #attempt(delivery: Delivery): Promise<boolean> {
    const started = this.#now();
    if (!this.outbox.claim(delivery.id, delivery.nextAttemptAt!, new Date(started.getTime() + this.#claimMs), started)) return false;
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
    const state = this.outbox.recordAttempt(delivery.id, { at: started.toISOString(), statusCode, error }, { ...next, at: finished.toISOString() });
    this.#observe?.({ event: delivery.event, outcome: OUTCOMES[state], seconds });
    const fields = { deliveryId: delivery.id, event: delivery.event, url: delivery.url, attempt: attemptsMade, statusCode, error };
    if (state === 'delivered') this.#log.info(fields, 'webhook delivered');
    else if (state === 'failed') this.#log.error(fields, `webhook failed after ${attemptsMade} attempts; giving up`);
    else if (state === 'pending') this.#log.warn({ ...fields, nextAttemptAt: next.nextAttemptAt }, 'webhook attempt failed; will retry');
    else this.#log.warn(fields, `webhook attempt failed; the delivery was ${state} meanwhile, so no retry`);
    return true;
  }

  /** Whether the loop is running. */
  get running(): boolean {
    return this.#loop !== undefined;
  }

  /** Starts the loop (once); due deliveries, including those left by an earlier process, go out at once. */
  start(): void {
    if (this.#loop) return;
    this.#stopping = false;
    this.#loop = this.#runLoop();
  }

  /** Says that something was enqueued: the loop looks at the outbox now instead of when it would wake. */
  notify(): void {
    this.#poked = true;
    this.#wake?.();
  }

  /** Stops the loop and waits for the attempts in flight to be recorded. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#wake?.();
    await this.#loop;
    await this.#run?.catch(() => 0);
    this.#loop = undefined;
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
      await this.#sleep(this.#sleepMs());
    }
  }

  #sleepMs(): number {
    let dueAt: Date | undefined;
    try {
      dueAt = this.outbox.nextDueAt();
    } catch {
      dueAt = undefined;
    }
    if (!dueAt) return this.#maxSleepMs;
    return Math.min(this.#maxSleepMs, Math.max(0, dueAt.getTime() - this.#now().getTime()));
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
