/**
 * What the command line says before commander reads it: which group it
 * names, its leading words, `help A B` as `A B --help`. Small and free of
 * imports, so that the launcher's quick path (quick.ts) can route on it
 * before loading anything.
 */

/** Global options that take a value, so that their value is not taken for a command name. */
const VALUE_OPTIONS = new Set(['--profile']);

/** The first operand of argv (the group name), or the one after `help`. */
export function groupNameOf(argv: readonly string[]): string | undefined {
  const operands: string[] = [];
  for (let i = 0; i < argv.length && operands.length < 2; i++) {
    const arg = argv[i]!;
    if (arg === '--') break;
    if (VALUE_OPTIONS.has(arg)) i++;
    else if (!arg.startsWith('-')) operands.push(arg);
  }
  return operands[0] === 'help' ? operands[1] : operands[0];
}

/** The operands before the first option or `--`. */
export function leadingOperands(argv: readonly string[]): { start: number; words: string[] } {
  let i = 0;
  while (i < argv.length && argv[i]!.startsWith('-') && argv[i] !== '--') i += VALUE_OPTIONS.has(argv[i]!) ? 2 : 1;
  const start = i;
  const words: string[] = [];
  for (; i < argv.length && !argv[i]!.startsWith('-'); i++) words.push(argv[i]!);
  return { start, words };
}

/** `help users create` is `users create --help` (commander's help command takes one word). */
export function rewriteHelp(argv: readonly string[]): readonly string[] {
  const { start, words } = leadingOperands(argv);
  if (words[0] !== 'help' || words.length < 2) return argv;
  return [...argv.slice(0, start), ...words.slice(1), '--help', ...argv.slice(start + words.length)];
}
