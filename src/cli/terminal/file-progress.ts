/**
 * The progress line of a job over the items of an input file (`users
 * bulk-create`, `users sync`), with the file's total: it is counted first,
 * from a read of its own, so that the line shows "of N" and a time left
 * from its first frame. Counting is cheap beside the job it measures (rows
 * are read a thousand times faster than a server hashes their passwords).
 * Stdin cannot be read twice, so it has no total; nor does a file that
 * cannot be counted (the job itself then says what is wrong with it).
 */
import { createReadStream } from 'node:fs';
import { basename } from 'node:path';
import type { CommandContext } from '../context.js';
import type { ProgressLine } from '../render/progress.js';

export async function fileProgress(
  cc: CommandContext,
  file: string,
  options: { unit: string; verb: string; count: (input: AsyncIterable<Buffer | string>) => Promise<number> },
): Promise<ProgressLine> {
  const fromStdin = file === '-';
  const progress = cc.out.progress({ unit: options.unit, label: `${options.verb} ${fromStdin ? 'stdin' : basename(file)}` });
  if (progress.live && !fromStdin) progress.total = await options.count(createReadStream(file)).catch(() => undefined);
  return progress;
}
