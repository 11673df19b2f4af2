/**
 * A counter of a PostgreSQL store (the posts' version) that this instance
 * knows without asking the database, for as long as it holds a lease that
 * every writer honours: a write that moves the counter is acknowledged to
 * its client only once every instance holding a live lease has seen the new
 * value. So the promise of the list caches holds without a round trip per
 * request: no instance serves a page older than a write another instance
 * has acknowledged.
 *
 * The protocol, over the table cache_leases (counter, instance, expires_at,
 * seen) and two notification channels:
 *
 * - Every move of the counter is announced (a trigger on counters NOTIFYs
 *   `miniapp_counter_<name>` with the new value, on commit). An instance
 *   takes the value (raising what it knows), then records it as seen and
 *   says so on `..._seen`: applied before acknowledged, never the reverse.
 * - A writer, once its transaction committed value V, waits until no other
 *   instance has a live lease (expires_at in the future, by the database's
 *   clock) with seen < V; an acknowledgement wakes it to look again. Its
 *   own instance takes V at once.
 * - An instance answers from what it knows only while its lease is live by
 *   its own clock: until the moment it sent the last renewal plus the
 *   lease, less a margin, which always ends before the database's
 *   expires_at (set when that renewal ran, later). Past it, or while its
 *   LISTEN connection is lost or unproven, it asks the database instead
 *   (`known()` is undefined), and writers stop waiting for it once the
 *   lease has run out in the database.
 * - Joining (at start, and after every reconnection of the LISTEN
 *   connection, when notifications may have been missed) takes two steps:
 *   the lease is written with seen = -1 and committed, then seen is set to
 *   the counter as a later snapshot reads it. A write either finds the
 *   lease (and waits for it) or committed before it, and then the second
 *   step reads its value. Only then does the instance answer from what it
 *   knows.
 *
 * What it costs: a writer's statement to look at the leases (and, with
 * other instances, the time they take to hear of the write); each instance
 * renews its lease twice a second and acknowledges each move. An instance
 * that vanishes without resigning (killed, or cut off from the database)
 * holds writes until no instance can be stale any more (staleForAtMostMs,
 * 5.5 s); one that stops cleanly resigns first.
 */
import { randomUUID } from 'node:crypto';
import type { Signals } from './signals.js';
import type { Sql } from './sql.js';

export interface VersionLeaseOptions {
  /** The row of `counters` (its moves are announced by a trigger; see blog-listing-schema.ts). */
  counter: string;
  /** How long a lease lasts after each renewal (default 4 s). */
  leaseMs?: number;
  /** How often it is renewed (default 0.5 s). */
  renewMs?: number;
  /** What this instance takes off its own view of the lease, against clock drift and a slow renewal (default 1.5 s). */
  marginMs?: number;
  /** A lease is renewed only while the LISTEN connection answered within this (default 2.5 s; its heartbeat is every 2 s). */
  aliveWithinMs?: number;
  /** Told when this instance starts and stops answering from what it knows (for the log). */
  onState?: (state: 'held' | 'lost', detail: string) => void;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export class VersionLease {
  readonly instance = randomUUID();
  readonly #leaseMs: number;
  readonly #renewMs: number;
  readonly #marginMs: number;
  readonly #aliveWithinMs: number;
  readonly #seenChannel: string;
  /** The highest value this instance has taken. */
  #value = -1;
  /** Until when (performance.now()) this instance may answer from #value. */
  #validUntil = 0;
  #held = false;
  /** A join under way (one at a time: a slow database must not have the ticks start one after another). */
  #joining: Promise<void> | undefined;
  /** Bumped by every join and loss: a join that finds another begun after it stops. */
  #generation = 0;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  #unsubscribe: (() => Promise<void>)[] = [];
  /** Writers waiting for acknowledgements, woken by each. */
  readonly #waiting = new Set<() => void>();
  /** The acknowledgement under way, and the highest value to acknowledge after it. */
  #acking: Promise<void> | undefined;
  #toAck = -1;

  private constructor(
    private readonly sql: Sql,
    private readonly signals: Signals,
    private readonly options: VersionLeaseOptions,
  ) {
    this.#leaseMs = options.leaseMs ?? 4_000;
    this.#renewMs = options.renewMs ?? 500;
    this.#marginMs = options.marginMs ?? 1_500;
    this.#aliveWithinMs = options.aliveWithinMs ?? 2_500;
    this.#seenChannel = `miniapp_counter_${options.counter}_seen`;
  }

  /** Subscribes, joins, and keeps the lease renewed until `close`. */
  static async start(sql: Sql, signals: Signals, options: VersionLeaseOptions): Promise<VersionLease> {
    const lease = new VersionLease(sql, signals, options);
    lease.#unsubscribe.push(
      await signals.subscribe(
        `miniapp_counter_${options.counter}`,
        (payload) => lease.#moved(Number(payload)),
        () => lease.#rejoin(),
        () => lease.#lose('the LISTEN connection was lost'),
      ),
      await signals.subscribe(lease.#seenChannel, () => lease.#wake()),
    );
    lease.#timer = setInterval(() => lease.#tick(), lease.#renewMs);
    lease.#timer.unref();
    return lease;
  }

  /** The counter's value as this instance may vouch for it now, or undefined: ask the database. */
  known(): string | undefined {
    if (!this.#held || performance.now() >= this.#validUntil) return undefined;
    return String(this.#value);
  }

  /**
   * The longest an instance that never heard of a move can go on answering
   * from the value before it, counted from the move's commit: it heard
   * nothing because its LISTEN connection had died (a live one is told of
   * every commit before the answer to its next heartbeat), so it renews
   * for at most `aliveWithinMs` (and a tick) after the connection's last
   * answer, which came before the commit, and vouches for at most
   * `leaseMs - marginMs` after its last renewal. 5.5 s with the defaults.
   */
  get staleForAtMostMs(): number {
    return this.#renewMs + this.#aliveWithinMs + this.#leaseMs - this.#marginMs;
  }

  /**
   * After the caller's transaction committed the counter at `value`:
   * resolves once no other instance may answer from an older value, so that
   * the caller can acknowledge the write: when every live lease has seen it,
   * or at the latest `staleForAtMostMs` after the commit, when none can any
   * more (also when the database cannot be asked meanwhile).
   */
  async settled(value: number): Promise<void> {
    this.#take(value);
    const giveUp = performance.now() + this.staleForAtMostMs;
    for (;;) {
      let behind: number;
      try {
        const row = await this.sql.one<{ behind: number }>(
          'SELECT count(*) AS behind FROM cache_leases WHERE counter = $1 AND instance <> $2 AND seen < $3 AND expires_at > now()',
          [this.options.counter, this.instance, value],
        );
        behind = Number(row?.behind ?? 0);
      } catch {
        // The database cannot say now: by the time this gives up, no instance can answer from an older value.
        behind = 1;
      }
      if (behind === 0 || performance.now() >= giveUp) return;
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.#waiting.delete(wake);
          resolve();
        };
        this.#waiting.add(wake);
        void sleep(50).then(wake);
      });
    }
  }

  /** Resigns the lease (writers stop waiting for this instance) and stops. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#held = false;
    clearInterval(this.#timer);
    for (const unsubscribe of this.#unsubscribe) await unsubscribe().catch(() => undefined);
    await this.sql.run('DELETE FROM cache_leases WHERE counter = $1 AND instance = $2', [this.options.counter, this.instance]).catch(() => undefined);
    for (const wake of [...this.#waiting]) wake();
  }

  #take(value: number): void {
    if (Number.isSafeInteger(value) && value > this.#value) this.#value = value;
  }

  #wake(): void {
    for (const wake of [...this.#waiting]) wake();
  }

  /** A move of the counter: taken first, then acknowledged. */
  #moved(value: number): void {
    this.#take(value);
    if (value > this.#toAck) this.#toAck = value;
    this.#acking ??= this.#acknowledge().finally(() => (this.#acking = undefined));
  }

  async #acknowledge(): Promise<void> {
    for (let acked = -1; this.#toAck > acked && !this.#closed; ) {
      acked = this.#toAck;
      try {
        await this.sql.one(
          `WITH seen AS (UPDATE cache_leases SET seen = GREATEST(seen, $3) WHERE counter = $1 AND instance = $2 RETURNING seen)
           SELECT pg_notify($4, CAST($3 AS TEXT)) FROM seen`,
          [this.options.counter, this.instance, acked, this.#seenChannel],
        );
      } catch {
        // Unacknowledged, writers wait until this lease runs out: stop answering from what it knows before then.
        this.#lose('a move of the counter could not be acknowledged');
        return;
      }
    }
  }

  /** Joins now (again): after a reconnection, whatever join was under way is superseded. */
  #rejoin(): void {
    this.#joining = this.#join().finally(() => (this.#joining = undefined));
  }

  async #join(): Promise<void> {
    const generation = ++this.#generation;
    this.#held = false;
    if (this.#closed) return;
    const { counter } = this.options;
    try {
      const sent = performance.now();
      await this.sql.run(
        `INSERT INTO cache_leases (counter, instance, expires_at, seen) VALUES ($1, $2, now() + $3 * interval '1 millisecond', -1)
         ON CONFLICT (counter, instance) DO UPDATE SET expires_at = excluded.expires_at, seen = -1`,
        [counter, this.instance, this.#leaseMs],
      );
      if (generation !== this.#generation) return;
      const row = await this.sql.one<{ seen: number }>(
        `WITH seen AS (
           UPDATE cache_leases SET seen = GREATEST(seen, (SELECT value FROM counters WHERE name = $1)) WHERE counter = $1 AND instance = $2 RETURNING seen
         ) SELECT seen, pg_notify($3, CAST(seen AS TEXT)) FROM seen`,
        [counter, this.instance, this.#seenChannel],
      );
      if (generation !== this.#generation || this.#closed || !row) return;
      this.#take(Number(row.seen));
      this.#validUntil = sent + this.#leaseMs - this.#marginMs;
      this.#held = true;
      this.options.onState?.('held', `answering post lists from the version it is told of (lease ${this.instance.slice(0, 8)})`);
      // Leases of instances long gone, left by a kill.
      await this.sql.run("DELETE FROM cache_leases WHERE counter = $1 AND expires_at < now() - interval '1 hour'", [counter]).catch(() => undefined);
    } catch {
      // Tried again at the next tick.
    }
  }

  #lose(detail: string): void {
    this.#generation++;
    const was = this.#held;
    this.#held = false;
    if (was) this.options.onState?.('lost', `asking the database for the version of each post list again: ${detail}`);
    // Resigned, so that writers stop waiting at once; if the database cannot hear it, the lease runs out instead.
    if (!this.#closed) {
      void this.sql
        .run('UPDATE cache_leases SET expires_at = now() WHERE counter = $1 AND instance = $2', [this.options.counter, this.instance])
        .catch(() => undefined);
    }
  }

  #tick(): void {
    if (this.#closed) return;
    if (!this.signals.alive(this.#aliveWithinMs)) {
      // Unproven: no renewal. The lease runs out; a loss of the connection itself says so at once (onLost).
      return;
    }
    if (!this.#held) {
      if (!this.#joining) this.#rejoin();
      return;
    }
    const generation = this.#generation;
    const sent = performance.now();
    this.sql
      .one<{ seen: number }>("UPDATE cache_leases SET expires_at = now() + $3 * interval '1 millisecond' WHERE counter = $1 AND instance = $2 RETURNING seen", [
        this.options.counter,
        this.instance,
        this.#leaseMs,
      ])
      .then(
        (row) => {
          if (generation !== this.#generation) return;
          if (!row) {
            // The row is gone (swept while this instance was paused): join again.
            this.#held = false;
            this.#rejoin();
            return;
          }
          this.#validUntil = Math.max(this.#validUntil, sent + this.#leaseMs - this.#marginMs);
        },
        () => undefined,
      );
  }
}
