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
    (words) =>
      `COMP_WORDS=(miniapp ${words.map(quote).join(' ')}); COMP_CWORD=${words.length}; COMPREPLY=(); _miniapp; echo "#case"; printf '%s\n' "\${COMPREPLY[@]}"`,
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

describe('completion of arguments, command-specific flags and --flag=value (issue 24, item 13)', () => {
  it('in bash: setting names, shells, statuses, methods, breakdowns, values after "=", and current metric names', () => {
    const { offered } = bashComplete(
      ['config', 'set', ''],
      ['config', 'get', 'grpc-'],
      ['config', 'unset', 'decrypt-'],
      ['config', 'set', 'base-url', ''],
      ['completion', ''],
      ['orders', 'list', '--status', 'PA'],
      ['orders', 'pay', 'ord_x', '--method', 'test_d'],
      ['insights', 'account', '--breakdown', ''],
      // bash splits `--format=` at the "=" (COMP_WORDBREAKS): the words are --format, = and what follows.
      ['insights', 'media', '--format', '='],
      ['insights', 'media', '--format', '=', 'cs'],
      ['insights', 'media', '--metrics', ''],
      ['insights', 'media', '--metrics', 'reach,to'],
    );
    const [keys, grpc, decrypt, value, shells, status, method, breakdown, afterEquals, afterEqualsCs, metrics, listed] = offered;
    expect(keys).toEqual(expect.arrayContaining(['base-url', 'decrypt-key', 'grpc-addr', 'grpc-token', 'grpc-tls', 'graph-token']));
    expect(grpc).toEqual(['grpc-addr', 'grpc-token', 'grpc-tls', 'grpc-ca']);
    expect(decrypt).toEqual(['decrypt-key', 'decrypt-aad']);
    // The value of a setting is free text: nothing but what bash offers by default (files), and no setting names.
    expect(value).not.toContain('base-url');
    expect(shells).toEqual(['bash', 'zsh', 'fish']);
    expect(status).toEqual(['PAYMENT_PENDING', 'PAID', 'PAYMENT_FAILED', 'PARTIALLY_REFUNDED']);
    expect(method).toEqual(['test_decline_insufficient_funds', 'test_decline_card_declined']);
    expect(breakdown).toEqual(['country', 'city', 'age', 'gender', 'age,gender']);
    expect(afterEquals).toEqual(['table', 'csv', 'json', 'html']);
    expect(afterEqualsCs).toEqual(['csv']);
    expect(metrics).toEqual(expect.arrayContaining(['reach', 'saved', 'shares', 'views', 'total_interactions', 'navigation']));
    for (const retired of ['impressions', 'plays', 'video_views', 'engagement', 'exits', 'taps_forward', 'taps_back', 'audience_city'])
      expect(metrics).not.toContain(retired);
    expect(listed).toEqual(['reach,total_interactions']);
  });

  it('in zsh and fish, which keep --flag=value one word: the value after the "="', async () => {
    const complete = async (...words: string[]) =>
      (await sb.run(['__complete', ...words])).stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => line.split('\t')[0]);
    expect(await complete('insights', 'media', '--format=c')).toEqual(['--format=csv']);
    expect(await complete('orders', 'list', '--status=EX')).toEqual(['--status=EXPIRED']);
    expect(await complete('insights', 'media', '--metrics=reach,vie')).toEqual(['--metrics=reach,views']);
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
