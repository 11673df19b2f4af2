/**
 * Checkpoints of a SQLite write-ahead log off the event loop.
 *
 * SQLite checkpoints in the connection that commits: once the log passes
 * 1,000 pages, the COMMIT that crossed the line also syncs the log, copies
 * it into the database file and syncs that, all on the thread that called
 * it. With better-sqlite3 that thread is serve's event loop, which then
 * answers nobody for the time two fsyncs and 4 MB of writes take: 20 ms on
 * an idle disk here, over 100 ms while uploads are being written. So serve's
 * connection turns the automatic checkpoint off, and a worker thread with a
 * connection of its own runs `PRAGMA wal_checkpoint(PASSIVE)` (which never
 * waits for, nor holds up, a reader or a writer) shortly after writes. The
 * checkpoint is as durable as SQLite's own: in WAL mode it syncs the log
 * before it copies it and the database after.
 *
 * Should the worker fail (it cannot open the file, or it dies), the
 * connection gets its automatic checkpoint back, so the log never grows
 * without bound.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Database as SqliteDatabase } from 'better-sqlite3';

/** SQLite's own default: the log's size, in pages, past which a commit checkpoints when the worker cannot. */
const AUTOCHECKPOINT_PAGES = 1000;
/** At most one checkpoint this often while writes go on: a few a second keep the log small without busying the disk. */
const CHECKPOINT_INTERVAL_MS = 250;

/** The worker's code: CommonJS, evaluated, so that it needs no file of its own beside a bundle. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('busy_timeout = 0');
parentPort.on('message', (message) => {
  if (message === 'close') {
    db.close();
    parentPort.close();
    return;
  }
  let result;
  try {
    const [row] = db.pragma('wal_checkpoint(PASSIVE)');
    result = { log: row.log, checkpointed: row.checkpointed };
  } catch (error) {
    result = { error: String(error && error.message || error) };
  }
  parentPort.postMessage(result);
});
parentPort.postMessage({ ready: true });
`;

interface CheckpointResult {
  /** Frames in the log, and how many of them are in the database file now. */
  log: number;
  checkpointed: number;
}

export interface WalCheckpointer {
  /** Says that commits were made: a checkpoint follows within CHECKPOINT_INTERVAL_MS, one at a time. */
  written(): void;
  /** Runs one checkpoint now (after the one in flight), for tests and shutdown. */
  checkpoint(): Promise<CheckpointResult | undefined>;
  close(): Promise<void>;
}

/** Starts the worker for the database `file` that `db` (serve's connection) has open in WAL mode. */
export function startWalCheckpointer(db: SqliteDatabase, file: string): WalCheckpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { file, driver } });
  // The worker never keeps serve alive by itself.
  worker.unref();
  db.pragma('wal_autocheckpoint = 0');

  let failed = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  /** The answer the worker owes, and the checkpoints asked for, one after another. */
  let pending: ((result: CheckpointResult | undefined) => void) | undefined;
  let chain: Promise<unknown> = Promise.resolve();

  const fail = () => {
    if (failed) return;
    failed = true;
    clearTimeout(timer);
    // The connection checkpoints for itself again.
    if (db.open) db.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
    pending?.(undefined);
    pending = undefined;
  };

  worker.on('message', (message: { ready?: boolean; error?: string } & Partial<CheckpointResult>) => {
    if (message.ready) return;
    const answer = pending;
    pending = undefined;
    // A checkpoint that failed (the file busy in a way PASSIVE does not wait out) is tried again after the next writes.
    answer?.(message.error === undefined ? { log: message.log!, checkpointed: message.checkpointed! } : undefined);
  });
  worker.on('error', fail);
  worker.on('exit', () => {
    if (!closed) fail();
  });

  const ask = () =>
    new Promise<CheckpointResult | undefined>((resolve) => {
      if (failed || closed) return resolve(undefined);
      pending = resolve;
      worker.postMessage('checkpoint');
    });
  const checkpoint = () => {
    const result = chain.then(ask);
    chain = result;
    return result;
  };

  return {
    written() {
      if (timer || failed || closed) return;
      timer = setTimeout(() => {
        timer = undefined;
        void checkpoint();
      }, CHECKPOINT_INTERVAL_MS);
      timer.unref();
    },
    checkpoint,
    async close() {
      if (closed) return;
      clearTimeout(timer);
      timer = undefined;
      // The checkpoint in flight finishes (those only asked for are not run); the worker's connection closes before
      // serve's, which then checkpoints what is left and removes the log, as the last connection to close does.
      closed = true;
      // Held until the worker has gone: a stop awaiting it must not find the event loop empty and end the process there.
      worker.ref();
      await chain;
      if (failed) return;
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.postMessage('close');
      await exited;
    },
  };
}
