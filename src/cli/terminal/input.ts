/**
 * A command's input from a FILE argument or stdin ("-" or no FILE): the one
 * place for the checks (a terminal on stdin, a missing file, a size cap) and
 * the errors that say what to pass instead. Commands that stream (bulk
 * imports) open it; the others read it whole, as bytes or as text.
 */
// The callback API, promisified: node:fs/promises would load a dozen more of
// Node's own modules (readline among them) into `miniapp decrypt`'s start-up.
import { createReadStream, readFile as readFileCallback, stat as statCallback } from 'node:fs';
import { promisify } from 'node:util';
import { UsageError } from '../../errors.js';
import type { InStream } from '../render/streams.js';
import { jsonSyntaxProblem } from '../../json-syntax.js';

export { linesOf } from '../../lines.js';

const readFile = promisify(readFileCallback);
const stat = promisify(statCallback);

const DEFAULT_INPUT_LIMIT = 10 * 1024 * 1024;

interface InputOptions {
  what: string;
  limit?: number;
}

const fromStdin = (file: string | undefined) => file === undefined || file === '-';

/** Checks that FILE is a readable file (or that stdin is not a terminal) and says how large FILE is. */
async function check(file: string | undefined, stdin: InStream, what: string): Promise<number | undefined> {
  if (fromStdin(file)) {
    if (stdin.isTTY) throw new UsageError(`no ${what}: pass a FILE argument or pipe it on stdin`);
    return undefined;
  }
  try {
    const info = await stat(file!);
    if (!info.isFile()) throw new UsageError(`${file} is not a file`);
    return info.size;
  } catch (error) {
    if (error instanceof UsageError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(code === 'ENOENT' ? `no such file: ${file}` : `cannot read ${file}: ${(error as Error).message}`);
  }
}

/** The input as a stream of chunks, for commands that process it as it comes. */
export async function openInput(file: string | undefined, stdin: InStream, options: InputOptions): Promise<AsyncIterable<Buffer | string>> {
  await check(file, stdin, options.what);
  return fromStdin(file) ? stdin : createReadStream(file!);
}

/** The input as raw bytes, nothing decoded (a signature is over bytes). */
export async function readInputBytes(file: string | undefined, stdin: InStream, options: InputOptions): Promise<Buffer> {
  const limit = options.limit ?? DEFAULT_INPUT_LIMIT;
  const size = await check(file, stdin, options.what);
  if (size !== undefined) {
    if (size > limit) throw new UsageError(`${file} is ${size} bytes; the ${options.what} may be at most ${limit} bytes`);
    return readFile(file!);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stdin) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    total += buffer.length;
    if (total > limit) throw new UsageError(`the ${options.what} on stdin exceeds ${limit} bytes`);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

/** The input as UTF-8 text. */
export async function readInput(file: string | undefined, stdin: InStream, options: InputOptions = { what: 'input' }): Promise<string> {
  return (await readInputBytes(file, stdin, options)).toString('utf8');
}

/** Parses JSON input, pointing at the problem without echoing the content (it may hold secrets). */
export function parseJsonInput(text: string, what: string): unknown {
  if (!text.trim()) throw new UsageError(`the ${what} is empty`);
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new UsageError(`the ${what} is not valid JSON: ${jsonSyntaxProblem(text, error)}`);
  }
}

/** Lets go of stdin, so that a command that ends before its input does not wait on the terminal. */
export function destroyInput(stdin: InStream): void {
  const stream = stdin as InStream & { destroy?: () => void };
  if (typeof stream.destroy === 'function') stream.destroy();
}
