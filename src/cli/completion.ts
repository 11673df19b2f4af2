/**
 * Shell completion from the command tree itself, the way `gh` (cobra) does
 * it: `miniapp completion bash|zsh|fish` prints a small script that asks
 * `miniapp __complete WORDS...` for the candidates of the word under the
 * cursor. The answers come from the same commander definitions that parse
 * the command line (every command, subcommand and flag), the values of
 * enumerated flags, and the profiles of the config file, so the completion
 * never drifts from the CLI.
 *
 * Each candidate is printed as `value<TAB>description`; bash shows the
 * values, zsh and fish the descriptions too.
 */
import type { Command, Option } from 'commander';
import { ORDER_STATUSES } from '../commerce/order/order-rows.js';
import { UNLINK_REASON_NAMES } from '../login/unlink-reasons.js';

/** Values of flags that are checked by hand (case-insensitive, lists) rather than by commander's choices. */
const FLAG_VALUES: Record<string, readonly string[]> = {
  '--referrer': ['DEFAULT', 'sandbox'],
  '--types': ['created', 'updated', 'deleted', 'created,updated', 'created,deleted', 'updated,deleted'],
  '--store': ['sqlite', 'memory'],
  '--log-level': ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
  '--level': ['trace', 'debug', 'info', 'warn', 'error', 'fatal'],
  '--callback-method': ['POST', 'GET'],
  '--error-shape': ['envelope', 'bare', 'top-level'],
  '--reason': UNLINK_REASON_NAMES,
  '--state': ['pending', 'delivered', 'failed', 'cancelled', 'held'],
  '--component': ['http', 'grpc', 'webhooks', 'serve'],
  '--period': ['day', 'week', 'days_28', 'lifetime'],
  '--breakdown': ['country', 'city', 'age', 'gender', 'age,gender'],
};

/** Values of a flag that means one thing in one command and another elsewhere, by command path. */
const COMMAND_FLAG_VALUES: Record<string, Record<string, readonly string[]>> = {
  'miniapp orders list': { '--status': [...ORDER_STATUSES] },
  'miniapp orders pay': { '--method': ['test_approve', 'test_decline_insufficient_funds', 'test_decline_card_declined', 'test_timeout'] },
};

/** What the first argument of a command takes, by command path (a setting's name, a shell). */
const ARGUMENT_VALUES: Record<string, 'settings' | readonly string[]> = {
  'miniapp config set': 'settings',
  'miniapp config get': 'settings',
  'miniapp config unset': 'settings',
  'miniapp completion': ['bash', 'zsh', 'fish'],
};

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

export interface Candidate {
  value: string;
  description: string;
}

export interface CompletionSources {
  /** The profiles of the config file (for --profile). */
  profiles: () => Promise<string[]>;
  /** Metric names the insights commands know, without the retired ones (for --metrics). */
  metrics: () => Promise<string[]>;
  /** The settings `config set|get|unset` take. */
  settings: () => Promise<Candidate[]>;
}

function pathOf(command: Command): string {
  const names: string[] = [];
  for (let current: Command | null = command; current; current = current.parent) names.unshift(current.name());
  return names.join(' ');
}

function visible(command: Command): Command[] {
  return command.commands.filter((sub) => !(sub as unknown as { _hidden?: boolean })._hidden && sub.name() !== 'help');
}

/** The flags a command takes: its own, the global ones (not --version below the root), and --help. */
function optionsOf(command: Command): Option[] {
  const all: Option[] = [];
  for (let current: Command | null = command; current; current = current.parent) {
    all.push(...current.options.filter((option) => current === command || option.long !== '--version'));
  }
  const help = (command as unknown as { _getHelpOption?: () => Option | null })._getHelpOption?.();
  if (help) all.push(help);
  return all.filter((option) => !option.hidden);
}

function findOption(command: Command, flag: string): Option | undefined {
  return optionsOf(command).find((option) => option.long === flag || option.short === flag);
}

function takesValue(option: Option): boolean {
  return option.required || option.optional;
}

/**
 * The candidates for the last of `words` (the words after `miniapp`, the
 * last one being the word under the cursor, possibly empty).
 */
export async function complete(program: Command, words: readonly string[], sources: CompletionSources): Promise<Candidate[]> {
  let command = program;
  const done = words.slice(0, -1);
  let current = words.at(-1) ?? '';
  let expecting: Option | undefined;
  let operands = 0;
  for (const word of done) {
    // bash splits `--format=csv` at the "=" (COMP_WORDBREAKS): the "=" keeps the flag waiting for its value.
    if (expecting && word === '=') continue;
    if (expecting) {
      expecting = undefined;
      continue;
    }
    if (word === '--') break;
    if (word.startsWith('-')) {
      const [flag] = word.split('=');
      const option = findOption(command, flag!);
      if (option && takesValue(option) && !word.includes('=')) expecting = option;
      continue;
    }
    const sub = command.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (sub) {
      command = sub;
      operands = 0;
    } else operands++;
  }
  if (expecting && current === '=') current = '';
  let candidates: Candidate[];
  let prefix = '';
  // zsh and fish keep `--format=cs` one word: its value is completed after the "=".
  const inline = /^(--[^=]+)=(.*)$/.exec(current);
  const inlineOption = inline ? findOption(command, inline[1]!) : undefined;
  if (inline && inlineOption && takesValue(inlineOption)) {
    expecting = inlineOption;
    prefix = `${inline[1]}=`;
    current = inline[2]!;
  }
  if (expecting) {
    candidates = await valuesOf(expecting, command, sources);
    // A list flag (--metrics reach,sa): the last item is completed, after the ones before it.
    const comma = current.lastIndexOf(',');
    if (comma >= 0 && expecting.long === '--metrics') {
      prefix += current.slice(0, comma + 1);
      current = current.slice(comma + 1);
    }
  } else if (current.startsWith('-')) {
    candidates = optionsOf(command)
      .flatMap((option) => (option.long ? [{ value: option.long, description: option.description }] : []))
      .filter((c, index, all) => all.findIndex((other) => other.value === c.value) === index);
  } else if (visible(command).length > 0) {
    candidates = visible(command).map((sub) => ({ value: sub.name(), description: sub.summary() || sub.description().split(/[.:]/)[0]! }));
  } else {
    const argument = operands === 0 ? ARGUMENT_VALUES[pathOf(command)] : undefined;
    candidates = argument === 'settings' ? await sources.settings() : (argument ?? []).map((value) => ({ value, description: '' }));
  }
  return candidates.filter((candidate) => candidate.value.startsWith(current)).map((candidate) => ({ ...candidate, value: `${prefix}${candidate.value}` }));
}

async function valuesOf(option: Option, command: Command, sources: CompletionSources): Promise<Candidate[]> {
  const flag = option.long ?? '';
  let values: readonly string[] = option.argChoices ?? COMMAND_FLAG_VALUES[pathOf(command)]?.[flag] ?? FLAG_VALUES[flag] ?? [];
  if (flag === '--profile') values = await sources.profiles();
  if (flag === '--metrics') values = await sources.metrics();
  return values.map((value) => ({ value, description: '' }));
}

/** The script for `shell`: it asks `miniapp __complete` for candidates at each TAB. */
export function completionScript(shell: Shell): string {
  switch (shell) {
    case 'bash':
      return `# miniapp completion for bash. Install:  miniapp completion bash > ~/.local/share/bash-completion/completions/miniapp
# (or add  source <(miniapp completion bash)  to ~/.bashrc)
_miniapp() {
  local cur="\${COMP_WORDS[COMP_CWORD]}"
  [[ $cur == = ]] && cur=
  local IFS=$'\\n'
  local candidates
  candidates=$(miniapp __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null | cut -f1)
  COMPREPLY=($(compgen -W "$candidates" -- "$cur"))
}
complete -o default -F _miniapp miniapp
`;
    case 'zsh':
      return `#compdef miniapp
# miniapp completion for zsh. Install:  miniapp completion zsh > "\${fpath[1]}/_miniapp"  (then restart zsh)
# (or add  source <(miniapp completion zsh)  to ~/.zshrc, after compinit)
_miniapp() {
  local -a lines candidates
  lines=("\${(@f)$(miniapp __complete "\${(@)words[2,CURRENT]}" 2>/dev/null)}")
  local line
  for line in $lines; do
    [[ -z $line ]] && continue
    candidates+=("\${\${line%%$'\\t'*}//:/\\\\:}:\${line#*$'\\t'}")
  done
  if (( \${#candidates} )); then
    _describe 'miniapp' candidates
  else
    _files
  fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then _miniapp "$@"; else compdef _miniapp miniapp; fi
`;
    case 'fish':
      return `# miniapp completion for fish. Install:  miniapp completion fish > ~/.config/fish/completions/miniapp.fish
function __miniapp_complete
  set -l words (commandline -opc)
  miniapp __complete $words[2..-1] (commandline -ct) 2>/dev/null
end
complete -c miniapp -f -a '(__miniapp_complete)'
`;
  }
}
