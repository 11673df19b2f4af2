/**
 * Signals between instances over PostgreSQL: NOTIFY to publish, and one
 * connection of this instance's own that LISTENs to every subscribed
 * channel.
 *
 * That connection is watched, not trusted: a network stall leaves it open
 * and silent, notifications and all, so a heartbeat (`SELECT 1` within the
 * store's time-out) proves it alive every few seconds, and a connection that
 * fails it, errors or ends is destroyed and made again, with back-off,
 * until the database answers. Each time it is live again every subscriber's
 * `onConnected` runs: notifications sent while it was away are lost, and
 * that is the moment to read what they would have announced (the change
 * feed and the webhook outbox do).
 */
import type pg from 'pg';
import type { Signals } from './signals.js';
import type { Sql } from './sql.js';
import { StoreUnavailableError } from './errors.js';
import { postgresError } from './postgres-sql.js';

interface Subscription {
  channel: string;
  listener: (payload: string) => void;
  onConnected: (() => void) | undefined;
  onLost: (() => void) | undefined;
  /** The generation of the connection this subscriber last heard `onConnected` for. */
  generation: number;
}

export interface PostgresSignalsOptions {
  /** Makes an unconnected client for the LISTEN connection (the pool's settings, pool-less). */
  newClient: () => pg.Client;
  timeoutMs: number;
  /** How often the LISTEN connection proves it is alive (default 2 s). */
  heartbeatMs?: number;
  /** Told when the LISTEN connection is lost and when it is back (for the log). */
  onState?: (state: 'lost' | 'back', detail: string) => void;
}

const MAX_BACKOFF_MS = 2_000;

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

export class PostgresSignals implements Signals {
  readonly #subscriptions = new Set<Subscription>();
  #client: pg.Client | undefined;
  #generation = 0;
  /** Channels LISTENed on the current connection. */
  readonly #listening = new Set<string>();
  #connecting: Promise<pg.Client> | undefined;
  #retry: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #attempts = 0;
  #closed = false;
  /** When the LISTEN connection last answered (performance.now()), or undefined while there is none. */
  #provenAt: number | undefined;
  /** Statements on the LISTEN connection run one at a time. */
  #chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly sql: Sql,
    private readonly options: PostgresSignalsOptions,
  ) {}

  async publish(channel: string, payload: string, tx?: Sql): Promise<void> {
    await (tx ?? this.sql).one('SELECT pg_notify($1, $2)', [channel, payload]);
  }

  async subscribe(channel: string, listener: (payload: string) => void, onConnected?: () => void, onLost?: () => void): Promise<() => Promise<void>> {
    if (this.#closed) throw new StoreUnavailableError('the store is closed', { reason: 'shutting-down' });
    const subscription: Subscription = { channel, listener, onConnected, onLost, generation: 0 };
    this.#subscriptions.add(subscription);
    try {
      const client = await this.#live();
      if (!this.#listening.has(channel)) {
        await this.#statement(client, `LISTEN ${quoteIdentifier(channel)}`);
        this.#listening.add(channel);
      }
    } catch (error) {
      this.#subscriptions.delete(subscription);
      throw postgresError(error);
    }
    if (subscription.generation < this.#generation) {
      subscription.generation = this.#generation;
      onConnected?.();
    }
    return async () => {
      this.#subscriptions.delete(subscription);
      if ([...this.#subscriptions].some((s) => s.channel === channel)) return;
      const client = this.#client;
      if (this.#subscriptions.size === 0) {
        // Nobody listens any more: the connection goes, and its LISTENs with it.
        this.#drop(undefined);
        return;
      }
      // Best effort, not awaited: a stalled connection must not hold up whoever leaves (a shutdown, say).
      if (client && this.#listening.delete(channel)) this.#statement(client, `UNLISTEN ${quoteIdentifier(channel)}`).catch(() => undefined);
    };
  }

  alive(withinMs: number): boolean {
    return this.#client !== undefined && this.#provenAt !== undefined && performance.now() - this.#provenAt <= withinMs;
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#subscriptions.clear();
    this.#drop(undefined);
  }

  /** The live LISTEN connection, made now if there is none (within the time-out). */
  #live(): Promise<pg.Client> {
    if (this.#client) return Promise.resolve(this.#client);
    this.#connecting ??= this.#connect().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async #connect(): Promise<pg.Client> {
    clearTimeout(this.#retry);
    this.#retry = undefined;
    const client = this.options.newClient();
    client.on('error', () => this.#lost(client, 'the LISTEN connection failed'));
    client.on('end', () => this.#lost(client, 'the LISTEN connection ended'));
    client.on('notice', () => undefined);
    client.on('notification', (message) => {
      if (client !== this.#client) return;
      for (const subscription of [...this.#subscriptions]) {
        if (subscription.channel === message.channel) subscription.listener(message.payload ?? '');
      }
    });
    try {
      await client.connect();
      const channels = [...new Set([...this.#subscriptions].map((s) => s.channel))];
      for (const channel of channels) await this.#statement(client, `LISTEN ${quoteIdentifier(channel)}`);
      if (this.#closed) throw new StoreUnavailableError('the store is closed', { reason: 'shutting-down' });
      this.#listening.clear();
      for (const channel of channels) this.#listening.add(channel);
    } catch (error) {
      client.connection?.stream?.destroy();
      throw error;
    }
    const wasLost = this.#generation > 0;
    this.#client = client;
    this.#provenAt = performance.now();
    this.#generation++;
    this.#attempts = 0;
    this.#startHeartbeat(client);
    if (wasLost) this.options.onState?.('back', 'the LISTEN connection is back');
    for (const subscription of [...this.#subscriptions]) {
      if (subscription.generation < this.#generation) {
        subscription.generation = this.#generation;
        subscription.onConnected?.();
      }
    }
    return client;
  }

  /** One statement on the LISTEN connection, within the time-out; a connection that misses it is dropped. */
  #statement(client: pg.Client, text: string): Promise<void> {
    const run = this.#chain.then(async () => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(new StoreUnavailableError(`the database did not answer within ${this.options.timeoutMs} ms`, { reason: 'timeout' }));
          this.#lost(client, `the LISTEN connection did not answer within ${this.options.timeoutMs} ms`);
          client.connection?.stream?.destroy();
        }, this.options.timeoutMs);
      });
      try {
        await Promise.race([client.query(text), late]);
      } finally {
        clearTimeout(timer);
      }
    });
    this.#chain = run.catch(() => undefined);
    return run;
  }

  #startHeartbeat(client: pg.Client): void {
    clearInterval(this.#heartbeat);
    this.#heartbeat = setInterval(() => {
      if (client !== this.#client) return;
      this.#statement(client, 'SELECT 1').then(
        () => {
          if (client === this.#client) this.#provenAt = performance.now();
        },
        (error: unknown) => this.#lost(client, `the LISTEN connection failed its heartbeat: ${(error as Error).message}`),
      );
    }, this.options.heartbeatMs ?? 2_000);
    this.#heartbeat.unref();
  }

  /** The connection `client` is gone or in doubt: destroy it, and make another while anyone listens. */
  #lost(client: pg.Client, why: string): void {
    if (client !== this.#client) {
      client.connection?.stream?.destroy();
      return;
    }
    this.options.onState?.('lost', why);
    this.#drop(client);
    for (const subscription of [...this.#subscriptions]) subscription.onLost?.();
    this.#scheduleReconnect();
  }

  #drop(client: pg.Client | undefined): void {
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    const current = client ?? this.#client;
    this.#client = undefined;
    this.#provenAt = undefined;
    this.#listening.clear();
    this.#chain = Promise.resolve();
    if (current) {
      current.removeAllListeners('notification');
      current.on('error', () => undefined);
      current.end().catch(() => undefined);
      current.connection?.stream?.destroy();
    }
    if (!client) {
      clearTimeout(this.#retry);
      this.#retry = undefined;
    }
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#subscriptions.size === 0 || this.#retry || this.#connecting) return;
    const delay = Math.min(MAX_BACKOFF_MS, 100 * 2 ** this.#attempts) * (0.75 + Math.random() / 2);
    this.#attempts++;
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.#live().catch(() => this.#scheduleReconnect());
    }, delay);
    this.#retry.unref();
  }
}
