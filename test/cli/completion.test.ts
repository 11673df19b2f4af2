/**
 * Shell completion as a shell runs it: the bash script sourced in a real
 * bash, COMP_WORDS set as bash sets them, the function called, COMPREPLY
 * read back; `miniapp` on PATH is the real launcher.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Sandbox } from '../helpers/cli.js';

const bin = fileURLToPath(new URL('../../bin/miniapp.cjs', import.meta.url));
let dir: string;
let sb: Sandbox;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'miniapp-completion-'));
  writeFileSync(join(dir, 'miniapp'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(bin)} "$@"\n`);
  chmodSync(join(dir, 'miniapp'), 0o755);
  sb = new Sandbox();
  await sb.run(['config', 'set', 'base-url', 'https://a.example']);
  await sb.run(['--profile', 'prod', 'config', 'set', 'base-url', 'https://b.example']);
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  sb.dispose();
});

/** What bash offers for each list of words (the last word of each is under the cursor), from one bash. */
function bashComplete(...cases: string[][]): { offered: string[][]; registration: string } {
  const quote = (word: string) => `'${word.replace(/'/g, "'\\''")}'`;
  const steps = cases.map(
    (words) => `COMP_WORDS=(miniapp ${words.map(quote).join(' ')}); COMP_CWORD=${words.length}; COMPREPLY=(); _miniapp; echo "#case"; printf '%s\n' "\${COMPREPLY[@]}"`,
  );
  const script = ['source <(miniapp completion bash)', 'complete -p miniapp', ...steps].join('\n');
  const result = spawnSync('bash', ['-c', script], {
    encoding: 'utf8',
    env: { PATH: `${dir}:${process.env.PATH}`, HOME: sb.root, ...sb.env },
  });
  expect(result.status, result.stderr).toBe(0);
  const [registration = '', ...blocks] = result.stdout.split('#case\n');
  return { registration: registration.trim(), offered: blocks.map((block) => block.split('\n').filter(Boolean)) };
}

describe('miniapp completion bash, in a real bash', () => {
  it('registers itself and completes commands, subcommands, flags and their values', () => {
    const { registration, offered } = bashComplete(
      ['us'],
      [''],
      ['users', ''],
      ['sandbox', 'logi'],
      ['insights', 'media', '--format', ''],
      ['token', 'exchange', '--referrer', ''],
      ['users', 'watch', '--types', 'cr'],
      ['monitor', 'logs', '--level', 'w'],
      ['users', 'watch', '--'],
      ['--profile', ''],
      ['config', 'list', '--profile', 'p'],
    );
    expect(registration).toBe('complete -o default -F _miniapp miniapp');
    const [us, all, users, sandbox, format, referrer, types, level, flags, profiles, prod] = offered;
    expect(us).toEqual(['users']);
    expect(all).toEqual(expect.arrayContaining(['serve', 'users', 'monitor', 'config', 'completion']));
    expect(users).toEqual(['create', 'get', 'update', 'delete', 'list', 'watch', 'bulk-create', 'sync', 'chat']);
    expect(sandbox).toEqual(['login']);
    expect(format).toEqual(['table', 'csv', 'json', 'html']);
    expect(referrer).toEqual(['DEFAULT', 'sandbox']);
    expect(types).toEqual(['created', 'created,updated', 'created,deleted']);
    expect(level).toEqual(['warn']);
    expect(flags).toEqual(expect.arrayContaining(['--types', '--user-id', '--addr', '--profile', '--json', '--help']));
    expect(flags).not.toContain('--version');
    expect(profiles).toEqual(['default', 'prod']);
    expect(prod).toEqual(['prod']);
  });
});

describe('miniapp completion', () => {
  it('prints a script for zsh and fish that asks the same engine', async () => {
    for (const shell of ['zsh', 'fish']) {
      const result = await sb.run(['completion', shell]);
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('miniapp __complete');
    }
    expect((await sb.run(['completion', 'zsh'])).stdout.startsWith('#compdef miniapp\n')).toBe(true);
  });

  it('refuses an unknown shell with exit 2', async () => {
    const result = await sb.run(['completion', 'tcsh']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('unknown shell "tcsh"');
  });
});
