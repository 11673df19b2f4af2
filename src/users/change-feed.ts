/**
 * One reader of the user change log per instance, fanning each change out
 * to the watch streams of this instance, in the log's (commit) order.
 *
 * The reader remembers the last number it delivered. A signal (a commit on
 * any instance) makes it read what follows; so does each (re)connection of
 * its subscription, since signals sent while it was away are lost but the
 * log is not; and so does a slow timer while anyone watches, in case a
 * subscription is gone for good. Reads never overlap: they run one after the
 * other, and a request during a read makes one more read afterwards.
 *
 * A new watcher starts from the log's head at the time it asked: it joins
 * at the end of the next read that starts after its request, so it never
 * sees a change committed before (even one whose signal is still on its
 * way) and never misses one committed after.
 *
 * A watcher that resumes after a number N (the last change it saw, on this
 * instance or another) first reads what follows N from the log itself (the
 * catch-up), a page at a time, each page once the watcher has room for it
 * (its `room`: the client has read what it was sent), so a client that does
 * not read holds one page, not the log; the first page is small
 * (FIRST_CATCH_UP_PAGE) and each next one twice the last, up to PAGE. When a page brings it up to the
 * reader's position P (every change up to P has been fanned out, none past
 * it), it joins the live changes in the same turn, skipping those up to
 * where its pages reached. So it gets every change above N exactly once, in
 * order, and nothing waits in a buffer meanwhile. When N is above P
 * (another instance has committed changes this reader has not read yet),
 * the live changes up to N are the ones it saw already, and are skipped.
 * N past the log's head, or N whose following changes were trimmed, cannot
 * be resumed (ResumeOutOfRange).
 *
 * A watcher of one user's changes (every user token's watch, and the
 * admin's of one id) catches up on that user's changes alone, read by their
 * index (`afterFor`): before, a watch of oneself resuming from far back read
 * and parsed everyone's changes to skip them, and had room for every page,
 * since nothing of them was sent. A short page of them is all there is up to
 * the head it was read with, where the watcher then joins.
 *
 * The catch-up pages of all the watchers of an instance are read one at a
 * time, each in a turn of the event loop of its own (CatchUpTurns): with a
 * synchronous store a page is read and parsed without a pause, so watchers
 * that resume from far back and have room for every page (a watch of one
 * user, scanning the others' changes) would otherwise hold the loop for the
 * whole log, and everyone else's requests with it.
 */
import { EventEmitter } from 'node:events';
import type { Signals } from '../store/signals.js';
import { USER_CHANGES_CHANNEL, type UserChange, type UserChangeLog } from './change-log.js';

/** Changes read at a time (by the reader, and by each catch-up). */
const PAGE = 500;
/**
 * A catch-up's first page; each next one twice the last, up to PAGE. A watcher that never reads costs the
 * store this much, not a full page, however often it is opened again (TCP's slow start, for a log).
 */
const FIRST_CATCH_UP_PAGE = 32;
/** How often the log is read while anyone watches, whatever the signals say. */
const DEFAULT_POLL_MS = 5_000;
/** How long changes stay in the log: a reader away for less than this loses nothing. */
const DEFAULT_RETENTION_MS = 60 * 60 * 1000;
const TRIM_EVERY_MS = 5 * 60 * 1000;

export interface ChangeFeedOptions {
  now?: () => Date;
  pollMs?: number;
  retentionMs?: number;
  /** Problems reading the log (the watchers wait and nothing is lost; someone should know). */
  warn?: (message: string, fields: Record<string, unknown>) => void;
}

interface Joiner {
  listener: (change: UserChange) => void;
  /** Resolves when the watcher can take another page of its catch-up. */
  room: () => Promise<void>;
  /** Resume after this number (a catch-up from the log first); undefined: from now on. */
  after: number | undefined;
  /** The one user whose changes the watcher takes, as it stands now (undefined: everyone's): its catch-up reads only those. */
  only: () => number | undefined;
  resolve: (position: number) => void;
  reject: (error: unknown) => void;
  cancelled: boolean;
  /** The function registered on `events` (the listener itself, or the resuming watcher's buffering one). */
  registered: ((change: UserChange) => void) | undefined;
}

/**
 * Hands out turns for catch-up pages: one holder at a time, first come first
 * served, and the next one granted on a later turn of the event loop
 * (setImmediate), after the I/O that arrived meanwhile has been handled.
 */
class CatchUpTurns {
  readonly #queue: Array<() => void> = [];
  #busy = false;

  /** Resolves, when it is this caller's turn, with the function that ends it (idempotent). */
  take(): Promise<() => void> {
    return new Promise((resolve) => {
      this.#queue.push(() => {
        let ended = false;
        resolve(() => {
          if (ended) return;
          ended = true;
          setImmediate(() => this.#grant());
        });
      });
      if (!this.#busy) {
        this.#busy = true;
        setImmediate(() => this.#grant());
      }
    });
  }

  /** Callers waiting for a turn (the holder not counted). */
  get waiting(): number {
    return this.#queue.length;
  }

  #grant(): void {
    const next = this.#queue.shift();
    if (next) next();
    else this.#busy = false;
  }
}

/** A watch cannot resume where it asked: the changes after it are no longer kept, or it is past the last change. */
export class ResumeOutOfRange extends Error {}

export class UserChangeFeed {
  /** Every live watcher is one 'event' listener, called with each UserChange. */
  readonly events = new EventEmitter();
  readonly #joining: Joiner[] = [];
  readonly #turns = new CatchUpTurns();
  #last = 0;
  #reading: Promise<void> | undefined;
  #again = false;
  #started = false;
  #stopped = false;
  #unsubscribe: (() => Promise<void>) | undefined;
  #poll: NodeJS.Timeout | undefined;
  #trim: NodeJS.Timeout | undefined;
  readonly #now: () => Date;

  constructor(
    private readonly log: UserChangeLog,
    private readonly signals: Signals,
    private readonly options: ChangeFeedOptions = {},
  ) {
    // Every watcher is one listener; the default limit of 10 would warn on normal use.
    this.events.setMaxListeners(0);
    this.#now = options.now ?? (() => new Date());
  }

  async start(): Promise<void> {
    this.#last = await this.log.head();
    this.#started = true;
    this.#unsubscribe = await this.signals.subscribe(
      USER_CHANGES_CHANNEL,
      (payload) => this.#heard(Number(payload)),
      () => this.#read(),
    );
    this.#poll = setInterval(() => {
      if (this.#heeded()) this.#read();
    }, this.options.pollMs ?? DEFAULT_POLL_MS);
    this.#poll.unref();
    this.#trim = setInterval(() => void this.trim().catch(() => undefined), TRIM_EVERY_MS);
    this.#trim.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#poll);
    clearInterval(this.#trim);
    await this.#unsubscribe?.();
    await this.#reading?.catch(() => undefined);
    for (const joiner of this.#joining.splice(0)) joiner.reject(new Error('serve is shutting down'));
    this.events.removeAllListeners();
  }

  /** Live watchers. */
  watcherCount(): number {
    return this.events.listenerCount('event');
  }

  /**
   * Calls `listener` with every change committed from now on, or with
   * `after`, every change numbered above it (see the class comment).
   * Resolves once the watcher is live and caught up, with the number it
   * delivers changes after (the log's head when it joined, or `after`), which
   * is where a watcher that saw nothing yet resumes; rejects when it cannot
   * be (ResumeOutOfRange, or the log could not be read); `release` (any
   * time, also before) ends it.
   */
  watch(
    listener: (change: UserChange) => void,
    options: { after?: number | undefined; room?: () => Promise<void>; only?: () => number | undefined } = {},
  ): { live: Promise<number>; release: () => void } {
    let joiner: Joiner | undefined;
    const room = options.room ?? (() => Promise.resolve());
    const only = options.only ?? (() => undefined);
    const live = new Promise<number>((resolve, reject) => {
      joiner = { listener, room, after: options.after, only, resolve, reject, cancelled: false, registered: undefined };
    });
    if (this.#stopped) {
      joiner!.reject(new Error('serve is shutting down'));
    } else {
      this.#joining.push(joiner!);
      this.#read();
    }
    return {
      live,
      release: () => {
        joiner!.cancelled = true;
        if (joiner!.registered) this.events.off('event', joiner!.registered);
      },
    };
  }

  /**
   * Calls `listener` with each change fanned out from now on, on every
   * instance's commits, without being a watcher: how the grants of long
   * streams hear that a user was deactivated, deleted or given other roles.
   * Returns the function that stops it.
   */
  follow(listener: (change: UserChange) => void): () => void {
    this.events.on('follow', listener);
    return () => void this.events.off('follow', listener);
  }

  /** Whether anyone hears the changes (watchers or followers), so that the log is worth reading. */
  #heeded(): boolean {
    return this.events.listenerCount('event') > 0 || this.events.listenerCount('follow') > 0;
  }

  /** Drops the changes older than the retention period. */
  trim(): Promise<number> {
    return this.log.trim(new Date(this.#now().getTime() - (this.options.retentionMs ?? DEFAULT_RETENTION_MS)));
  }

  #heard(seq: number): void {
    if (!Number.isFinite(seq) || seq <= this.#last) return;
    // Nobody to tell: remember how far the log goes without reading it (a bulk create signals once a transaction).
    if (!this.#reading && this.#joining.length === 0 && !this.#heeded()) {
      this.#last = seq;
      return;
    }
    this.#read();
  }

  #read(): void {
    if (!this.#started || this.#stopped) return;
    if (this.#reading) {
      this.#again = true;
      return;
    }
    this.#reading = this.#readAll().finally(() => {
      this.#reading = undefined;
      if (this.#again && !this.#stopped) {
        this.#again = false;
        this.#read();
      }
    });
  }

  async #readAll(): Promise<void> {
    // Joiners that asked before this read started; those asking during it join at the end of the next.
    const joining = this.#joining.splice(0);
    try {
      for (;;) {
        const changes = await this.log.after(this.#last, PAGE);
        if (this.#stopped) return;
        const first = changes[0];
        if (first && first.seq > this.#last + 1) {
          this.options.warn?.('user changes were trimmed from the log before this instance read them; watchers missed them', {
            from: this.#last + 1,
            to: first.seq - 1,
          });
        }
        for (const change of changes) {
          this.#last = change.seq;
          this.events.emit('event', change);
          this.events.emit('follow', change);
        }
        if (changes.length < PAGE) break;
      }
    } catch (error) {
      // The log keeps everything: the next signal, reconnection or poll reads on from the same place.
      this.options.warn?.('cannot read the user change log; watchers wait for it', { error: String(error) });
      for (const joiner of joining) joiner.reject(error);
      return;
    }
    for (const joiner of joining) {
      if (joiner.cancelled) continue;
      if (joiner.after === undefined) {
        joiner.registered = joiner.listener;
        this.events.on('event', joiner.listener);
        joiner.resolve(this.#last);
      } else {
        this.#resume(joiner, joiner.after);
      }
    }
  }

  /** Delivers what follows `after` from the log, a page each time the watcher has room, then joins it live. */
  #resume(joiner: Joiner, after: number): void {
    const retention = `the log keeps ${Math.round((this.options.retentionMs ?? DEFAULT_RETENTION_MS) / 60_000)} minutes`;
    const catchUp = async () => {
      if (after > this.#last) {
        const head = await this.log.head();
        if (after > head)
          throw new ResumeOutOfRange(`resume_after ${after} is past the last change (${head}): it comes from another database, or a log that was reset`);
      }
      let cursor = after;
      let pageSize = FIRST_CATCH_UP_PAGE;
      for (;;) {
        if (joiner.cancelled) return;
        // Every change up to #last has gone out to the live watchers and none after it: join here, in this turn.
        if (cursor >= this.#last) {
          const reached = cursor;
          const live = (change: UserChange) => {
            if (change.seq > reached) joiner.listener(change);
          };
          joiner.registered = live;
          this.events.on('event', live);
          return;
        }
        await joiner.room();
        if (joiner.cancelled) return;
        const endTurn = await this.#turns.take();
        try {
          if (joiner.cancelled) return;
          const asked = pageSize;
          pageSize = Math.min(pageSize * 2, PAGE);
          const outOfRange = (oldest: number | undefined) =>
            new ResumeOutOfRange(
              `the changes after ${cursor} are no longer kept (${retention}${oldest === undefined ? '' : `; the oldest kept is ${oldest}`}): start a new watch without resume_after`,
            );
          const user = joiner.only();
          if (user !== undefined) {
            // One user's changes, by their index: a watch of oneself does not read and parse everyone else's.
            const page = await this.log.afterFor(user, cursor, asked);
            if (page.oldest === undefined ? page.head > cursor : page.oldest > cursor + 1) throw outOfRange(page.oldest);
            for (const change of page.changes) {
              if (joiner.cancelled) return;
              joiner.listener(change);
              cursor = change.seq;
            }
            // A short page is all of the user's changes up to the head it was read with: nothing else to read there.
            if (page.changes.length < asked) cursor = Math.max(cursor, page.head);
            continue;
          }
          const changes = await this.log.after(cursor, asked);
          const first = changes[0];
          if (!first || first.seq !== cursor + 1) throw outOfRange(first?.seq);
          for (const change of changes) {
            if (joiner.cancelled) return;
            joiner.listener(change);
            cursor = change.seq;
          }
        } finally {
          endTurn();
        }
      }
    };
    catchUp().then(
      () => joiner.resolve(after),
      (error: unknown) => joiner.reject(error),
    );
  }
}
