/**
 * What the `miniapp users` tests share: a real `miniapp serve` (HTTP on
 * 127.0.0.1:0 and the gRPC user service on 127.0.0.1, port 0 unless a test
 * restarts on a known port), a raw grpc-js client of the same proto, and a
 * runner of the CLI whose stdin stays open until the test ends it.
 */
import { PassThrough, Writable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import type { RunningServe } from '../../../src/server/serve.js';
import { startTestServe } from '../../helpers/serve.js';
import { userServiceDefinition } from '../../../src/users/proto.js';
import { runCli } from '../../../src/cli/main.js';
import type { Context } from '../../../src/cli/context.js';
import type { StoreLocation } from '../../../src/store/store.js';
import { afterEach, beforeEach } from 'vitest';
import { Capture, Sandbox, type RunOptions, type RunResult } from '../../helpers/cli.js';
import { useBackendStore, type BackendStore } from '../../helpers/backend-store.js';
import type { Backend } from '../../helpers/postgres.js';

const NOW = new Date('2026-11-21T12:00:00Z');

export interface UserServer {
  running: RunningServe;
  address: string;
  port: number;
  token: string;
  /** MINIAPP_GRPC_ADDR and MINIAPP_GRPC_TOKEN for the CLI. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** serve on `store`, else SQLite in `dataDir`, else in memory. */
export async function startUserServer(options: { port?: number; dataDir?: string; store?: StoreLocation } = {}): Promise<UserServer> {
  const running = await startTestServe({
    grpc: { host: '127.0.0.1', port: options.port ?? 0 },
    store: options.store ?? (options.dataDir ? { kind: 'sqlite', dataDir: options.dataDir } : { kind: 'memory' }),
    shutdownDeadlineMs: 1_000,
  });
  const address = running.grpc!.address;
  const token = running.adminToken!;
  let closed = false;
  return {
    running,
    address,
    port: running.grpc!.port,
    token,
    env: { MINIAPP_GRPC_ADDR: address, MINIAPP_GRPC_TOKEN: token },
    close: async () => {
      if (closed) return;
      closed = true;
      await running.close();
    },
  };
}

export interface UsersCli {
  /** The CLI's temp home of the running test. */
  readonly sb: Sandbox;
  /** The backend's store (a fresh database for each test). */
  readonly store: BackendStore;
  /** The serve of the running test, on the backend's store. */
  readonly server: UserServer;
  /** `miniapp users ARGV` against that serve (MINIAPP_GRPC_ADDR and MINIAPP_GRPC_TOKEN set; `options.env` on top). */
  users(argv: string[], options?: RunOptions): Promise<RunResult>;
  /** Something the test opened that must close before serve stops (a client, a stream). */
  defer(close: () => void | Promise<void>): void;
}

/**
 * The set-up every `miniapp users` CLI suite shares: before each test a CLI
 * sandbox and a serve on `backend`'s store (a fresh database of its own);
 * after it, what the test deferred, then serve, then the sandbox.
 */
export function useUsersCli(backend: Backend): UsersCli {
  const store = useBackendStore(backend);
  let sb: Sandbox | undefined;
  let server: UserServer | undefined;
  let deferred: (() => void | Promise<void>)[] = [];
  beforeEach(async () => {
    sb = new Sandbox();
    server = await startUserServer({ store: store.location() });
  });
  afterEach(async () => {
    for (const close of deferred.reverse()) await close();
    deferred = [];
    await server?.close();
    sb?.dispose();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useUsersCli: used outside a test');
    return value;
  };
  return {
    store,
    get sb() {
      return started(sb);
    },
    get server() {
      return started(server);
    },
    users(argv, options = {}) {
      return started(sb).run(['users', ...argv], { ...options, env: { ...started(server).env, ...options.env } });
    },
    defer(close) {
      deferred.push(close);
    },
  };
}

/** A plain grpc-js client of user.v1.UserService, as any other program would use it. */
export type RawClient = grpc.Client & Record<string, (...args: unknown[]) => unknown>;

export function rawClient(address: string): RawClient {
  const { Client } = userServiceDefinition();
  return new Client(address, grpc.credentials.createInsecure()) as unknown as RawClient;
}

export function bearer(token: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  return metadata;
}

/** A unary call of the raw client as a promise. */
export function rawUnary<T>(client: RawClient, method: string, request: unknown, token?: string): Promise<T> {
  return new Promise((resolve, reject) => {
    (client[method] as (req: unknown, md: grpc.Metadata, cb: (error: grpc.ServiceError | null, response: T) => void) => void)(
      request,
      token ? bearer(token) : new grpc.Metadata(),
      (error, response) => (error ? reject(error) : resolve(response)),
    );
  });
}

export async function waitFor(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * A terminal's output side: what is written is kept in `text`. A stream, not
 * just an object with `write`, as a prompt pipes its output into it.
 */
class TerminalCapture extends Writable {
  text = '';
  readonly isTTY = true;
  readonly columns = 120;
  // As process.stdout and process.stderr: a stream piped into it (a prompt's output) does not end it.
  readonly _isStdio = true;
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

export interface LiveRun {
  stdin: PassThrough;
  stdout: { text: string };
  stderr: { text: string };
  /** Asks the command to stop, as Ctrl-C would. */
  interrupt(): void;
  done: Promise<number>;
}

/**
 * Runs the CLI in-process with an stdin the test writes to and a Ctrl-C the
 * test presses. `terminal`: stdin, stdout and stderr are all a terminal
 * (the person types on stdin).
 */
export function runLive(
  sb: Sandbox,
  argv: string[],
  env: Record<string, string>,
  options: { tty?: boolean; terminal?: boolean; columns?: number } = {},
): LiveRun {
  const stdin = new PassThrough();
  const stdout = options.terminal ? new TerminalCapture() : new Capture(options.tty ?? false, options.columns);
  const stderr = options.terminal ? new TerminalCapture() : new Capture(options.tty ?? false, options.columns);
  // As the process's signals: what waits when Ctrl-C is pressed hears of it; what starts waiting after hears of the
  // next one. A press before anything waits is kept for the first that does.
  const presses: { promise: Promise<string>; resolve: (signal: string) => void; taken: boolean }[] = [];
  const press = () => {
    let resolve!: (signal: string) => void;
    const promise = new Promise<string>((done) => (resolve = done));
    presses.push({ promise, resolve, taken: false });
  };
  press();
  const shutdown = () => {
    const current = presses.at(-1)!;
    current.taken = true;
    return current.promise;
  };
  const interrupt = (signal: string) => {
    const current = presses.at(-1)!;
    current.resolve(signal);
    if (current.taken) press();
  };
  const ctx: Context = {
    io: { stdout, stderr, stdin: Object.assign(stdin, { isTTY: Boolean(options.terminal) }) },
    env: { ...sb.env, ...env },
    homedir: sb.root,
    now: () => NOW,
    version: '9.9.9-test',
    waitForShutdown: shutdown,
  };
  return { stdin, stdout, stderr, interrupt: () => interrupt('SIGINT'), done: runCli(argv, ctx) };
}
