/**
 * What a long server stream holds for a client that reads slowly or not at
 * all: a bound, not a queue without end.
 *
 * grpc-js takes every write and keeps it until the peer has read it, and a
 * status written after a thousand queued messages is sent only once they
 * have all been read. So an outbox writes to the stream only while the
 * stream takes more (`write` returned true: grpc-js holds fewer than its
 * high-water mark of 16 messages); past it, messages wait in the outbox's
 * backlog until 'drain'. With `maxUnread` messages waiting (backlog and
 * stream together) the stream has fallen behind for good: the backlog is
 * let go and `onOverflow` runs (the owner ends the call, or drops the
 * message and goes on).
 *
 * Producers that can wait (a catch-up read from the database, a list)
 * await `room()` before they read more, so they read only as fast as the
 * client takes. Such a producer never fills the backlog, so a client that
 * reads nothing at all would hold its stream for good: with `maxStallMs`,
 * a stream that has taken nothing for that long while messages wait is let
 * go too (`onOverflow('stalled')`).
 */
import type * as grpc from '@grpc/grpc-js';

export const DEFAULT_MAX_UNREAD = 1000;
/** How long a stream may take nothing while messages wait for it, where its owner sets a bound. */
export const DEFAULT_MAX_STALL_MS = 60_000;

/** Why an outbox let its stream go: too many messages unread, or none read for too long. */
export type OverflowReason = 'unread' | 'stalled';

/** The part of a server stream an outbox needs. */
export interface OutboxStream<T> {
  write(message: T): boolean;
  readonly writableLength: number;
  emit(event: 'error', error: grpc.ServerErrorResponse): boolean;
  on(event: 'drain', listener: () => void): unknown;
  off(event: 'drain', listener: () => void): unknown;
}

export class StreamOutbox<T> {
  readonly #stream: OutboxStream<T>;
  readonly #maxUnread: number;
  readonly #onOverflow: (reason: OverflowReason) => void;
  readonly #maxStallMs: number | undefined;
  #stall: NodeJS.Timeout | undefined;
  #backlog: T[] = [];
  #full = false;
  #closed = false;
  #waiting: (() => void)[] = [];
  readonly #onDrain = () => this.#drain();

  constructor(stream: OutboxStream<T>, options: { maxUnread?: number; maxStallMs?: number; onOverflow: (reason: OverflowReason) => void }) {
    this.#stream = stream;
    this.#maxUnread = options.maxUnread ?? DEFAULT_MAX_UNREAD;
    this.#maxStallMs = options.maxStallMs;
    this.#onOverflow = options.onOverflow;
    stream.on('drain', this.#onDrain);
  }

  get maxUnread(): number {
    return this.#maxUnread;
  }

  /** Messages written but not yet read by the client, here and in grpc-js. */
  get unread(): number {
    return this.#backlog.length + this.#stream.writableLength;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Sends `message` when the stream takes it, or keeps it; false when it overflowed (or was closed) instead. */
  write(message: T): boolean {
    if (this.#closed) return false;
    if (!this.#full) {
      this.#full = !this.#stream.write(message);
      if (this.#full) this.#watchStall();
      return true;
    }
    if (this.unread >= this.#maxUnread) {
      this.close();
      this.#onOverflow('unread');
      return false;
    }
    this.#backlog.push(message);
    return true;
  }

  /** Resolves when the stream takes more at once (nothing waits in the backlog), or the outbox is closed. */
  room(): Promise<void> {
    if (!this.#full || this.#closed) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  /** Lets go of the backlog and of the stream's 'drain' (idempotent); whoever waits for room goes on. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#stall);
    this.#backlog = [];
    this.#stream.off('drain', this.#onDrain);
    this.#wake();
  }

  #drain(): void {
    this.#full = false;
    let next = 0;
    while (next < this.#backlog.length && !this.#full) this.#full = !this.#stream.write(this.#backlog[next++]!);
    this.#backlog.splice(0, next);
    clearTimeout(this.#stall);
    this.#stall = undefined;
    if (this.#full) this.#watchStall();
    else this.#wake();
  }

  /** While the stream is full: let it go should it take nothing within maxStallMs. */
  #watchStall(): void {
    if (this.#maxStallMs === undefined || this.#stall) return;
    this.#stall = setTimeout(() => {
      if (this.#closed || !this.#full) return;
      this.close();
      this.#onOverflow('stalled');
    }, this.#maxStallMs);
    this.#stall.unref();
  }

  #wake(): void {
    for (const resolve of this.#waiting.splice(0)) resolve();
  }
}
