/**
 * A few runs of the real launcher, bin/miniapp.cjs, against the compiled
 * dist/ (npm test builds it first), the way a user runs it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AAD_HEX, KEY_HEX, PLAIN_USER, envelope, sealedUser } from './helpers/vectors.js';
import { BIN as bin, launch, ROOT as root, traceLoads, type LaunchOptions } from './helpers/launcher.js';
let home: string;

beforeAll(() => {
  if (!existsSync(join(root, 'dist', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  home = mkdtempSync(join(tmpdir(), 'miniapp-bin-'));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

function miniapp(args: string[], options: LaunchOptions = {}) {
  return launch(home, args, options);
}

/** Runs `miniapp ARGS | head -1` in bash and gives miniapp's own exit code and what came through. */
function pipedToHead(args: string, redirect = ''): { code: number; output: string } {
  const script = `node ${JSON.stringify(bin)} ${args} ${redirect} | head -1; echo "exit=\${PIPESTATUS[0]}"`;
  const result = spawnSync('bash', ['-c', script], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), MINIAPP_DATA_DIR: join(home, 'data') },
  });
  const code = Number(/exit=(\d+)/.exec(result.stdout)?.[1]);
  return { code, output: result.stdout.replace(/exit=\d+\n$/, '') + result.stderr };
}

describe('a reader that closes the pipe early', () => {
  it('does not change the exit code or print a trace, on stderr or on stdout', () => {
    expect(pipedToHead('serv', '2>&1')).toEqual({ code: 2, output: "error: unknown command 'serv' (did you mean 'serve'?)\n" });
    const help = pipedToHead('--help');
    expect(help).toEqual({ code: 0, output: 'Usage: miniapp [options] [command]\n' });
    const usage = pipedToHead('users get abc', '2>&1');
    expect(usage.code).toBe(2);
    expect(usage.output).not.toMatch(/EPIPE|at .*\.js:\d+/);
  });
});

describe('bin/miniapp.cjs', () => {
  it('prints the version of package.json', () => {
    const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
    expect(miniapp(['--version'])).toMatchObject({ code: 0, stdout: `${version}\n` });
  });

  it('lists the command groups', () => {
    const result = miniapp(['--help']);
    expect(result.code).toBe(0);
    for (const group of ['decrypt', 'token', 'me', 'logout', 'doctor', 'sandbox', 'config']) {
      expect(result.stdout).toMatch(new RegExp(`\\n  ${group} +\\S`));
    }
  });

  it('decrypts a payload from stdin with the key and AAD from the environment', () => {
    const result = miniapp(['decrypt', '--json'], {
      env: { MINIAPP_DECRYPT_KEY: KEY_HEX, MINIAPP_DECRYPT_AAD: AAD_HEX },
      input: JSON.stringify(envelope(sealedUser())),
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ ...PLAIN_USER, di: null });
  });

  it('exits 3 with a wrong AAD and 2 with a 31-byte key', () => {
    const input = JSON.stringify(envelope(sealedUser()));
    const wrongAad = miniapp(['decrypt'], { env: { MINIAPP_DECRYPT_KEY: KEY_HEX, MINIAPP_DECRYPT_AAD: '00ff' }, input });
    expect(wrongAad.code).toBe(3);
    expect(wrongAad.stderr).toContain('name, phone, birthday, ci, gender, nationality, email');
    const shortKey = miniapp(['decrypt'], { env: { MINIAPP_DECRYPT_KEY: KEY_HEX.slice(2), MINIAPP_DECRYPT_AAD: AAD_HEX }, input });
    expect(shortKey.code).toBe(2);
    expect(shortKey.stderr).toContain('31 bytes');
  });

  it('persists config across runs', () => {
    expect(miniapp(['config', 'set', 'base-url', 'https://partner.example']).code).toBe(0);
    expect(miniapp(['config', 'get', 'base-url']).stdout).toBe('https://partner.example\n');
  });
});

describe('start-up cost', () => {
  function loads(args: string[], env: Record<string, string> = {}, input = ''): string[] {
    return traceLoads(home, args, { env, input }).loaded;
  }
  const heavy = /node_modules\/(conf|ora|chalk|cli-table3|csv-stringify|ajv)\/|require:(cli-table3|csv-stringify)/;
  /** The quick path's chunks (dist/quick, see scripts/bundle-quick.mjs) that only some commands need: the config writer (conf), ora, string-width, chalk. */
  const heavyChunk = /^require:\.\/(store|ora|string-width|source)-/;
  const esmBuild = /\/dist\/cli\//;

  it('--help loads the bundled program (commander in it), no command group and no heavy module', () => {
    const loaded = loads(['--help']);
    expect(loaded).toContain('require:../dist/quick/cli.cjs');
    expect(loaded.some((entry) => /^require:\.\/program-/.test(entry))).toBe(true);
    expect(loaded.filter((url) => heavy.test(url) || heavyChunk.test(url) || esmBuild.test(url))).toEqual([]);
    expect(loaded.filter((entry) => /^require:\.\/(config|decrypt|token|profile)-/.test(entry))).toEqual([]);
  });

  it('decrypt --json with the key in the environment skips the config file, chalk and the renderers', () => {
    const loaded = loads(['decrypt', '--json'], { MINIAPP_DECRYPT_KEY: KEY_HEX, MINIAPP_DECRYPT_AAD: AAD_HEX }, JSON.stringify(sealedUser()));
    expect(loaded.some((entry) => /^require:\.\/decrypt-/.test(entry))).toBe(true);
    expect(loaded.filter((url) => heavy.test(url) || heavyChunk.test(url) || esmBuild.test(url))).toEqual([]);
  });

  it('config get and token show read the profile without loading the writer; config set writes through it, without conf', () => {
    const tokens = {
      tokenType: 'Bearer',
      accessToken: 'eyJhbGciOiJIUzI1NiJ9.access-token-of-the-test',
      accessTokenExpiresAt: '2099-01-01T00:00:00.000Z',
      refreshToken: 'refresh-token-of-the-test-0123456789',
      refreshTokenExpiresAt: '2099-01-01T00:00:00.000Z',
      scope: 'user_name',
    };
    mkdirSync(join(home, 'config'), { recursive: true });
    writeFileSync(
      join(home, 'config', 'config.json'),
      JSON.stringify({ profiles: { reads: { settings: { 'base-url': 'https://partner.example.com' }, tokens } } }),
      { mode: 0o600 },
    );
    const env = { MINIAPP_PROFILE: 'reads' };
    const get = loads(['config', 'get', 'base-url'], env);
    expect(get.some((entry) => /^require:\.\/config-/.test(entry))).toBe(true);
    expect(get.filter((url) => heavy.test(url) || heavyChunk.test(url) || esmBuild.test(url))).toEqual([]);
    const show = loads(['token', 'show', '--json'], env);
    expect(show.filter((url) => heavy.test(url) || heavyChunk.test(url) || esmBuild.test(url))).toEqual([]);
    const set = loads(['config', 'set', 'path-prefix', '/v2'], env);
    expect(set.some((entry) => /^require:\.\/store-|\/dist\/config\/store\.js$/.test(entry))).toBe(true);
    // conf's writer (atomically) loads when-exit, which sends SIGINT and SIGTERM again once it has seen them.
    expect(set.filter((url) => /node_modules\/(conf|atomically|when-exit)\//.test(url))).toEqual([]);
    expect(miniapp(['config', 'get', 'path-prefix'], { env }).stdout).toBe('/v2\n');
  });
});
