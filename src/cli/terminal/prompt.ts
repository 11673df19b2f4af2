/**
 * Asking the person at the terminal, as `gh auth login` and `stripe login`
 * do: only when both stdin and stderr are terminals and not under CI (every
 * prompt has a flag or stdin for scripts), on stderr so stdout stays data,
 * and secrets without echo.
 */
import type { CommandContext } from '../context.js';
import { MiniappError } from '../../errors.js';

export function canPrompt(cc: Pick<CommandContext, 'io' | 'env'>): boolean {
  return Boolean(cc.io.stdin.isTTY && cc.io.stderr.isTTY) && !cc.env.CI;
}

/** Reads a secret without echo; Ctrl-C at the prompt ends the command (exit 1) without storing anything. */
export async function promptSecret(cc: Pick<CommandContext, 'io' | 'env'>, message: string, validate?: (value: string) => string | true): Promise<string> {
  const { default: password } = await import('@inquirer/password');
  try {
    return await password(
      { message, mask: false, ...(validate ? { validate } : {}) },
      { input: cc.io.stdin as NodeJS.ReadableStream, output: cc.io.stderr as NodeJS.WritableStream, clearPromptOnDone: false },
    );
  } catch (error) {
    if ((error as Error).name === 'ExitPromptError' || (error as Error).name === 'AbortPromptError') {
      throw new MiniappError('cancelled at the prompt; nothing was changed');
    }
    throw error;
  }
}
