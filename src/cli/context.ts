/**
 * The one dependency object handed to every command. `processContext()`
 * is the only place that reads the real process; tests build their own
 * with captured streams, a temp config dir and a fixed clock.
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import type { Settings } from '../config/settings.js';
import type { Output } from './render/output.js';
import type { Io } from './render/streams.js';
import type { Telemetry } from '../telemetry/telemetry.js';

export interface Context {
  io: Io;
  env: Readonly<Record<string, string | undefined>>;
  homedir: string;
  now: () => Date;
  version: string;
  /** Resolves with the signal's name when the process is asked to stop (SIGINT, SIGTERM). */
  waitForShutdown: () => Promise<string>;
  /** Traces of this command's calls, when OTEL_* asks for them (main.ts); undefined: off. */
  telemetry?: Telemetry | undefined;
}

/** What a command's action receives: the context plus what the global flags decided. */
export interface CommandContext extends Context {
  out: Output;
  profile: string;
  debug: boolean;
  settings: Settings;
}

let cachedVersion: string | undefined;

function packageVersion(): string {
  cachedVersion ??= (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  return cachedVersion;
}

/**
 * A reader that closed its end of stdout or stderr (`| head -1`) is the
 * reader's choice, not a failure: writes to that stream stop silently, the
 * exit code stays the command's own, and a command that runs until stopped
 * (watch, logs -f, serve) stops as on Ctrl-C once nobody reads its stdout.
 */
export function quietOnClosedPipe<Stream extends NodeJS.WriteStream>(stream: Stream, onClosed: () => void = () => undefined): Stream {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE' && error.code !== 'ERR_STREAM_DESTROYED') throw error;
    onClosed();
  });
  return stream;
}

/**
 * The context of the real process. `options.io` makes the standard streams
 * other than the process's own: the quick path (quick.ts) writes and reads
 * pipes and files with plain system calls (stdio.ts); the full CLI, whose
 * commands may run for hours (serve, watch), uses the process streams.
 * Either way `onStdoutClosed` is called when the reader of stdout goes away.
 */
export function processContext(options: { io?: (onStdoutClosed: () => void) => Io } = {}): Context {
  const stdoutClosed: (() => void)[] = [];
  const onStdoutClosed = () => {
    for (const listener of stdoutClosed.splice(0)) listener();
  };
  let io: Io;
  if (options.io) {
    io = options.io(onStdoutClosed);
  } else {
    io = {
      stdout: quietOnClosedPipe(process.stdout, onStdoutClosed),
      stderr: quietOnClosedPipe(process.stderr),
      // Made when a command first reads it: process.stdin loads Node's file and stream modules, which most commands
      // (serve among them) never need.
      get stdin() {
        return process.stdin;
      },
    };
  }
  return {
    io,
    env: process.env,
    homedir: homedir(),
    now: () => new Date(),
    version: packageVersion(),
    waitForShutdown: () =>
      new Promise((resolve) => {
        const stop = (signal: string) => {
          resolve(signal);
          // Removed once every listener of this signal has run: one that counts the others (signal-exit, which ora
          // and its cursor handling load) took this one, removed at once, for gone and ended the process with the
          // signal, before the command could say how far it got.
          setImmediate(() => {
            process.off('SIGINT', stop);
            process.off('SIGTERM', stop);
          });
        };
        process.on('SIGINT', stop);
        process.on('SIGTERM', stop);
        stdoutClosed.push(() => stop('EPIPE'));
      }),
  };
}
