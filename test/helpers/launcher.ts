/**
 * The real launcher (bin/miniapp.cjs, or another entry such as the full-CLI
 * fixture) run as a child process against the compiled dist/, with a home,
 * config and data dir of the test's own and nothing of the caller's
 * environment but PATH.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const BIN = join(ROOT, 'bin', 'miniapp.cjs');

export interface LaunchOptions {
  env?: Record<string, string>;
  input?: string;
  nodeArgs?: readonly string[];
  cwd?: string;
  /** The entry to run instead of the launcher. */
  entry?: string;
}

export interface Launched {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function launch(home: string, args: readonly string[], options: LaunchOptions = {}): Launched {
  const result = spawnSync(process.execPath, [...(options.nodeArgs ?? []), options.entry ?? BIN, ...args], {
    cwd: options.cwd,
    input: options.input ?? '',
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH,
      HOME: home,
      MINIAPP_CONFIG_DIR: join(home, 'config'),
      MINIAPP_DATA_DIR: join(home, 'data'),
      ...options.env,
    },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/**
 * Runs the launcher with every module load traced (test/fixtures/trace-loads.mjs)
 * and gives what it loaded, one specifier or URL an entry; fails unless it exits 0.
 */
export function traceLoads(home: string, args: readonly string[], options: LaunchOptions = {}): { loaded: string[]; result: Launched } {
  const trace = join(home, `trace-${Math.random().toString(36).slice(2)}.txt`);
  const result = launch(home, args, {
    ...options,
    env: { ...options.env, MINIAPP_TRACE_LOADS: trace },
    nodeArgs: ['--import', join(ROOT, 'test', 'fixtures', 'trace-loads.mjs'), ...(options.nodeArgs ?? [])],
  });
  if (result.code !== 0) throw new Error(`miniapp ${args.join(' ')} exited ${result.code}: ${result.stderr}`);
  return { loaded: readFileSync(trace, 'utf8').split('\n').filter(Boolean), result };
}
