/**
 * The quick path: the short commands that scripts and shells run over and
 * over (`miniapp --help`, `config get`, `token show`, `decrypt`), served
 * from one CommonJS bundle (dist/quick/cli.cjs, built by
 * scripts/bundle-quick.mjs from this file) that the launcher loads first.
 *
 * The code is the CLI's own: the same program (program.ts), the same
 * command definitions and actions, with commander bundled in. What it
 * saves is the machinery around them. Node's ESM loader (resolving, linking
 * and evaluating some twenty modules) costs these commands more than their
 * work does, and so does creating process.stdout on a pipe (stdio.ts).
 *
 * Anything else (every other command, `config set`, `token exchange`,
 * group help such as `config --help`, completion) is not served here:
 * quickCli returns undefined before touching anything, and the launcher
 * runs the full CLI (main.ts).
 */
import { groupNameOf, leadingOperands, rewriteHelp } from './argv.js';
import type { Loaders } from './program.js';
import type { ExitCode } from '../errors.js';

/** Each in a chunk of its own, so that `--help` loads none of them (nor node:crypto, which decrypt needs). */
const LOADERS: Loaders = {
  config: async () => (await import('./commands/config.js')).registerConfigGet,
  decrypt: async () => (await import('./commands/decrypt.js')).registerDecrypt,
  token: async () => (await import('./commands/token.js')).registerTokenShow,
  version: async () => (await import('./program.js')).registerVersion,
};

/**
 * Whether the quick path serves this command line: its leading words name
 * no group (`--help`, `--version`, `help`, a mistyped group), or one of its
 * few commands, and no group it lacks is named further on (`help --json users`).
 */
export function servesQuickly(argv: readonly string[]): boolean {
  if (argv[0] === '__complete') return false;
  const args = rewriteHelp(argv);
  const wanted = groupNameOf(args);
  if (wanted !== undefined && !Object.hasOwn(LOADERS, wanted)) return false;
  const [group, command] = leadingOperands(args).words;
  if (group === undefined || (group === 'help' && command === undefined)) return true;
  if (group === 'decrypt' || group === 'version') return true;
  return (group === 'config' && command === 'get') || (group === 'token' && command === 'show');
}

/** Runs `argv` on the quick path and resolves with the exit code, or returns undefined when the full CLI must run it. */
export function quickCli(argv: readonly string[]): Promise<ExitCode> | undefined {
  if (!servesQuickly(argv)) return undefined;
  return (async () => {
    const [{ processContext }, { runProgram }, { directIo }] = await Promise.all([
      import('./context.js'),
      import('./program.js'),
      import('./terminal/stdio.js'),
    ]);
    return runProgram(argv, processContext({ io: directIo }), LOADERS);
  })();
}
