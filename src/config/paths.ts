/**
 * Where miniapp keeps its files: the XDG base directories, not conf's
 * default (which appends "-nodejs"), each overridable for tests and
 * operators.
 */
import { join } from 'node:path';

type Env = Readonly<Record<string, string | undefined>>;

function nonEmpty(value: string | undefined): string | undefined {
  return value?.trim() ? value : undefined;
}

export function configDir(env: Env, homedir: string): string {
  return nonEmpty(env.MINIAPP_CONFIG_DIR) ?? join(nonEmpty(env.XDG_CONFIG_HOME) ?? join(homedir, '.config'), 'miniapp');
}

export function dataDir(env: Env, homedir: string): string {
  return nonEmpty(env.MINIAPP_DATA_DIR) ?? join(nonEmpty(env.XDG_DATA_HOME) ?? join(homedir, '.local', 'share'), 'miniapp');
}

const CONFIG_NAME = 'config';

export function configFilePath(dir: string): string {
  return join(dir, `${CONFIG_NAME}.json`);
}
