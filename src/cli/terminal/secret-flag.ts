/**
 * A secret that a flag gives (`--password`): the value itself, "-" to read
 * the first line of piped stdin, or at a terminal (both "-" and no flag)
 * asked for without echo, as `gh auth login --with-token` and `stripe login`
 * do. Without a terminal, or under CI, nothing is asked: a missing value is
 * a usage error (exit 2) that says how to pass it.
 */
import type { CommandContext } from '../context.js';
import { UsageError } from '../../errors.js';

export interface SecretFlag {
  /** "--password" */
  flag: string;
  /** "password", for messages and the prompt. */
  what: string;
  /** How a script passes it: `printf %s "$PW" | miniapp users create ... --password -`. */
  pipeExample: string;
}

export async function secretOf(cc: CommandContext, value: string | undefined, spec: SecretFlag): Promise<string> {
  if (value !== undefined && value !== '-') return value;
  if (value === '-' && !cc.io.stdin.isTTY) return firstLineOfStdin(cc, spec);
  const { canPrompt, promptSecret } = await import('./prompt.js');
  if (!canPrompt(cc)) {
    const why = cc.env.CI ? 'CI is set' : !cc.io.stdin.isTTY ? 'stdin is not a terminal' : 'stderr is not a terminal';
    throw new UsageError(
      value === '-'
        ? `${spec.flag} - reads the ${spec.what} from stdin, but stdin is a terminal, and nothing is asked (${why})`
        : `no ${spec.what}: give ${spec.flag}, or ${spec.flag} - with the ${spec.what} piped on stdin (nothing is asked: ${why})`,
      { hint: `pipe it: ${spec.pipeExample}` },
    );
  }
  return promptSecret(cc, `${spec.what[0]!.toUpperCase()}${spec.what.slice(1)}:`, (answer) => (answer ? true : `the ${spec.what} must not be empty`));
}

async function firstLineOfStdin(cc: CommandContext, spec: SecretFlag): Promise<string> {
  const { readInput } = await import('./input.js');
  const text = await readInput('-', cc.io.stdin, { what: spec.what, limit: 4096 });
  const secret = text.split(/\r?\n/)[0] ?? '';
  if (!secret) throw new UsageError(`${spec.flag} -: stdin held no ${spec.what}`, { hint: `pipe it: ${spec.pipeExample}` });
  return secret;
}
