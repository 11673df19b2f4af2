/**
 * A directory miniapp writes in (serve's data dir, the config dir), checked
 * and created one level at a time before anything is written, so that a
 * path that cannot be a directory fails at once with its name: a regular
 * file on the way, a read-only or virtual file system such as /proc, where
 * Node's recursive mkdir never returns.
 */
import { accessSync, constants, existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError } from './errors.js';

/**
 * Why `dir` cannot be a directory, when a path of it is not one: "the config
 * dir /a/b/c is not a directory", "... cannot be created: /a/b is not a
 * directory"; undefined when it can be.
 */
export function notADirectory(dir: string, what: string): string | undefined {
  const path = resolve(dir);
  let existing = path;
  while (!existsSync(existing)) {
    const parent = dirname(existing);
    if (parent === existing) return undefined;
    existing = parent;
  }
  if (statSync(existing).isDirectory()) return undefined;
  return existing === path ? `${what} ${path} is not a directory` : `${what} ${path} cannot be created: ${existing} is not a directory`;
}

/** `what`: "the data dir"; `hint`: what to do instead ("choose another with --data-dir ..."). Returns the absolute path. */
export function ensureDirectory(dir: string, what: string, hint: string): string {
  const path = resolve(dir);
  const missing: string[] = [];
  let existing = path;
  while (!existsSync(existing)) {
    missing.unshift(existing);
    const parent = dirname(existing);
    if (parent === existing) break;
    existing = parent;
  }
  const wrong = notADirectory(path, what);
  if (wrong) throw new ConfigError(wrong, { hint });
  for (const level of missing) {
    try {
      mkdirSync(level, { mode: 0o700 });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' && statSync(level).isDirectory()) continue;
      throw new ConfigError(`${what} ${path} cannot be created (${code ?? 'error'} at ${level})`, { hint, cause: error });
    }
  }
  try {
    accessSync(path, constants.W_OK | constants.X_OK);
  } catch {
    throw new ConfigError(`${what} ${path} is not writable`, { hint });
  }
  return path;
}
