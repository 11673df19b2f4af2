/**
 * Issue 42's second round of a newcomer's defects in the CLI, each driven
 * through the CLI as a user meets it: in-process (test/helpers/cli.ts), or
 * the built launcher as a child process where the process itself matters.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Sandbox } from '../helpers/cli.js';
import { launch } from '../helpers/launcher.js';

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

describe('counts in words', () => {
  it('say "1 byte", not "1 bytes", of an AAD and of a key', async () => {
    const doctor = await sb.run(['doctor', '--json'], { env: { MINIAPP_DECRYPT_AAD: 'text:A' } });
    const aad = (JSON.parse(doctor.stdout).checks as { check: string; detail: string }[]).find((c) => c.check === 'decrypt AAD')!;
    expect(aad.detail).toBe('1 byte, read as text (written text:)');
    const key = await sb.run(['config', 'set', 'decrypt-key', 'ab']);
    expect(key.code).toBe(2);
    expect(key.stderr).toContain('it is 2 hex characters, which is 1 byte\n');
    const two = await sb.run(['doctor', '--json'], { env: { MINIAPP_DECRYPT_AAD: 'text:AB' } });
    expect(JSON.parse(two.stdout).checks.find((c: { check: string }) => c.check === 'decrypt AAD').detail).toBe('2 bytes, read as text (written text:)');
  });
});

describe('the version as JSON', () => {
  it('is the same pretty JSON from `--json --version` as from `version --json`, in process and through the launcher', async () => {
    const command = await sb.run(['version', '--json']);
    expect(command.code).toBe(0);
    expect(command.stdout).toBe(`${JSON.stringify({ version: '9.9.9-test', node: process.versions.node }, null, 2)}\n`);
    for (const argv of [['--json', '--version'], ['--version', '--json'], ['--json', '-V']]) {
      const flag = await sb.run(argv);
      expect(flag.code, argv.join(' ')).toBe(0);
      expect(flag.stdout, argv.join(' ')).toBe(command.stdout);
    }
    // The launcher answers --version on its quick path: the same text there.
    const quick = launch(sb.root, ['--json', '--version']);
    const full = launch(sb.root, ['version', '--json']);
    expect(quick.code).toBe(0);
    expect(full.code).toBe(0);
    expect(quick.stdout).toBe(full.stdout);
    expect(quick.stdout).toMatch(/^\{\n {2}"version": "[^"]+",\n {2}"node": "[^"]+"\n\}\n$/);
  });
});
