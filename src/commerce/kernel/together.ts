/**
 * Writes batched while one is in flight (PostgreSQL's checkout steps:
 * order/postgres-steps.ts, payment/payments.ts). An item that comes while
 * no write is in flight goes at once, alone; those that come while one is
 * in flight wait, and the next write takes them all (at most
 * WRITTEN_TOGETHER), so
 * that under load a statement carries many and a popular SKU's rows are
 * locked, and a commit waited for, once a statement rather than once an
 * item. Items whose keys meet go in different writes (a statement may not
 * claim one idempotency key, or move one row, twice): the later waits for
 * the next. Each caller gets its own answer, or the write's error. A batch
 * is written in the order of its items' first keys (its rows locked in that
 * order, the same in every instance); should it still meet another
 * instance's batch in
 * a deadlock, each of its items is written again alone, as it would have
 * been unbatched.
 *
 * Domain module: nothing here prints or reads the environment.
 */
import { isDeadlock } from '../../store/errors.js';

/** The most items one write takes. */
const WRITTEN_TOGETHER = 64;

interface Waiting<T, R> {
  item: T;
  keys: readonly [string, ...string[]];
  answer: (result: R) => void;
  fail: (error: unknown) => void;
}

export class Together<T, R> {
  #waiting: Waiting<T, R>[] = [];
  #writing = false;

  /**
   * `write` writes a batch and answers each item, in the batch's order;
   * `keys` are what two items of one batch must not share, the first of
   * them the one a batch is ordered by.
   */
  constructor(
    private readonly write: (batch: readonly T[]) => Promise<R[]>,
    private readonly keys: (item: T) => readonly [string, ...string[]],
  ) {}

  /** Writes `item` with whatever else waits, and answers it. */
  add(item: T): Promise<R> {
    return new Promise<R>((answer, fail) => {
      this.#waiting.push({ item, keys: this.keys(item), answer, fail });
      if (!this.#writing) this.#next();
    });
  }

  #next(): void {
    const batch: Waiting<T, R>[] = [];
    const later: Waiting<T, R>[] = [];
    const taken = new Set<string>();
    for (const waiting of this.#waiting) {
      if (batch.length < WRITTEN_TOGETHER && !waiting.keys.some((key) => taken.has(key))) {
        for (const key of waiting.keys) taken.add(key);
        batch.push(waiting);
      } else {
        later.push(waiting);
      }
    }
    this.#waiting = later;
    this.#writing = batch.length > 0;
    if (!this.#writing) return;
    batch.sort((a, b) => (a.keys[0] < b.keys[0] ? -1 : a.keys[0] > b.keys[0] ? 1 : 0));
    this.#write(batch.map((waiting) => waiting.item))
      .then(
        (results) => {
          for (const [i, waiting] of batch.entries()) waiting.answer(results[i] as R);
        },
        (error: unknown) => {
          for (const waiting of batch) waiting.fail(error);
        },
      )
      .finally(() => this.#next());
  }

  async #write(items: T[]): Promise<R[]> {
    try {
      return await this.write(items);
    } catch (error) {
      if (items.length === 1 || !isDeadlock(error)) throw error;
      const results: R[] = [];
      for (const item of items) results.push(...(await this.write([item])));
      return results;
    }
  }
}
