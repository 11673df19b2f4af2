/**
 * The real launcher (bin/miniapp.cjs, or another entry such as the full-CLI
 * fixture) run as a child process against the compiled dist/, with a home,
 * config and data dir of the test's own and nothing of the caller's
 * environment but PATH.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

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

function launchArgs(args: readonly string[], options: LaunchOptions): string[] {
  return [...(options.nodeArgs ?? []), options.entry ?? BIN, ...args];
}

function launchEnv(home: string, options: LaunchOptions): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: home,
    MINIAPP_CONFIG_DIR: join(home, 'config'),
    MINIAPP_DATA_DIR: join(home, 'data'),
    ...options.env,
  };
}

export function launch(home: string, args: readonly string[], options: LaunchOptions = {}): Launched {
  const result = spawnSync(process.execPath, launchArgs(args, options), {
    cwd: options.cwd,
    input: options.input ?? '',
    encoding: 'utf8',
    env: launchEnv(home, options),
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** As launch, without blocking this process meanwhile (for a test that also plays a server the command talks to). */
export function launchAsync(home: string, args: readonly string[], options: LaunchOptions = {}): Promise<Launched> {
  const child = spawn(process.execPath, launchArgs(args, options), { cwd: options.cwd, env: launchEnv(home, options) });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  child.stdin.end(options.input ?? '');
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

/** The modules in each chunk of the full CLI's bundle (dist/bundle/), as scripts/bundle-cli.mjs records them. */
function bundleModules(): Record<string, string[]> {
  const file = join(ROOT, 'dist', 'bundle-modules.json');
  if (!existsSync(file)) throw new Error('dist/bundle-modules.json is missing: run `npm run build` (npm test does)');
  return JSON.parse(readFileSync(file, 'utf8')) as Record<string, string[]>;
}

/**
 * What a traced process (test/fixtures/trace-loads.mjs) loaded, one specifier
 * or URL an entry. A chunk of the full CLI's bundle (`require:./serve-HASH.cjs`)
 * counts as every module bundled into it: its entry is followed by their file
 * URLs, as the ESM build's loads would show them, so a test names the modules
 * it expects or forbids and not the chunks they happen to sit in.
 */
export function readTrace(file: string): string[] {
  const chunks = bundleModules();
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .flatMap((entry) => {
      const chunk = /^require:(?:\.\.\/dist\/bundle\/|\.\/)([^/]+\.cjs)$/.exec(entry)?.[1];
      const modules = chunk === undefined ? undefined : chunks[basename(chunk)];
      return modules ? [entry, ...modules.map((path) => pathToFileURL(path).href)] : [entry];
    });
}

/**
 * Runs the launcher with every module load traced (test/fixtures/trace-loads.mjs)
 * and gives what it loaded (readTrace); fails unless it exits 0.
 */
export function traceLoads(home: string, args: readonly string[], options: LaunchOptions = {}): { loaded: string[]; result: Launched } {
  const trace = join(home, `trace-${Math.random().toString(36).slice(2)}.txt`);
  const result = launch(home, args, {
    ...options,
    env: { ...options.env, MINIAPP_TRACE_LOADS: trace },
    nodeArgs: ['--import', join(ROOT, 'test', 'fixtures', 'trace-loads.mjs'), ...(options.nodeArgs ?? [])],
  });
  if (result.code !== 0) throw new Error(`miniapp ${args.join(' ')} exited ${result.code}: ${result.stderr}`);
  return { loaded: readTrace(trace), result };
}
