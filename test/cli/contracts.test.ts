/**
 * Contracts of the launcher that scripts lean on (issue 24, item 7): `help`
 * with a word that names no command is a usage error (exit 2), `miniapp
 * version` exists, and `--json --version` prints JSON. Run through the real
 * launcher, quick path included.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, ROOT } from '../helpers/launcher.js';

let home: string;
beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), 'miniapp-contracts-'));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

describe('help and version, through the launcher', () => {
  it('`help WORD` for a word that names no command is a usage error, with a suggestion, and no help on stdout', () => {
    for (const [argv, message] of [
      [['help', 'nosuch'], "error: unknown command 'nosuch'\nRun 'miniapp --help' for usage.\n"],
      [['help', 'serv'], "error: unknown command 'serv' (did you mean 'serve'?)\nRun 'miniapp --help' for usage.\n"],
      [['help', 'users', 'nosuch'], "error: unknown command 'nosuch' for 'miniapp users'\nRun 'miniapp users --help' for usage.\n"],
    ] as const) {
      const result = launch(home, argv);
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr).toBe(message);
    }
    const json = launch(home, ['help', 'nosuch', '--json']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toMatchObject({ error: { code: 'USAGE', exitCode: 2 } });
    // Real topics still show their help.
    for (const argv of [['help'], ['help', 'users'], ['help', 'users', 'create'], ['help', 'help']]) {
      const result = launch(home, argv);
      expect(result.code, argv.join(' ')).toBe(0);
      expect(result.stdout).toContain('Usage: miniapp');
    }
  });

  it('`miniapp version` prints the version; with --json, and `--json --version`, JSON', () => {
    const plain = launch(home, ['version']);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toBe(`${version}\n`);
    expect(launch(home, ['--version']).stdout).toBe(`${version}\n`);
    for (const argv of [
      ['version', '--json'],
      ['--json', 'version'],
      ['--json', '--version'],
      ['--version', '--json'],
      ['-V', '--json'],
    ]) {
      const result = launch(home, argv);
      expect(result.code, argv.join(' ')).toBe(0);
      expect(JSON.parse(result.stdout), argv.join(' ')).toEqual({ version, node: process.versions.node });
    }
    expect(launch(home, ['--help']).stdout).toMatch(/^ {2}version +print the version/m);
  });
});
