/**
 * Builds the program, registers the command groups, runs it, and maps every
 * error to an exit code in one place. Never calls process.exit: the caller
 * (bin/miniapp.cjs or a test) decides what to do with the code.
 *
 * Start-up is a feature: only the group named on the command line is
 * registered (by its loader); the others are listed by name and summary.
 * Each action then imports the domain modules it needs, and chalk, the
 * config file and the renderers load only once a command runs, so
 * `miniapp --help` loads commander and this file and little else. Which
 * loaders there are is the caller's: main.ts has every group, quick.ts the
 * few short commands it serves without Node's ESM loader.
 */
import { Command, CommanderError, Option } from './commander.js';
import { ExitCode, MiniappError, RefusedError, UsageError, type ExitCode as Code } from '../errors.js';
import type { CommandContext, Context } from './context.js';
import type { OutStream } from './render/streams.js';
import { groupNameOf, leadingOperands, rewriteHelp } from './argv.js';

export { groupNameOf, leadingOperands, rewriteHelp } from './argv.js';

import type { Bind, Register } from './command.js';

/** A command group as `miniapp --help` lists it. */
export interface GroupSummary {
  name: string;
  summary: string;
}

/**
 * What registers each group's commands, by group name. The full CLI
 * (main.ts) has one for every group, each importing its command file on
 * demand; the quick path (quick.ts) has the few it serves.
 */
export type Loaders = Readonly<Partial<Record<string, () => Promise<Register>>>>;

/** Every command group, in the order `miniapp --help` lists them. */
export const GROUP_SUMMARIES: readonly GroupSummary[] = [
  { name: 'serve', summary: 'run the relay, blog API, metrics and the gRPC services' },
  { name: 'db', summary: 'the database of serve: status, migrate, copy to PostgreSQL' },
  { name: 'callbacks', summary: 'list the unlink callbacks the relay recorded' },
  { name: 'users', summary: 'the gRPC user service: CRUD, watch, bulk, sync, chat' },
  { name: 'inventory', summary: 'stock of the commerce services: levels, set, adjust' },
  { name: 'orders', summary: 'orders: create, get, list, pay, cancel' },
  { name: 'payments', summary: 'payments: show, refund' },
  { name: 'monitor', summary: 'live metrics, a dashboard, logs and chat of a running serve' },
  { name: 'webhooks', summary: 'webhook deliveries: list, resend, cancel, verify' },
  { name: 'decrypt', summary: 'decrypt the personal fields of a login-me response' },
  { name: 'insights', summary: 'media and account insights: tables, charts, CSV, JSON, HTML' },
  { name: 'token', summary: 'exchange, refresh and show partner-API tokens' },
  { name: 'me', summary: 'read the signed-in user (login-me), decrypted' },
  { name: 'logout', summary: 'remove the login connection, forget the tokens' },
  { name: 'doctor', summary: 'check key, AAD, certificates, upstream and tokens' },
  { name: 'sandbox', summary: 'offline emulators of the partner and graph APIs' },
  { name: 'config', summary: 'read and write settings of a profile' },
  { name: 'completion', summary: 'print the shell completion script (bash, zsh, fish)' },
  { name: 'version', summary: 'print the version (--json: {"version","node"})' },
];

/** What `miniapp version --json` and `miniapp --json --version` print. */
function versionJson(version: string): { version: string; node: string } {
  return { version, node: process.versions.node };
}

export function registerVersion(program: Command, bind: Bind): void {
  program
    .command('version')
    .description('Print the version of miniapp, as --version does; with --json, {"version": ..., "node": ...}.')
    .action(
      bind(async (cc) => {
        if (cc.out.json) cc.out.printJson(versionJson(cc.version));
        else cc.out.line(cc.version);
      }),
    );
}

export function registerCompletion(program: Command, bind: Bind): void {
  program
    .command('completion')
    .description(
      'Print the completion script for your shell. It completes commands, subcommands, flags, the values of ' +
        'enumerated flags (--format, --referrer, --types, ...) and profile names, from the CLI itself.',
    )
    .argument('<shell>', 'bash, zsh or fish')
    .addHelpText(
      'after',
      '\nInstall:\n' +
        '  bash  miniapp completion bash > ~/.local/share/bash-completion/completions/miniapp\n' +
        // biome-ignore lint/suspicious/noTemplateCurlyInString: zsh's own ${fpath[1]}, printed for the user to paste.
        '  zsh   miniapp completion zsh > "${fpath[1]}/_miniapp"   (then restart zsh)\n' +
        '  fish  miniapp completion fish > ~/.config/fish/completions/miniapp.fish',
    )
    .action(
      bind(async (cc, command) => {
        const { SHELLS, completionScript } = await import('./completion.js');
        const [shell] = command.processedArgs as [string];
        if (!(SHELLS as readonly string[]).includes(shell)) throw new UsageError(`unknown shell "${shell}": choose ${SHELLS.join(', ')}`);
        cc.out.write(completionScript(shell as (typeof SHELLS)[number]));
      }),
    );
}

interface GlobalOptions {
  profile: string;
  json?: boolean;
  color: boolean;
  debug?: boolean;
}

const EXIT_CODES_HELP = `
Exit codes:
  0  success          3  decryption failed
  1  failure          4  authentication (missing, expired or rejected credentials)
  2  usage or config  5  upstream, network, time-out or TLS failure
  130 interrupted (Ctrl-C) before a command that reports its progress was done
A setting a command needs that is not set is exit 4 when it is a credential
(a token: access/refresh token, graph-token, grpc-token) and exit 2 otherwise,
\`config get\` included.

Settings come from flags, then MINIAPP_* environment variables, then the
profile (\`miniapp config list\`). Run \`miniapp COMMAND --help\` for details.`;

/** The words that name a command: `miniapp users get`. */
export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let current: Command | null = command; current; current = current.parent) names.unshift(current.name());
  return names.join(' ');
}

/** How far apart two words are (Damerau-Levenshtein), for "did you mean". */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of candidates) {
    const found = distance(word, name);
    if (found <= Math.max(1, Math.floor(name.length / 3)) && (!best || found < best.distance)) best = { name, distance: found };
  }
  return best?.name;
}

/** What went wrong in commander's parsing: the message, and the command whose usage helps. */
interface UsageProblem {
  message: string;
  command: Command;
}

/**
 * Commander's Command, with usage errors that stay on one line: the error,
 * and (printed by runCli) where to find the usage, instead of the whole help.
 * A command with subcommands that gets a word it does not take hears that
 * word was a mistyped subcommand, with a suggestion.
 */
class MiniappCommand extends Command {
  problem: { current?: UsageProblem } = {};

  override createCommand(name?: string): Command {
    const command = new MiniappCommand(name);
    command.problem = this.problem;
    return command;
  }

  override error(message: string, options?: { code?: string; exitCode?: number }): never {
    let text = message.replace(/^error: /, '');
    let code = options?.code;
    if (code === 'commander.excessArguments' && this.commands.length > 0) {
      const word = String(this.args[0] ?? '');
      const suggestion = closest(
        word,
        this.commands.filter((c) => !(c as unknown as { _hidden?: boolean })._hidden).map((c) => c.name()),
      );
      text = `unknown command '${word}' for '${commandPath(this)}'${suggestion ? ` (did you mean '${suggestion}'?)` : ''}`;
      code = 'commander.unknownCommand';
    }
    // "unknown command 'serv'\n(Did you mean serve?)" on one line.
    text = text.replace(/\s*\(Did you mean (.+)\?\)\s*$/s, (_match, name: string) => ` (did you mean '${name.replace(/^--?/, (dash) => dash)}'?)`).trim();
    this.problem.current = { message: text, command: this };
    return super.error(`error: ${text}`, { ...options, code });
  }
}

export async function buildProgram(
  ctx: Context,
  argv: readonly string[],
  onCommand: (cc: CommandContext, command: Command) => void,
  options: { loaders: Loaders; allGroups?: boolean },
): Promise<Command> {
  const program = new MiniappCommand('miniapp')
    .description(
      'Operate mini-app backends: the partner login API and its relay, media insights, the gRPC user, commerce and monitoring services, the blog API and its webhooks, and offline sandboxes.',
    )
    .version(ctx.version, '-V, --version', 'print the version')
    .addOption(new Option('--profile <name>', 'config profile to use (env MINIAPP_PROFILE)').default(ctx.env.MINIAPP_PROFILE?.trim() || 'default'))
    .option('--json', 'print exact JSON on stdout')
    .option('--no-color', 'disable colours (also NO_COLOR=1)')
    .option('--color', 'colours even when piped or under NO_COLOR (also FORCE_COLOR=1)')
    .option('--debug', 'print stack traces of errors')
    .helpOption('-h, --help', 'show help')
    .addHelpText('after', EXIT_CODES_HELP)
    .exitOverride()
    .configureOutput({
      writeOut: (text) => void ctx.io.stdout.write(text),
      writeErr: (text) => void ctx.io.stderr.write(text),
      // runCli reports usage errors itself (one line, a hint, JSON under --json).
      outputError: () => undefined,
    });

  // --no-color wins over --color wherever each stands (README); commander keeps the last of the two.
  const ended = argv.indexOf('--');
  const saidNoColor = (ended === -1 ? argv : argv.slice(0, ended)).includes('--no-color');
  const bind: Bind =
    (handler) =>
    async (...args) => {
      const command = args.at(-1) as Command;
      const globals = command.optsWithGlobals<GlobalOptions>();
      const [{ createOutput }, { checkProfileName, Settings }] = await Promise.all([import('./render/output.js'), import('../config/settings.js')]);
      const profile = checkProfileName(globals.profile);
      const cc: CommandContext = {
        ...ctx,
        out: await createOutput(ctx.io, {
          json: Boolean(globals.json),
          noColor: saidNoColor || !globals.color,
          // --color and --no-color share one value: only a --color given on the command line forces colours.
          forceColor: !saidNoColor && globals.color && command.getOptionValueSourceWithGlobals('color') === 'cli',
          env: ctx.env,
        }),
        profile,
        debug: Boolean(globals.debug),
        settings: new Settings(profile, ctx.env, ctx.homedir),
      };
      onCommand(cc, command);
      await warnUnknownProfile(cc, command);
      await handler(cc, command);
    };

  const wanted = groupNameOf(argv);
  for (const group of GROUP_SUMMARIES) {
    const load = options.loaders[group.name];
    if (group.name === wanted && !load) throw new Error(`no loader for the command group ${group.name}`);
    if (load && (group.name === wanted || options.allGroups)) {
      (await load())(program, bind);
      program.commands.find((command) => command.name() === group.name)?.summary(group.summary);
    } else {
      program.command(group.name).summary(group.summary).helpOption(false);
    }
  }
  return program;
}

/**
 * `miniapp help A B`: every word must name a command, else it is the usage
 * error an unknown command is (exit 2, with a suggestion), never the
 * top-level help with exit 0.
 */
function checkHelpTopic(program: MiniappCommand, argv: readonly string[]): void {
  const { words } = leadingOperands(argv);
  if (words[0] !== 'help') return;
  let current: Command = program;
  for (const word of words.slice(1)) {
    if (word === 'help' && current === program) return;
    const names = current.commands.filter((c) => !(c as unknown as { _hidden?: boolean })._hidden).map((c) => c.name());
    const next = current.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (!next) {
      const suggestion = closest(word, names);
      const where = current === program ? '' : ` for '${commandPath(current)}'`;
      program.problem.current = { message: `unknown command '${word}'${where}${suggestion ? ` (did you mean '${suggestion}'?)` : ''}`, command: current };
      throw new CommanderError(ExitCode.usage, 'commander.unknownCommand', program.problem.current.message);
    }
    current = next;
  }
}

/** Whether `--json` is among the options (before a `--`). */
function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

/**
 * A profile other than "default" that was never written is most likely a
 * typo (MINIAPP_PROFILE=prdo): say so on stderr, once, before the command
 * runs on empty settings. Not for the commands that write or list profiles.
 */
async function warnUnknownProfile(cc: CommandContext, command: Command): Promise<void> {
  if (cc.profile === 'default') return;
  const path = commandPath(command);
  if (path === 'miniapp config set' || path === 'miniapp config profiles' || path === 'miniapp serve') return;
  const known = cc.settings.file().profileNames();
  if (known.includes(cc.profile)) return;
  cc.out.warn(`profile "${cc.profile}" has no settings yet${known.length ? ` (profiles: ${known.join(', ')})` : ''}; \`miniapp config profiles\` lists them`);
}

/**
 * `miniapp __complete WORDS...`, for the completion scripts: the candidates
 * of the last word, one `value<TAB>description` a line. Never fails loudly:
 * a completion that cannot be computed offers nothing.
 */
async function runComplete(words: readonly string[], ctx: Context, loaders: Loaders): Promise<Code> {
  try {
    const program = await buildProgram(ctx, [], () => undefined, { loaders, allGroups: true });
    const { complete } = await import('./completion.js');
    const candidates = await complete(program, words.length ? words : [''], {
      profiles: async () => {
        const [{ ConfigFile }, { configDir }] = await Promise.all([import('../config/file.js'), import('../config/paths.js')]);
        return new ConfigFile(configDir(ctx.env, ctx.homedir)).profileNames();
      },
      metrics: async () => (await import('../insights/metrics.js')).currentMetricNames(),
      settings: async () => (await import('../config/keys.js')).SETTINGS.map((spec) => ({ value: spec.key, description: spec.description })),
    });
    for (const candidate of candidates) ctx.io.stdout.write(`${candidate.value}\t${candidate.description.replace(/\s+/g, ' ')}\n`);
  } catch {
    // nothing to offer
  }
  return ExitCode.ok;
}

/**
 * Runs the CLI with `argv` (without node and script) and the groups that
 * `loaders` can register, and returns the exit code.
 */
export async function runProgram(argv: readonly string[], ctx: Context, loaders: Loaders, onCommand?: (path: string) => void): Promise<Code> {
  if (argv[0] === '__complete') return runComplete(argv.slice(1), ctx, loaders);
  const leading = leadingOperands(argv);
  if (leading.words.length === 0 && wantsJson(argv) && argv.slice(0, leading.start).some((arg) => arg === '--version' || arg === '-V')) {
    // The same text as `miniapp version --json`.
    ctx.io.stdout.write(`${JSON.stringify(versionJson(ctx.version), null, 2)}\n`);
    return ExitCode.ok;
  }
  let active: { cc: CommandContext; command: Command } | undefined;
  let program: MiniappCommand | undefined;
  const args = rewriteHelp(argv);
  try {
    program = (await buildProgram(
      ctx,
      args,
      (cc, command) => {
        active = { cc, command };
        onCommand?.(commandPath(command));
      },
      { loaders },
    )) as MiniappCommand;
    checkHelpTopic(program, argv);
    await program.parseAsync([...args], { from: 'user' });
    active?.cc.out.releaseWarnings();
    return ExitCode.ok;
  } catch (thrown) {
    // A database that cannot answer is reported with its cause and exit code, whichever command met it (loaded
    // only then: the quick path never needs it).
    const error =
      (thrown as Error | undefined)?.name === 'StoreUnavailableError' ? ((await import('../store/errors.js')).storeErrorForCli(thrown) ?? thrown) : thrown;
    if (error instanceof CommanderError) {
      if (error.exitCode === 0) return ExitCode.ok;
      const problem = program?.problem.current;
      // Without a problem, commander has shown a help on stderr (a group named without a command).
      if (problem) await reportError(new UsageError(problem.message), ctx, argv, false, commandPath(problem.command));
      return ExitCode.usage;
    }
    const usageOf = error instanceof UsageError && !(error instanceof RefusedError) && active ? commandPath(active.command) : undefined;
    await reportError(error, ctx, argv, active?.cc.debug ?? argv.includes('--debug'), usageOf, active?.cc.out.takeWarnings() ?? []);
    return error instanceof MiniappError ? error.exitCode : ExitCode.failure;
  }
}

/**
 * The error on stderr: `error: MESSAGE` and the hint on the next line; for a
 * usage error, where the usage is (`Run 'miniapp users get --help' for
 * usage.`). With --json, one JSON object `{"error":{code,message,hint}}`.
 */
async function reportError(
  error: unknown,
  ctx: Context,
  argv: readonly string[],
  debug: boolean,
  usageOf?: string,
  warnings: readonly string[] = [],
): Promise<void> {
  const stderr: OutStream = ctx.io.stderr;
  const write = (text: string) => void stderr.write(`${text}\n`);
  const known = error instanceof MiniappError;
  const message = known ? error.message : `unexpected failure: ${error instanceof Error ? error.message : String(error)}`;
  const hints = [
    ...(known && error.hint ? [error.hint] : []),
    ...(usageOf ? [`Run '${usageOf} --help' for usage.`] : []),
    ...(!known && !debug ? ['this is a bug in miniapp; run again with --debug for the stack trace and report it'] : []),
  ];
  if (wantsJson(argv)) {
    const code = known ? error.code : 'INTERNAL';
    // One JSON object: the warnings held back while the command ran ride in it (render/output.ts).
    write(
      JSON.stringify({
        error: {
          code,
          exitCode: known ? error.exitCode : ExitCode.failure,
          message,
          ...(hints.length ? { hint: hints.join(' ') } : {}),
          ...(warnings.length ? { warnings } : {}),
        },
      }),
    );
  } else {
    const { createOutput } = await import('./render/output.js');
    const color = (await createOutput(ctx.io, { json: false, noColor: argv.includes('--no-color'), forceColor: argv.includes('--color'), env: ctx.env }))
      .errColor;
    write(`${color.red('error:')} ${message}`);
    for (const hint of hints) write(color.dim(hint));
  }
  if (debug) {
    const { createOutput } = await import('./render/output.js');
    const color = (await createOutput(ctx.io, { json: false, noColor: argv.includes('--no-color'), forceColor: argv.includes('--color'), env: ctx.env }))
      .errColor;
    let current: unknown = error;
    while (current instanceof Error) {
      write(color.dim(current.stack ?? String(current)));
      current = current.cause;
      if (current) write(color.dim('caused by:'));
    }
  }
}
