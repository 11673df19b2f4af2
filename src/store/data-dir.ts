/**
 * The data dir of `serve`: checked and created one level at a time before
 * anything is written (directories.ts), with its name in every failure.
 */
import { ensureDirectory } from '../directories.js';

const HINT = 'choose another with --data-dir or MINIAPP_DATA_DIR';

export function ensureDataDir(dir: string): string {
  return ensureDirectory(dir, 'the data dir', HINT);
}
