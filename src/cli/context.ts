/**
 * The one dependency object handed to every command. `processContext()`
 * is the only place that reads the real process; tests build their own
 * with captured streams, a temp config dir and a fixed clock.
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import type { Settings } from '../config/settings.js';
import type { Io, Output } from './output.js';

export interface Context {
  io: Io;
  env: Readonly<Record<string, string | undefined>>;
  homedir: string;
  now: () => Date;
  version: string;
  /** Resolves with the signal's name when the process is asked to stop (SIGINT, SIGTERM). */
  waitForShutdown: () => Promise<string>;
}

/** What a command's action receives: the context plus what the global flags decided. */
export interface CommandContext extends Context {
  out: Output;
  profile: string;
  debug: boolean;
  settings: Settings;
}

let cachedVersion: string | undefined;

export function packageVersion(): string {
  cachedVersion ??= (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
    .version;
  return cachedVersion;
}

export function processContext(): Context {
  return {
    io: { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin },
    env: process.env,
    homedir: homedir(),
    now: () => new Date(),
    version: packageVersion(),
    waitForShutdown: () =>
      new Promise((resolve) => {
        const stop = (signal: NodeJS.Signals) => {
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
          resolve(signal);
        };
        process.on('SIGINT', stop);
        process.on('SIGTERM', stop);
      }),
  };
}
