import type { Command } from 'commander';
import type { Bind } from '../main.js';
import type { CommandContext } from '../context.js';
import { MiniappError } from '../../errors.js';
import { isMaskedValue, SETTINGS, settingSpec } from '../../config/keys.js';
import { maskSecret } from '../output.js';
import type { ResolvedSetting } from '../../config/settings.js';
import { configFilePath } from '../../config/paths.js';

const KEYS_HELP = `\nSettings (environment variable in brackets; env beats the file):\n${SETTINGS.map(
  (s) => `  ${s.key.padEnd(14)} ${s.description} [${s.env}]${s.default ? ` (default ${s.default})` : ''}`,
).join('\n')}`;

export function registerConfig(program: Command, bind: Bind): void {
  const config = program
    .command('config')
    .description('Read and write settings. Each --profile is a separate namespace in one file, mode 0600.')
    .addHelpText('after', KEYS_HELP);

  config
    .command('set')
    .description('validate and store a setting in the profile ("-" as VALUE reads it from stdin)')
    .argument('<key>', 'setting name')
    .argument('<value>', 'value, or "-" to read it from stdin (keeps secrets out of shell history)')
    // PEM text starts with "-----BEGIN": a value, not an option.
    .allowUnknownOption()
    .addHelpText('after', '\nExamples:\n  miniapp config set base-url https://partner.example.com\n  miniapp config set decrypt-key - < key.txt')
    .action(bind(runSet));

  config
    .command('get')
    .description('print the value in effect for a setting (secrets masked unless --reveal or --json)')
    .argument('<key>', 'setting name')
    .option('--reveal', 'print a secret in full')
    .action(bind(runGet));

  config
    .command('unset')
    .description('remove a setting from the profile')
    .argument('<key>', 'setting name')
    .action(bind(runUnset));

  config
    .command('list')
    .description('every setting with its value in effect and where it comes from (secrets masked)')
    .option('--reveal', 'print secrets in full')
    .action(bind(runList));

  config.command('path').description('print the path of the config file').action(bind(runPath));
}

async function runSet(cc: CommandContext, command: Command): Promise<void> {
  const [key, raw] = command.processedArgs as [string, string];
  const spec = settingSpec(key);
  let input = raw;
  if (raw === '-') {
    const { readInput } = await import('../input.js');
    input = await readInput(undefined, cc.io.stdin, { what: `value of ${key}`, limit: 1024 * 1024 });
  }
  const value = spec.validate(input);
  const store = await cc.settings.store();
  store.setSetting(cc.profile, key, value);
  cc.out.success(`set ${key} in profile "${cc.profile}"`);
  if (cc.settings.fromEnv(spec) !== undefined) {
    cc.out.warn(`${spec.env} is set in this environment and overrides the stored value`);
  }
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
    throw new MiniappError(`${key} is not set in profile "${cc.profile}"`, {
      hint: `set it with \`miniapp config set ${key} VALUE\` or ${resolved.spec.env}`,
    });
  }
  if (cc.out.json) {
    cc.out.printJson({ key, value: resolved.value, source: resolved.source, profile: cc.profile });
    return;
  }
  const value = shown(resolved, reveal)!;
  cc.out.line(value);
  if (value !== resolved.value) cc.out.info(cc.out.errColor.dim('(masked; add --reveal to print it)'));
}

async function runUnset(cc: CommandContext, command: Command): Promise<void> {
  const [key] = command.processedArgs as [string];
  const spec = settingSpec(key);
  const store = await cc.settings.store();
  if (store.unsetSetting(cc.profile, key)) cc.out.success(`removed ${key} from profile "${cc.profile}"`);
  else cc.out.info(`${key} was not set in profile "${cc.profile}"`);
  if (cc.settings.fromEnv(spec) !== undefined) cc.out.warn(`${spec.env} is still set in this environment`);
}

async function runList(cc: CommandContext, command: Command): Promise<void> {
  const reveal = Boolean(command.opts<{ reveal?: boolean }>().reveal);
  await cc.settings.store(); // a broken file fails the whole listing, not one row
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
  cc.out.line(configFilePath(cc.settings.configDir));
}
