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

/** Values of flags that are checked by hand (case-insensitive, lists) rather than by commander's choices. */
const FLAG_VALUES: Record<string, readonly string[]> = {
  '--referrer': ['DEFAULT', 'sandbox'],
  '--types': ['created', 'updated', 'deleted', 'created,updated', 'created,deleted', 'updated,deleted'],
  '--store': ['sqlite', 'memory'],
  '--log-level': ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
  '--level': ['trace', 'debug', 'info', 'warn', 'error', 'fatal'],
  '--callback-method': ['POST', 'GET'],
  '--error-shape': ['envelope', 'bare', 'top-level'],
  '--reason': ['UNLINK', 'WITHDRAWAL_TERMS', 'WITHDRAWAL_PLATFORM'],
  '--state': ['pending', 'delivered', 'failed', 'cancelled', 'held'],
  '--component': ['http', 'grpc', 'webhooks', 'serve'],
  '--period': ['day', 'week', 'days_28', 'lifetime'],
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
  /** Metric names the insights commands know (for --metrics). */
  metrics: () => Promise<string[]>;
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
  const current = words.at(-1) ?? '';
  let expecting: Option | undefined;
  for (const word of done) {
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
    if (sub) command = sub;
  }
  let candidates: Candidate[];
  if (expecting) {
    candidates = await valuesOf(expecting, sources);
  } else if (current.startsWith('-')) {
    candidates = optionsOf(command)
      .flatMap((option) => (option.long ? [{ value: option.long, description: option.description }] : []))
      .filter((c, index, all) => all.findIndex((other) => other.value === c.value) === index);
  } else {
    candidates = visible(command).map((sub) => ({ value: sub.name(), description: sub.summary() || sub.description().split(/[.:]/)[0]! }));
  }
  return candidates.filter((candidate) => candidate.value.startsWith(current));
}

async function valuesOf(option: Option, sources: CompletionSources): Promise<Candidate[]> {
  const flag = option.long ?? '';
  let values: readonly string[] = option.argChoices ?? FLAG_VALUES[flag] ?? [];
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
