/** Types of test/helpers/embedded-postgres.js (plain JavaScript, shared with the benchmarks). */
export function freePort(): Promise<number>;

export interface RunningPostgres {
  /** The server itself: stop() and start() keep its data and port. */
  server: { start(): Promise<void>; stop(): Promise<void> };
  port: number;
  /** Where the binaries it runs are: the package's, or a copy the server's user can reach. */
  binaries: string;
  /** A superuser's URL of `database` (default postgres). */
  url(database?: string): string;
  /** The process id of the server's postmaster (its sessions are its children), while it runs. */
  pid(): number | undefined;
  /** Stops the server and removes its directory. */
  stop(): Promise<void>;
}

export function startEmbeddedPostgres(options?: {
  prefix?: string;
  password?: string;
  persistent?: boolean;
  flags?: string[];
  source?: string;
}): Promise<RunningPostgres>;

/** The directory (bin, lib, share) of the installed binaries package, and its version. */
export function packagedBinaries(): Promise<{ native: string; version: string }>;

/** Whether `user` (undefined: ourselves) can run `binary`. */
export function canRun(binary: string, user?: { uid: number; gid: number }): boolean;

/** A directory of binaries `user` can run: the package's own, or a trusted copy in the temporary directory. */
export function binaries(user: { uid: number; gid: number } | undefined, options?: { source?: string }): Promise<string>;
