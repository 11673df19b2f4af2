/**
 * One read of a value shared by the callers who ask for it at about the
 * same time, without ever answering a caller with a read that started
 * before it asked.
 *
 * A caller that finds no read in flight starts one. A caller that finds one
 * in flight cannot use it (it may have been answered before the caller's
 * reason to ask, say a write another instance acknowledged a moment ago),
 * so it waits for the next read, which starts as soon as the one in flight
 * ends and is shared by everyone who arrived meanwhile. At most two reads
 * are under way at a time, however many callers there are, and each caller
 * waits at most for the end of one read and the whole of another.
 *
 * The blog's cached lists read the posts' version on PostgreSQL this way
 * (a round trip per request otherwise).
 *
 * A read in flight that fails because the database cannot answer fails the
 * callers waiting behind it too: a second read would only spend their time
 * (the store's time-out bounds a call as a whole, waits included).
 */
import { StoreUnavailableError } from './errors.js';

export class FreshRead<T> {
  #reading: Promise<T> | undefined;
  #queued: Promise<T> | undefined;

  constructor(private readonly read: () => Promise<T>) {}

  get(): Promise<T> {
    if (this.#reading === undefined) return this.#start();
    this.#queued ??= this.#reading.then(
      () => this.#next(),
      (error: unknown) => {
        if (!(error instanceof StoreUnavailableError)) return this.#next();
        this.#queued = undefined;
        throw error;
      },
    );
    return this.#queued;
  }

  #next(): Promise<T> {
    this.#queued = undefined;
    return this.#start();
  }

  #start(): Promise<T> {
    const reading: Promise<T> = this.read().finally(() => {
      if (this.#reading === reading) this.#reading = undefined;
    });
    this.#reading = reading;
    return reading;
  }
}
