/**
 * The one implementation of creating users from a client stream, behind
 * BulkCreateUsers (one answer at the end) and ImportUsers (an answer per
 * row): the checks and hashing of CreateUser, transactions, and the order
 * of the rows.
 *
 * Each row is checked and its password hashed as soon as it arrives (scrypt
 * runs on libuv's thread pool, so many rows hash at once). Rows are stored
 * in the order they came, in one transaction for whatever rows are ready
 * (at most BATCH_ROWS), and each row's result is reported once that
 * transaction has committed: a slow hash delays only the answers after it,
 * and a duplicate within one stream fails at its second occurrence. While
 * BATCH_ROWS rows are in hand the stream is paused, so a fast client waits
 * for the server instead of filling its memory.
 */
import type { NewUser, UserRecord } from './user-store.js';
import type { CreateUserRequest } from './proto.js';

const BATCH_ROWS = 256;

type RowOutcome = { index: number; user: UserRecord } | { index: number; error: unknown };

/** What grpc-js's server streams of requests offer (readable and duplex alike). */
export interface RowStream {
  on(event: 'data', listener: (request: CreateUserRequest) => void): unknown;
  on(event: 'end' | 'cancelled', listener: () => void): unknown;
  on(event: 'error', listener: (error: unknown) => void): unknown;
  pause(): unknown;
  resume(): unknown;
}

export interface BatchCreateOptions {
  /** Checks a row and hashes its password; throws what makes it fail (a validation error). */
  prepare(request: CreateUserRequest): Promise<NewUser>;
  /** Stores rows in one transaction, each created or refused as a duplicate. */
  store(users: readonly NewUser[]): Promise<({ user: UserRecord } | { error: unknown })[]>;
  /** Each row's result, in the order of the rows, once it is final. */
  onResult(result: RowOutcome): void;
  /** Awaited after each transaction's results: lets the caller hold the stream until its reader catches up. */
  afterBatch?(): Promise<void>;
}

interface Row {
  index: number;
  settled: boolean;
  prepared?: NewUser;
  error?: unknown;
  ready: Promise<void>;
}

/**
 * Creates the rows of `stream` until it ends. Resolves after the last
 * result; rejects when storing fails for another reason than a duplicate
 * (the call should fail). A cancelled stream stops storing at once.
 */
export function createFromStream(stream: RowStream, options: BatchCreateOptions): Promise<void> {
  const rows: Row[] = [];
  let next = 0;
  let ended = false;
  let cancelled = false;
  let paused = false;
  let wake: (() => void) | undefined;
  const poke = () => {
    const waiting = wake;
    wake = undefined;
    waiting?.();
  };
  const changed = () => new Promise<void>((resolve) => (wake = resolve));

  stream.on('data', (request) => {
    const row: Row = { index: next++, settled: false, ready: Promise.resolve() };
    row.ready = options
      .prepare(request)
      .then(
        (user) => {
          row.prepared = user;
        },
        (error: unknown) => {
          row.error = error;
        },
      )
      .finally(() => {
        row.settled = true;
        poke();
      });
    rows.push(row);
    if (rows.length >= BATCH_ROWS && !paused) {
      paused = true;
      stream.pause();
    }
    poke();
  });
  stream.on('end', () => {
    ended = true;
    poke();
  });
  const cancel = () => {
    cancelled = true;
    poke();
  };
  stream.on('cancelled', cancel);
  stream.on('error', cancel);

  return (async () => {
    for (;;) {
      if (cancelled) return;
      const head = rows[0];
      if (!head) {
        if (ended) return;
        await changed();
        continue;
      }
      if (!head.settled) {
        await head.ready;
        continue;
      }
      let count = 1;
      while (count < rows.length && count < BATCH_ROWS && rows[count]!.settled) count++;
      const batch = rows.splice(0, count);
      const valid = batch.filter((row) => row.prepared !== undefined);
      const stored = valid.length === 0 ? [] : await options.store(valid.map((row) => row.prepared!));
      const outcome = new Map(valid.map((row, i) => [row, stored[i]!] as const));
      for (const row of batch) {
        const result = outcome.get(row);
        if (!result) options.onResult({ index: row.index, error: row.error });
        else if ('user' in result) options.onResult({ index: row.index, user: result.user });
        else options.onResult({ index: row.index, error: result.error });
      }
      await options.afterBatch?.();
      if (paused && rows.length < BATCH_ROWS) {
        paused = false;
        stream.resume();
      }
    }
  })();
}
