import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { AuthError, ConfigError, UsageError } from '../../errors.js';
import { isMaskedValue, SETTINGS, settingSpec } from '../../config/keys.js';
import { maskSecret } from '../render/output.js';
import type { ResolvedSetting } from '../../config/settings.js';
import { configFilePath } from '../../config/paths.js';

const KEYS_HELP = `\nSettings (environment variable in brackets; env beats the file):\n${SETTINGS.map(
  (s) => `  ${s.key.padEnd(14)} ${s.description} [${s.env}]${s.default ? ` (default ${s.default})` : ''}`,
).join('\n')}`;

/** The `config` command itself; its subcommands are added by the functions below. */
function configGroup(program: Command): Command {
  return program
    .command('config')
    .description('Read and write settings. Each --profile is a separate namespace in one file, mode 0600.')
    .addHelpText('after', KEYS_HELP);
}

export function registerConfig(program: Command, bind: Bind): void {
  const config = configGroup(program);
  registerSet(config, bind);
  registerGet(config, bind);
  registerRest(config, bind);
}

/** `config get` alone: what the quick path (src/cli/quick.ts) serves of this group. */
export function registerConfigGet(program: Command, bind: Bind): void {
  registerGet(configGroup(program), bind);
}

function registerSet(config: Command, bind: Bind): void {
  config
    .command('set')
    .description(
      'validate and store a setting in the profile. "-" as VALUE reads it from stdin, or on a terminal asks for it ' +
        'without echo (keeps secrets out of shell history). File settings (mtls-cert, mtls-key, mtls-ca, grpc-ca) ' +
        'are stored as absolute paths, or as the PEM text itself.',
    )
    .argument('<key>', 'setting name')
    .argument('<value>', 'value, or "-" to read it from stdin or the terminal')
    // PEM text starts with "-----BEGIN": a value, not an option.
    .allowUnknownOption()
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp config set base-url https://partner.example.com\n  miniapp config set decrypt-key -            # asks without echo\n  miniapp config set decrypt-key - < key.txt\n  miniapp config set mtls-key ./pki/client.key  # stored as an absolute path',
    )
    .action(bind(runSet));
}

function registerGet(config: Command, bind: Bind): void {
  config
    .command('get')
    .description(
      'print the value in effect for a setting. On a terminal a secret is masked unless --reveal; into a pipe or a ' +
        '$(...) a secret needs --reveal (or --json), so that a script never gets a masked value. A setting that is ' +
        'not set is exit 4 for a credential, else 2.',
    )
    .argument('<key>', 'setting name')
    .option('--reveal', 'print a secret in full')
    .addHelpText('after', '\nExamples:\n  miniapp config get base-url\n  KEY=$(miniapp config get decrypt-key --reveal)')
    .action(bind(runGet));
}

function registerRest(config: Command, bind: Bind): void {
  config.command('unset').description('remove a setting from the profile').argument('<key>', 'setting name').action(bind(runUnset));

  config
    .command('list')
    .description('every setting with its value in effect and where it comes from (secrets masked)')
    .option('--reveal', 'print secrets in full')
    .action(bind(runList));

  config.command('path').description('print the path of the config file').action(bind(runPath));

  config
    .command('profiles')
    .description('the profiles of the config file, with how many settings each holds; the one in use is marked')
    .action(bind(runProfiles));
}

async function runSet(cc: CommandContext, command: Command): Promise<void> {
  const [key, raw] = command.processedArgs as [string, string];
  const spec = settingSpec(key);
  let input = raw;
  if (raw === '-') input = await valueFromStdin(cc, key, spec.validate);
  const value = spec.validate(input);
  const store = await cc.settings.store();
  store.setSetting(cc.profile, key, value);
  if (cc.out.json) cc.out.printJson({ key, profile: cc.profile, stored: true, value: isMaskedValue(spec, value) ? maskSecret(value) : value });
  else cc.out.success(`set ${key} in profile "${cc.profile}"${value !== input.trim() && !value.startsWith('-----BEGIN') ? ` (${value})` : ''}`);
  if (cc.settings.fromEnv(spec) !== undefined) {
    cc.out.warn(`${spec.env} is set in this environment and overrides the stored value`);
  }
}

/** "-": piped stdin, or on a terminal a prompt without echo. */
async function valueFromStdin(cc: CommandContext, key: string, validate: (value: string) => string): Promise<string> {
  if (cc.io.stdin.isTTY) {
    const { canPrompt, promptSecret } = await import('../terminal/prompt.js');
    if (!canPrompt(cc)) {
      throw new UsageError(`no value for ${key} on stdin: pipe it (\`miniapp config set ${key} - < file\`) or give it as the argument`);
    }
    return promptSecret(cc, `${key}:`, (value) => {
      try {
        validate(value);
        return true;
      } catch (error) {
        return error instanceof ConfigError ? error.message : String(error);
      }
    });
  }
  const { readInput } = await import('../terminal/input.js');
  return readInput(undefined, cc.io.stdin, { what: `value of ${key}`, limit: 1024 * 1024 });
}

function shown(resolved: ResolvedSetting, reveal: boolean): string | undefined {
  const { value, spec } = resolved;
  if (value === undefined) return undefined;
  return !reveal && isMaskedValue(spec, value) ? maskSecret(value) : value;
}

function sourceLabel(resolved: ResolvedSetting): string {
  if (resolved.source === 'env') return `env ${resolved.spec.env}`;
  return resolved.source ?? '';
}

async function runGet(cc: CommandContext, command: Command): Promise<void> {
  const [key] = command.processedArgs as [string];
  const reveal = Boolean(command.opts<{ reveal?: boolean }>().reveal);
  const resolved = await cc.settings.get(key);
  if (resolved.value === undefined) {
    // The one rule for a missing setting: a credential is exit 4, anything else 2.
    const message = `${key} is not set in profile "${cc.profile}"`;
    const hint = `set it with \`miniapp config set ${key} VALUE${cc.profile === 'default' ? '' : ` --profile ${cc.profile}`}\` or ${resolved.spec.env}`;
    throw resolved.spec.credential ? new AuthError(message, { code: 'NO_CREDENTIALS', hint }) : new ConfigError(message, { hint });
  }
  if (cc.out.json) {
    cc.out.printJson({ key, value: resolved.value, source: resolved.source, profile: cc.profile });
    return;
  }
  const value = shown(resolved, reveal)!;
  if (value !== resolved.value && !cc.out.isTTY) {
    // A masked string in $(...) would be a wrong value that looks right.
    throw new UsageError(`${key} is a secret: into a pipe it is printed only with --reveal (or --json)`, {
      hint: `KEY=$(miniapp config get ${key} --reveal)`,
    });
  }
  cc.out.line(value);
  if (value !== resolved.value) cc.out.info(cc.out.errColor.dim('(masked; add --reveal to print it)'));
}

async function runUnset(cc: CommandContext, command: Command): Promise<void> {
  const [key] = command.processedArgs as [string];
  const spec = settingSpec(key);
  const store = await cc.settings.store();
  const removed = store.unsetSetting(cc.profile, key);
  if (cc.out.json) cc.out.printJson({ key, profile: cc.profile, removed });
  else if (removed) cc.out.success(`removed ${key} from profile "${cc.profile}"`);
  else cc.out.info(`${key} was not set in profile "${cc.profile}"`);
  if (cc.settings.fromEnv(spec) !== undefined) cc.out.warn(`${spec.env} is still set in this environment`);
}

async function runList(cc: CommandContext, command: Command): Promise<void> {
  const reveal = Boolean(command.opts<{ reveal?: boolean }>().reveal);
  cc.settings.file(); // a broken file fails the whole listing, not one row
  const resolved = await Promise.all(SETTINGS.map((spec) => cc.settings.get(spec.key).catch((error: unknown) => ({ spec, error }))));
  const rows = resolved.map((r) =>
    'error' in r
      ? { key: r.spec.key, value: undefined, source: 'invalid', env: r.spec.env, problem: (r.error as Error).message }
      : { key: r.spec.key, value: shown(r, reveal), source: r.source ? sourceLabel(r) : undefined, env: r.spec.env },
  );
  cc.out.table(
    rows,
    [
      { header: 'key', value: (r) => r.key },
      { header: 'value', value: (r) => r.value ?? ('problem' in r ? r.problem : ''), maxWidth: 60 },
      { header: 'source', value: (r) => r.source ?? '' },
    ],
    { profile: cc.profile, settings: rows.map(({ key, value, source, env }) => ({ key, value: value ?? null, source: source ?? null, env })) },
  );
}

async function runPath(cc: CommandContext): Promise<void> {
  const path = configFilePath(cc.settings.configDir);
  if (cc.out.json) cc.out.printJson({ path, profile: cc.profile });
  else cc.out.line(path);
}

async function runProfiles(cc: CommandContext): Promise<void> {
  const store = cc.settings.file();
  const names = store.profileNames();
  if (!names.includes(cc.profile)) names.push(cc.profile);
  const rows = names.sort().map((name) => ({ name, settings: Object.keys(store.settings(name)).length, active: name === cc.profile }));
  cc.out.table(
    rows,
    [
      { header: 'profile', value: (r) => `${r.name}${r.active && cc.out.isTTY ? ' *' : ''}` },
      { header: 'settings', value: (r) => r.settings },
      { header: 'in use', value: (r) => (r.active ? 'yes' : '') },
    ],
    rows,
  );
}
