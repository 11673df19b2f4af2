/**
 * Reading a command's input from a file argument or stdin, with a size cap
 * and errors that say what to pass instead.
 */
import { readFile, stat } from 'node:fs/promises';
import { UsageError } from '../errors.js';
import type { InStream } from './output.js';

export const DEFAULT_INPUT_LIMIT = 10 * 1024 * 1024;

export async function readInput(
  file: string | undefined,
  stdin: InStream,
  options: { what: string; limit?: number } = { what: 'input' },
): Promise<string> {
  const limit = options.limit ?? DEFAULT_INPUT_LIMIT;
  if (file !== undefined && file !== '-') {
    try {
      const info = await stat(file);
      if (!info.isFile()) throw new UsageError(`${file} is not a file`);
      if (info.size > limit) throw new UsageError(`${file} is ${info.size} bytes; the ${options.what} may be at most ${limit} bytes`);
      return await readFile(file, 'utf8');
    } catch (error) {
      if (error instanceof UsageError) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      throw new UsageError(code === 'ENOENT' ? `no such file: ${file}` : `cannot read ${file}: ${(error as Error).message}`);
    }
  }
  if (stdin.isTTY) {
    throw new UsageError(`no ${options.what}: pass a FILE argument or pipe it on stdin`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stdin) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    size += buffer.length;
    if (size > limit) throw new UsageError(`the ${options.what} on stdin exceeds ${limit} bytes`);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Parses JSON input, pointing at the problem without echoing the content (it may hold secrets). */
export function parseJsonInput(text: string, what: string): unknown {
  if (!text.trim()) throw new UsageError(`the ${what} is empty`);
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new UsageError(`the ${what} is not valid JSON: ${(error as Error).message}`);
  }
}
