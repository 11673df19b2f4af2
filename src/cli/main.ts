/**
 * Builds the program, registers the command groups, runs it, and maps every
 * error to an exit code in one place. Never calls process.exit: the caller
 * (bin/miniapp.js or a test) decides what to do with the code.
 *
 * Start-up is a feature: only the group named on the command line is loaded
 * (its commander definitions); the others are listed by name and summary.
 * Each action then imports the domain modules it needs, and chalk, the
 * config file and the renderers load only once a command runs, so
 * `miniapp --help` loads commander and this file and little else.
 */
import { styleText } from 'node:util';
import { Command, CommanderError, Option } from 'commander';
import { ExitCode, MiniappError, UsageError, type ExitCode as Code } from '../errors.js';
import type { CommandContext, Context } from './context.js';
import { resolveColorLevel } from './color.js';
import type { OutStream } from './output.js';

export type Handler = (cc: CommandContext, command: Command) => Promise<void>;
/** Wraps a handler into a commander action that receives the command context. */
export type Bind = (handler: Handler) => (...args: unknown[]) => Promise<void>;
export type Register = (program: Command, bind: Bind) => void;

interface Group {
  name: string;
  summary: string;
  load: () => Promise<Register>;
}

/** Every command group, in the order `miniapp --help` lists them. */
export const GROUPS: readonly Group[] = [
  {
    name: 'serve',
    summary: 'run the relay, blog API and gRPC user service',
    load: async () => (await import('./commands/serve.js')).registerServe,
  },
  {
    name: 'callbacks',
    summary: 'list the unlink callbacks the relay recorded',
    load: async () => (await import('./commands/callbacks.js')).registerCallbacks,
  },
  {
    name: 'users',
    summary: 'the gRPC user service: CRUD, watch, bulk, sync, chat',
    load: async () => (await import('./commands/users.js')).registerUsers,
  },
  {
    name: 'monitor',
    summary: 'live metrics, log lines and chat of a running serve',
    load: async () => (await import('./commands/monitor.js')).registerMonitor,
  },
  {
    name: 'webhooks',
    summary: 'list webhook deliveries, verify signatures',
    load: async () => (await import('./commands/webhooks.js')).registerWebhooks,
  },
  {
    name: 'decrypt',
    summary: 'decrypt the personal fields of a login-me response',
    load: async () => (await import('./commands/decrypt.js')).registerDecrypt,
  },
  {
    name: 'insights',
    summary: 'media and account insights as tables, CSV or JSON',
    load: async () => (await import('./commands/insights.js')).registerInsights,
  },
  {
    name: 'token',
    summary: 'exchange, refresh and show partner-API tokens',
    load: async () => (await import('./commands/token.js')).registerToken,
  },
  {
    name: 'me',
    summary: 'read the signed-in user (login-me), decrypted',
    load: async () => (await import('./commands/me.js')).registerMe,
  },
  {
    name: 'logout',
    summary: 'remove the login connection, forget the tokens',
    load: async () => (await import('./commands/logout.js')).registerLogout,
  },
  {
    name: 'doctor',
    summary: 'check key, AAD, certificates, upstream and tokens',
    load: async () => (await import('./commands/doctor.js')).registerDoctor,
  },
  {
    name: 'sandbox',
    summary: 'offline emulators of the partner and graph APIs',
    load: async () => (await import('./commands/sandbox.js')).registerSandbox,
  },
  {
    name: 'config',
    summary: 'read and write settings of a profile',
    load: async () => (await import('./commands/config.js')).registerConfig,
  },
];

interface GlobalOptions {
  profile: string;
  json?: boolean;
  color: boolean;
  debug?: boolean;
}

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

const EXIT_CODES_HELP = `
Exit codes:
  0  success          3  decryption failed
  1  failure          4  authentication (missing, expired or rejected credentials)
  2  usage or config  5  upstream, network, time-out or TLS failure

Settings come from flags, then MINIAPP_* environment variables, then the
profile (\`miniapp config list\`). Run \`miniapp COMMAND --help\` for details.`;

export async function buildProgram(
  ctx: Context,
  argv: readonly string[],
  onCommand: (cc: CommandContext, command: Command) => void,
): Promise<Command> {
  const stderrColor = resolveColorLevel({
    noColorFlag: argv.includes('--no-color'),
    env: ctx.env,
    isTTY: Boolean(ctx.io.stderr.isTTY),
  });
  const program = new Command('miniapp')
    .description('Operate mini-app backends: partner login API, relay, insights, user service, blog API, sandboxes.')
    .version(ctx.version, '-V, --version', 'print the version')
    .addOption(
      new Option('--profile <name>', 'config profile to use (env MINIAPP_PROFILE)').default(
        ctx.env.MINIAPP_PROFILE?.trim() || 'default',
      ),
    )
    .option('--json', 'print exact JSON on stdout')
    .option('--no-color', 'disable colours (also NO_COLOR=1)')
    .option('--debug', 'print stack traces of errors')
    .helpOption('-h, --help', 'show help')
    .addHelpText('after', EXIT_CODES_HELP)
    .showHelpAfterError()
    .exitOverride()
    .configureOutput({
      writeOut: (text) => void ctx.io.stdout.write(text),
      writeErr: (text) => void ctx.io.stderr.write(text),
      outputError: (text, write) => write(stderrColor > 0 ? styleText('red', text) : text),
    });

  const bind: Bind = (handler) => async (...args) => {
    const command = args.at(-1) as Command;
    const globals = command.optsWithGlobals<GlobalOptions>();
    const [{ createOutput }, { checkProfileName, Settings }] = await Promise.all([
      import('./output.js'),
      import('../config/settings.js'),
    ]);
    const profile = checkProfileName(globals.profile);
    const cc: CommandContext = {
      ...ctx,
      out: await createOutput(ctx.io, { json: Boolean(globals.json), noColor: !globals.color, env: ctx.env }),
      profile,
      debug: Boolean(globals.debug),
      settings: new Settings(profile, ctx.env, ctx.homedir),
    };
    onCommand(cc, command);
    await handler(cc, command);
  };

  const wanted = groupNameOf(argv);
  for (const group of GROUPS) {
    if (group.name === wanted) {
      (await group.load())(program, bind);
      program.commands.find((command) => command.name() === group.name)?.summary(group.summary);
    } else {
      program.command(group.name).summary(group.summary).helpOption(false);
    }
  }
  return program;
}

/** Runs the CLI with `argv` (without node and script) and returns the exit code. */
export async function runCli(argv: readonly string[], ctx: Context): Promise<Code> {
  let active: { cc: CommandContext; command: Command } | undefined;
  try {
    const program = await buildProgram(ctx, argv, (cc, command) => {
      active = { cc, command };
    });
    await program.parseAsync([...argv], { from: 'user' });
    return ExitCode.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // commander has printed the message (and the usage) already.
      return error.exitCode === 0 ? ExitCode.ok : ExitCode.usage;
    }
    await reportError(error, ctx, argv, active?.cc.debug ?? argv.includes('--debug'));
    if (error instanceof UsageError && active) {
      ctx.io.stderr.write(`\n${active.command.helpInformation()}`);
    }
    return error instanceof MiniappError ? error.exitCode : ExitCode.failure;
  }
}

async function reportError(error: unknown, ctx: Context, argv: readonly string[], debug: boolean): Promise<void> {
  const { createOutput } = await import('./output.js');
  const color = (await createOutput(ctx.io, { json: false, noColor: argv.includes('--no-color'), env: ctx.env })).errColor;
  const stderr: OutStream = ctx.io.stderr;
  const write = (text: string) => void stderr.write(`${text}\n`);
  if (error instanceof MiniappError) {
    write(`${color.red('error:')} ${error.message}`);
    if (error.hint) write(color.dim(error.hint));
  } else {
    const message = error instanceof Error ? error.message : String(error);
    write(`${color.red('error:')} unexpected failure: ${message}`);
    if (!debug) write(color.dim('this is a bug in miniapp; run again with --debug for the stack trace and report it'));
  }
  if (debug) {
    let current: unknown = error;
    while (current instanceof Error) {
      write(color.dim(current.stack ?? String(current)));
      current = current.cause;
      if (current) write(color.dim('caused by:'));
    }
  }
}
