/**
 * Signals between the instances that share a store: what one instance
 * publishes, every subscriber hears, on whichever instance it runs. For
 * SQLite and memory there is one instance, and an event emitter does it;
 * for PostgreSQL, LISTEN/NOTIFY (postgres-signals.ts). A notification published inside a
 * transaction is delivered when it commits (NOTIFY's own rule), so a
 * subscriber never hears of a change it cannot read yet.
 *
 * Payloads are small (PostgreSQL caps them below 8000 bytes): an id or a
 * sequence number, with the data itself in a table.
 */
import { EventEmitter } from 'node:events';
import type { Sql } from './sql.js';

export interface Signals {
  /** Tells every subscriber of `channel`; with `tx`, when that transaction commits. */
  publish(channel: string, payload: string, tx?: Sql): Promise<void>;
  /**
   * Calls `listener` with each payload published on `channel` from now on.
   * `onConnected` runs once the subscription is live, and again after each
   * reconnection: the moment to read what may have been missed meanwhile.
   * `onLost` runs when the subscription stops hearing (the connection that
   * carries it failed), before any reconnection. Resolves with the
   * unsubscribe.
   */
  subscribe(channel: string, listener: (payload: string) => void, onConnected?: () => void, onLost?: () => void): Promise<() => Promise<void>>;
  /**
   * Whether the signals are known to reach this instance now: nothing is
   * lost in-process; over PostgreSQL, the LISTEN connection answered within
   * `withinMs` (its heartbeat). `onLost` (above) says the moment it stops.
   */
  alive(withinMs: number): boolean;
  close(): Promise<void>;
}

export class LocalSignals implements Signals {
  readonly #events = new EventEmitter();

  constructor() {
    this.#events.setMaxListeners(0);
  }

  async publish(channel: string, payload: string, tx?: Sql): Promise<void> {
    if (tx) tx.afterCommit(() => this.#events.emit(channel, payload));
    else this.#events.emit(channel, payload);
  }

  async subscribe(channel: string, listener: (payload: string) => void, onConnected?: () => void): Promise<() => Promise<void>> {
    this.#events.on(channel, listener);
    onConnected?.();
    return async () => void this.#events.off(channel, listener);
  }

  alive(): boolean {
    return true;
  }

  async close(): Promise<void> {
    this.#events.removeAllListeners();
  }
}
