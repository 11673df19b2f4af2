import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Sandbox } from '../helpers/cli.js';
import { GROUPS, groupNameOf } from '../../src/cli/main.js';

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

describe('miniapp (program)', () => {
  it('lists every command group in --help, with the exit codes', async () => {
    const result = await sb.run(['--help']);
    expect(result.code).toBe(0);
    const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    for (const group of GROUPS) expect(result.stdout).toMatch(new RegExp(`\\n  ${group.name} +${literal(group.summary)}`));
    expect(result.stdout).toContain('--profile <name>');
    expect(result.stdout).toContain('2  usage or config');
  });

  it("shows a group's own help through `help GROUP` and `GROUP --help`", async () => {
    const viaHelp = await sb.run(['help', 'decrypt']);
    const viaFlag = await sb.run(['decrypt', '--help']);
    expect(viaHelp.stdout).toContain('Usage: miniapp decrypt [options] [file]');
    expect(viaFlag.stdout).toBe(viaHelp.stdout);
  });

  it('prints the version', async () => {
    expect(await sb.run(['--version'])).toMatchObject({ code: 0, stdout: '9.9.9-test\n' });
  });

  it('answers an unknown command or option with exit 2, one error line, a suggestion and where the usage is', async () => {
    const command = await sb.run(['decrpyt']);
    expect(command.code).toBe(2);
    expect(command.stderr).toBe("error: unknown command 'decrpyt' (did you mean 'decrypt'?)\nRun 'miniapp --help' for usage.\n");

    const option = await sb.run(['config', 'list', '--bogus']);
    expect(option.code).toBe(2);
    expect(option.stderr).toBe("error: unknown option '--bogus'\nRun 'miniapp config list --help' for usage.\n");
  });

  it('is a usage error to run no command at all', async () => {
    const result = await sb.run([]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Usage: miniapp');
  });

  it('finds the group name behind global options', () => {
    expect(groupNameOf(['--profile', 'decrypt', 'config', 'list'])).toBe('config');
    expect(groupNameOf(['--json', 'decrypt'])).toBe('decrypt');
    expect(groupNameOf(['--profile=x', 'decrypt'])).toBe('decrypt');
    expect(groupNameOf(['help', 'config'])).toBe('config');
    expect(groupNameOf(['--help'])).toBeUndefined();
  });
});
