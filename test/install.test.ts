/**
 * The package as users install it: `npm run package` packs it (from dist/,
 * which npm test builds first), npm installs the tarball globally into a
 * prefix of the test's own, offline from the local npm cache (warm after
 * `npm ci`), from another directory; then the installed `miniapp` runs there.
 *
 * The native driver's install script runs as it does for every user
 * (prebuild-install, then node-gyp if it found no binary), handed the binary
 * this checkout already built as a local prebuild, the way prebuild-install
 * takes one it downloaded: compiling SQLite again would take minutes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './helpers/launcher.js';

let work: string;
let prefix: string;
let installed: string;
let install: { code: number | null; stdout: string; stderr: string };

/** The environment npm runs in: none of the npm_* variables `npm test` hands its scripts, the same cache. */
function npmEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
  if (process.env.npm_config_cache) env.npm_config_cache = process.env.npm_config_cache;
  return { ...env, ...extra };
}

/**
 * better-sqlite3's binary of this checkout, as the prebuild archive prebuild-install looks for, in `dir`; and
 * prebuild-install's setting that makes it look there first, in a file it reads from the folders above the one
 * it runs in (its rc; a variable of the environment would not pass the shell npm runs install scripts in).
 */
function localPrebuild(dir: string): void {
  const driver = join(ROOT, 'node_modules', 'better-sqlite3');
  const { version } = JSON.parse(readFileSync(join(driver, 'package.json'), 'utf8')) as { version: string };
  const header = process.report.getReport() as { header?: { glibcVersionRuntime?: string } };
  const libc = process.platform === 'linux' && !header.header?.glibcVersionRuntime ? 'musl' : '';
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}${libc}-${process.arch}.tar.gz`;
  mkdirSync(dir, { recursive: true });
  const tar = spawnSync('tar', ['-czf', join(dir, name), '-C', driver, 'build/Release/better_sqlite3.node'], { encoding: 'utf8' });
  if (tar.status !== 0) throw new Error(`tar: ${tar.stderr}`);
  writeFileSync(join(work, '.prebuild-installrc'), `local-prebuilds=${dir}\n`);
}

beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist', 'bundle', 'main.cjs'))) throw new Error('dist/bundle is missing: run `npm run build` (npm test does)');
  work = mkdtempSync(join(tmpdir(), 'miniapp-install-'));
  const pack = spawnSync(process.execPath, [join(ROOT, 'scripts', 'pack.mjs'), work], { encoding: 'utf8', env: npmEnv() });
  if (pack.status !== 0) throw new Error(`npm run package failed: ${pack.stderr}`);
  const tarball = readdirSync(work).find((name) => name.endsWith('.tgz'));
  if (!tarball) throw new Error(`no tarball in ${work}`);
  localPrebuild(join(work, 'prebuilds'));
  prefix = join(work, 'prefix');
  mkdirSync(join(work, 'elsewhere'));
  const result = spawnSync('npm', ['install', '-g', '--prefix', prefix, '--offline', '--allow-scripts=better-sqlite3', join(work, tarball)], {
    cwd: join(work, 'elsewhere'),
    encoding: 'utf8',
    env: npmEnv(),
  });
  install = { code: result.status, stdout: result.stdout, stderr: result.stderr };
  installed = join(prefix, 'lib', 'node_modules', 'miniapp');
}, 300_000);
afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** The installed `miniapp`, run from a directory of its own with a home, config and data dir of the test's. */
function miniapp(args: string[]) {
  const home = join(work, 'home');
  const result = spawnSync(join(prefix, 'bin', 'miniapp'), args, {
    cwd: join(work, 'elsewhere'),
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), MINIAPP_DATA_DIR: join(home, 'data') },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('npm install -g of the packed package', () => {
  it('prints its summary line and nothing else, and leaves a clean tree', () => {
    expect(install.stderr).toBe('');
    expect(install.code).toBe(0);
    expect(install.stdout).toMatch(/^\nadded \d+ packages? in [\d.]+(m|s|ms)\n$/);
    const ls = spawnSync('npm', ['ls', '-g', '--all', '--prefix', prefix], { encoding: 'utf8', env: npmEnv() });
    expect(ls.stderr).toBe('');
    expect(ls.status).toBe(0);
  });

  it('ships the bundles, not the ESM build nor maps, and depends on the native driver alone, with nothing to run of its own', () => {
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(Object.keys(manifest.dependencies as object)).toEqual(['better-sqlite3']);
    expect(manifest.scripts).toBeUndefined();
    expect(manifest.devDependencies).toBeUndefined();
    expect(readdirSync(join(installed, 'dist')).sort()).toEqual(['bundle', 'quick']);
    const files = spawnSync('find', [installed, '-path', join(installed, 'node_modules'), '-prune', '-o', '-type', 'f', '-print'], {
      encoding: 'utf8',
    }).stdout.split('\n');
    expect(files.filter((file) => file.endsWith('.map'))).toEqual([]);
    for (const file of ['bin/miniapp.cjs', 'proto/descriptor-set.binpb', 'web/host/index.html', 'README.md', 'LICENSE'])
      expect(files).toContain(join(installed, file));
    // The one package left beside the bundles took the binary it was handed, rather than compiling SQLite.
    expect(existsSync(join(installed, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node'))).toBe(true);
    expect(existsSync(join(installed, 'node_modules', 'better-sqlite3', 'build', 'Release', 'obj.target'))).toBe(false);
  });

  it('runs --help from another directory', () => {
    const help = miniapp(['--help']);
    expect(help.stderr).toBe('');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: miniapp \[options\] \[command\]\n/);
    expect(help.stdout).toMatch(/\n {2}serve +\S/);
  });

  describe('with a serve of the installed package on its defaults', () => {
    let serve: ChildProcess | undefined;
    let base = '';
    afterAll(async () => {
      if (!serve || serve.exitCode !== null) return;
      const exited = new Promise((resolve) => serve!.once('exit', resolve));
      // The first signal drains; the second stops at once.
      serve.kill('SIGTERM');
      serve.kill('SIGTERM');
      await exited;
    });

    it('is ready, and a gRPC command of the installed CLI works against it', async () => {
      const home = join(work, 'home');
      serve = spawn(join(prefix, 'bin', 'miniapp'), ['serve', '--port', '0', '--grpc-port', '0'], {
        cwd: join(work, 'elsewhere'),
        env: { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), MINIAPP_DATA_DIR: join(home, 'data') },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      serve.stderr!.on('data', (chunk: Buffer) => (output += chunk));
      base = await new Promise<string>((resolve, reject) => {
        serve!.stdout!.on('data', (chunk: Buffer) => {
          output += chunk;
          const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1];
          if (url) resolve(url);
        });
        serve!.once('exit', (code) => reject(new Error(`serve exited ${code}: ${output}`)));
      });
      let ready = 0;
      while (ready !== 200) {
        ready = (await fetch(`${base}/health/ready`)).status;
        if (ready !== 200) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      // The host page (web/host/) and the docs page with Swagger UI's assets (vendored into the bundle).
      expect((await fetch(`${base}/host/`)).status).toBe(200);
      expect((await fetch(`${base}/api/v2/docs/`)).status).toBe(200);
      const swagger = await fetch(`${base}/api/v2/docs/static/swagger-ui-bundle.js`);
      expect(swagger.status).toBe(200);
      expect((await swagger.text()).length).toBeGreaterThan(100_000);

      // serve stored its gRPC address and admin token in the profile: the commands find it with no flag.
      const created = miniapp([
        'users',
        'create',
        '--username',
        'installed',
        '--email',
        'installed@example.com',
        '--password',
        'password-of-the-test',
        '--json',
      ]);
      expect(created.stderr).toBe('');
      expect(created.code).toBe(0);
      const list = miniapp(['users', 'list', '--json']);
      expect(list.stderr).toBe('');
      expect(list.code).toBe(0);
      expect((JSON.parse(list.stdout) as { username: string }[]).map((user) => user.username)).toEqual(['installed']);
    }, 60_000);
  });
});
