/**
 * Typed errors and the one map from error kind to exit code.
 *
 * Domain modules throw these; `main` turns them into a message on stderr and
 * an exit code. Every message says what failed; `hint` says what to do next.
 */

export const ExitCode = {
  ok: 0,
  failure: 1,
  usage: 2,
  decrypt: 3,
  auth: 4,
  upstream: 5,
  /** Stopped by Ctrl-C (SIGINT) or SIGTERM before it was done, as shells report 128 + SIGINT. */
  interrupted: 130,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export interface ErrorOptions {
  /** What the user should do next, printed on its own line. */
  hint?: string | undefined;
  cause?: unknown;
}

export class MiniappError extends Error {
  readonly exitCode: ExitCode = ExitCode.failure;
  /** A short machine-readable code, for `--json` error output and HTTP bodies. */
  readonly code: string = 'FAILURE';
  readonly hint: string | undefined;

  constructor(message: string, options: ErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.hint = options.hint;
  }
}

/** Bad flags or missing input. `main` prints the usage of the command. */
export class UsageError extends MiniappError {
  override readonly exitCode = ExitCode.usage;
  override readonly code: string = 'USAGE';
}

/**
 * A command refused where it cannot work (a full-screen view with stdout
 * piped), whose one line names what to run instead: the flags were right,
 * so no pointer to the usage follows. Exit 2, as every usage error.
 */
export class RefusedError extends UsageError {}

/** A setting is missing or cannot work (a key of the wrong length, an unknown key, a bad URL). */
export class ConfigError extends MiniappError {
  override readonly exitCode = ExitCode.usage;
  override readonly code: string = 'CONFIG';
}

/** A port that something else listens on: the flag's value cannot be used now (exit 2, as a setting that cannot work). */
export class PortInUseError extends ConfigError {
  override readonly code: string = 'PORT_IN_USE';
}

/** One or more encrypted fields failed their authentication-tag check. */
export class DecryptError extends MiniappError {
  override readonly exitCode = ExitCode.decrypt;
  override readonly code: string = 'DECRYPT_FAILED';
  constructor(
    message: string,
    readonly failedFields: readonly string[],
    options: ErrorOptions = {},
  ) {
    super(message, options);
  }
}

/** Credentials are missing, expired or rejected. */
export class AuthError extends MiniappError {
  override readonly exitCode = ExitCode.auth;
  override readonly code: string = 'AUTH';
  constructor(message: string, options: ErrorOptions & { code?: string } = {}) {
    super(message, options);
    if (options.code) this.code = options.code;
  }
}

/** The upstream answered with a failure, or could not be reached (network, time-out, TLS). */
export class UpstreamError extends MiniappError {
  override readonly exitCode = ExitCode.upstream;
  override readonly code: string = 'UPSTREAM';
  constructor(message: string, options: ErrorOptions & { code?: string } = {}) {
    super(message, options);
    if (options.code) this.code = options.code;
  }
}

/** A command stopped by a signal before its work was done; the message says how far it got. */
export class InterruptedError extends MiniappError {
  override readonly exitCode = ExitCode.interrupted;
  override readonly code: string = 'INTERRUPTED';
}
