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
 */
import { EventEmitter } from 'node:events';
import type { Signals } from '../store/signals.js';
import { USER_CHANGES_CHANNEL, type UserChange, type UserChangeLog } from './change-log.js';

/** Changes read at a time. */
const PAGE = 500;
/** How often the log is read while anyone watches, whatever the signals say. */
export const DEFAULT_POLL_MS = 5_000;
/** How long changes stay in the log: a reader away for less than this loses nothing. */
export const DEFAULT_RETENTION_MS = 60 * 60 * 1000;
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
  resolve: () => void;
  reject: (error: unknown) => void;
  cancelled: boolean;
}

export class UserChangeFeed {
  /** Every live watcher is one 'event' listener, called with each UserChange. */
  readonly events = new EventEmitter();
  readonly #joining: Joiner[] = [];
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
      if (this.events.listenerCount('event') > 0) this.#read();
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
   * Calls `listener` with every change committed from now on. Resolves
   * once the watcher is live; `release` (any time, also before) ends it.
   */
  watch(listener: (change: UserChange) => void): { live: Promise<void>; release: () => void } {
    let joiner: Joiner | undefined;
    const live = new Promise<void>((resolve, reject) => {
      joiner = { listener, resolve, reject, cancelled: false };
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
        this.events.off('event', listener);
      },
    };
  }

  /** Drops the changes older than the retention period. */
  trim(): Promise<number> {
    return this.log.trim(new Date(this.#now().getTime() - (this.options.retentionMs ?? DEFAULT_RETENTION_MS)));
  }

  #heard(seq: number): void {
    if (!Number.isFinite(seq) || seq <= this.#last) return;
    // Nobody to tell: remember how far the log goes without reading it (a bulk create signals once a transaction).
    if (!this.#reading && this.#joining.length === 0 && this.events.listenerCount('event') === 0) {
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
      this.events.on('event', joiner.listener);
      joiner.resolve();
    }
  }
}
