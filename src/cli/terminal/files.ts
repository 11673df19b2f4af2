/**
 * Writing the files a command produces (`--output FILE`).
 */
import { randomBytes } from 'node:crypto';
import { rm, rename, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { MiniappError } from '../../errors.js';

/**
 * Writes next to the target, then renames: a failure (a full disk, Ctrl-C,
 * an API error halfway) never leaves half a file where a whole one was, or
 * was expected.
 */
export async function writeAtomically(file: string, text: string): Promise<void> {
  const temp = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await writeFile(temp, text, { flag: 'wx' });
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw new MiniappError(`cannot write ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, {
      hint: 'check that the directory exists and is writable',
    });
  }
}
