/**
 * Start-up cost of `miniapp users`: its help is commander definitions only
 * (commands/users/index.ts), none of the command files beside it.
 * The real launcher against dist/ (npm test builds it first), with every
 * module load traced, as test/bin.test.ts does for `miniapp --help`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT as root, traceLoads } from '../../helpers/launcher.js';

let home: string;

beforeAll(() => {
  if (!existsSync(join(root, 'dist', 'cli', 'commands', 'users', 'index.js')))
    throw new Error('dist/ is missing the users commands: run `npm run build` (npm test does)');
  home = mkdtempSync(join(tmpdir(), 'miniapp-users-bin-'));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

function loads(args: string[]): { loaded: string[]; stdout: string } {
  const { loaded, result } = traceLoads(home, args);
  return { loaded, stdout: result.stdout };
}

const grpcOrHeavy = /node_modules\/(@grpc|protobufjs|csv-parse|conf|ora|chalk|cli-table3)\/|require:(@grpc|protobufjs|cli-table3)|dist\/users\//;
/** A command's own file (create.js, watch.js, ...): loaded by its action only. */
const commandFile = /dist\/cli\/commands\/users\/(?!index\.js|shared\.js)[a-z-]+\.js/;

describe('miniapp users start-up', () => {
  it("`users --help` loads the group's wiring, no command file and no gRPC module", () => {
    const { loaded, stdout } = loads(['users', '--help']);
    expect(stdout).toContain('Usage: miniapp users');
    expect(loaded.some((url) => url.includes('dist/cli/commands/users/index.js'))).toBe(true);
    expect(loaded.filter((url) => grpcOrHeavy.test(url) || commandFile.test(url))).toEqual([]);
  });

  it('`users watch --help` neither', () => {
    const { loaded, stdout } = loads(['users', 'watch', '--help']);
    expect(stdout).toContain('--count <n>');
    expect(loaded.filter((url) => grpcOrHeavy.test(url) || commandFile.test(url))).toEqual([]);
  });

  it('`miniapp --help` lists the users group without loading it', () => {
    const { loaded, stdout } = loads(['--help']);
    expect(stdout).toMatch(/\n {2}users +the gRPC user service/);
    expect(loaded.filter((url) => url.includes('dist/cli/commands/users/') || grpcOrHeavy.test(url))).toEqual([]);
  });
});
