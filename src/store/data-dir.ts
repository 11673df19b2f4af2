/**
 * The data dir of `serve`: checked and created one level at a time before
 * anything is written, so that a path that cannot be a directory fails at
 * once with its name (a regular file on the way, a read-only or virtual file
 * system such as /proc, where Node's recursive mkdir never returns).
 */
import { accessSync, constants, existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError } from '../errors.js';

const HINT = 'choose another with --data-dir or MINIAPP_DATA_DIR';

export function ensureDataDir(dir: string): string {
  const path = resolve(dir);
  const missing: string[] = [];
  let existing = path;
  while (!existsSync(existing)) {
    missing.unshift(existing);
    const parent = dirname(existing);
    if (parent === existing) break;
    existing = parent;
  }
  if (!statSync(existing).isDirectory()) {
    throw new ConfigError(
      existing === path ? `the data dir ${path} is not a directory` : `the data dir ${path} cannot be created: ${existing} is not a directory`,
      { hint: HINT },
    );
  }
  for (const level of missing) {
    try {
      mkdirSync(level, { mode: 0o700 });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' && statSync(level).isDirectory()) continue;
      throw new ConfigError(`the data dir ${path} cannot be created (${code ?? 'error'} at ${level})`, { hint: HINT, cause: error });
    }
  }
  try {
    accessSync(path, constants.W_OK | constants.X_OK);
  } catch {
    throw new ConfigError(`the data dir ${path} is not writable`, { hint: HINT });
  }
  return path;
}
