/**
 * Start-up cost of `miniapp users`: its help is commander definitions only.
 * The real launcher against dist/ (npm test builds it first), with every
 * module load traced, as test/bin.test.ts does for `miniapp --help`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const bin = join(root, 'bin', 'miniapp.js');
let home: string;

beforeAll(() => {
  if (!existsSync(join(root, 'dist', 'cli', 'commands', 'users.js'))) throw new Error('dist/ is missing users.js: run `npm run build` (npm test does)');
  home = mkdtempSync(join(tmpdir(), 'miniapp-users-bin-'));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

function loads(args: string[]): { loaded: string[]; stdout: string } {
  const trace = join(home, `trace-${Math.random().toString(36).slice(2)}.txt`);
  const result = spawnSync(process.execPath, ['--import', join(root, 'test', 'fixtures', 'trace-loads.mjs'), bin, ...args], {
    input: '',
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH,
      HOME: home,
      MINIAPP_CONFIG_DIR: join(home, 'config'),
      MINIAPP_DATA_DIR: join(home, 'data'),
      MINIAPP_TRACE_LOADS: trace,
    },
  });
  expect(result.status, result.stderr).toBe(0);
  return { loaded: readFileSync(trace, 'utf8').split('\n'), stdout: result.stdout };
}

const grpcOrHeavy = /node_modules\/(@grpc|protobufjs|csv-parse|conf|ora|chalk|cli-table3)\/|require:(@grpc|protobufjs|cli-table3)|dist\/users\//;

describe('miniapp users start-up', () => {
  it('`users --help` loads the users command file and no gRPC module', () => {
    const { loaded, stdout } = loads(['users', '--help']);
    expect(stdout).toContain('Usage: miniapp users');
    expect(loaded.some((url) => url.includes('dist/cli/commands/users.js'))).toBe(true);
    expect(loaded.filter((url) => grpcOrHeavy.test(url))).toEqual([]);
  });

  it('`users watch --help` neither', () => {
    const { loaded, stdout } = loads(['users', 'watch', '--help']);
    expect(stdout).toContain('--count <n>');
    expect(loaded.filter((url) => grpcOrHeavy.test(url))).toEqual([]);
  });

  it('`miniapp --help` lists the users group without loading it', () => {
    const { loaded, stdout } = loads(['--help']);
    expect(stdout).toMatch(/\n  users +the gRPC user service/);
    expect(loaded.filter((url) => url.includes('dist/cli/commands/users.js') || grpcOrHeavy.test(url))).toEqual([]);
  });
});
