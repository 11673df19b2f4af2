/**
 * Start-up cost of the CLI against the cost of starting Node at all.
 *
 * `node -e 0` is the floor: no CLI can start faster than the runtime that
 * runs it. Each row is timed in its own paired run against that floor, so
 * the ratio says how much miniapp adds on top of Node on this machine, now.
 *
 * - `miniapp --help`: the quick path (src/cli/quick.ts): a CommonJS bundle of
 *   the program with commander in it, loaded without Node's ESM loader.
 * - `miniapp decrypt --json`: a real login-me response decrypted from stdin
 *   with key and AAD from the environment, the `curl ... | miniapp decrypt
 *   --json | jq` case, which by design loads neither chalk, the renderers
 *   nor the config store.
 * - `miniapp token show` and `miniapp config get base-url`: the two commands
 *   that read the profile (stored tokens, one setting) from the config file
 *   the bench writes beforehand; reading loads no `conf`.
 * - The one-shot gRPC client commands, `miniapp users get 1 --json`,
 *   `users list --json`, `orders list --json`, `inventory stock --json` and
 *   `monitor metrics --count 1 --json`, against a running `miniapp serve`
 *   (memory store) that the bench starts and stops outside the timing, with
 *   a user, a SKU with stock and an order created through the CLI
 *   beforehand; the address and admin token come from the profile, where
 *   serve stores them. Each makes its one call on the light path (node:http2
 *   and the compiled message schema, src/grpc/client/light-call.ts), without
 *   grpc-js; each is checked once for what it prints.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pairedRuns } from './lib.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const BIN = join(ROOT, 'bin', 'miniapp.cjs');
const NODE = process.execPath;

const FLOOR = { name: 'node -e 0', args: ['-e', '0'] };

/** How the four short commands run (src/cli/quick.ts). */
const QUICK = 'the quick path: a CommonJS bundle with commander in it, no ESM loader, stdout written directly to the pipe';

/** The plaintext personal fields; the name is not ASCII so that UTF-8 decoding is on the path. */
const PLAIN = {
  name: '김미니',
  phone: '01012345678',
  birthday: '19900101',
  ci: randomBytes(64).toString('base64'),
  di: null,
  gender: 'MALE',
  nationality: 'LOCAL',
  email: 'bench@example.com',
};

/**
 * The environment of every child: the caller's, minus anything that would
 * change what is measured. MINIAPP_* could select another profile or key;
 * FORCE_COLOR would make the CLI load chalk on a pipe. The config and data
 * dirs point at a fresh temp dir so that the user's real config is never
 * read or written.
 */
function childEnv(tempDir, extra = {}) {
  const env = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name.startsWith('MINIAPP_') || name === 'FORCE_COLOR') delete env[name];
  }
  return {
    ...env,
    MINIAPP_CONFIG_DIR: join(tempDir, 'config'),
    MINIAPP_DATA_DIR: join(tempDir, 'data'),
    ...extra,
  };
}

/** Builds the encrypted login-me envelope with the CLI's own encryptor (spec format: Base64 of IV + ciphertext + tag). */
async function samplePayload(key, aad) {
  const { encryptUserInfo } = await import(pathToFileURL(join(ROOT, 'dist', 'login', 'user-info.js')).href);
  const success = encryptUserInfo({ userKey: 1001, scope: 'user_name user_phone user_ci', agreedTerms: ['terms_required'], ...PLAIN }, key, aad);
  return JSON.stringify({ resultType: 'SUCCESS', success });
}

/** Runs a side once, outside the timing, and returns its stdout; throws unless it exits 0. */
function runOnce(side) {
  const result = spawnSync(side.cmd, side.args, { env: side.env, input: side.stdin ?? '', encoding: 'utf8' });
  if (result.error) throw result.error;
  if (result.status !== 0) {
    throw new Error(`${side.args.join(' ')} exited with ${result.status ?? result.signal}:\n${result.stderr}`);
  }
  return result.stdout;
}

/** Fails unless decrypt printed JSON whose every personal field is the plaintext we encrypted. */
function verifyDecrypt(side) {
  const stdout = runOnce(side);
  let user;
  try {
    user = JSON.parse(stdout);
  } catch (error) {
    throw new Error(`decrypt --json did not print JSON (${error.message}); stdout began: ${stdout.slice(0, 200)}`);
  }
  for (const [field, expected] of Object.entries(PLAIN)) {
    if (user[field] !== expected) {
      throw new Error(`decrypt --json gave ${field} = ${JSON.stringify(user[field])}, expected ${JSON.stringify(expected)}`);
    }
  }
}

function row(name, result, target, why = '') {
  const { a, b } = result;
  return {
    name,
    value: a.median,
    unit: 'ms',
    floorName: FLOOR.name,
    floorValue: b.median,
    ratio: a.median / b.median,
    target,
    better: 'lower',
    note: `${why}p10-p90 ${a.p10.toFixed(1)}-${a.p90.toFixed(1)} ms; floor ${b.p10.toFixed(1)}-${b.p90.toFixed(1)} ms`,
  };
}

/** A profile with a base URL and stored tokens, as `config set` and `token exchange` leave it. */
function writeProfile(configDir) {
  const now = Date.now();
  const tokens = {
    tokenType: 'Bearer',
    accessToken: `eyJhbGciOiJIUzI1NiJ9.${randomBytes(48).toString('base64url')}`,
    accessTokenExpiresAt: new Date(now + 3600_000).toISOString(),
    refreshToken: randomBytes(32).toString('base64url'),
    refreshTokenExpiresAt: new Date(now + 14 * 86400_000).toISOString(),
    scope: 'user_name user_phone',
    referrer: 'DEFAULT',
  };
  mkdirSync(configDir, { recursive: true, mode: 0o700 });
  const file = { profiles: { default: { settings: { 'base-url': 'https://partner.example.com' }, tokens } } };
  writeFileSync(join(configDir, 'config.json'), JSON.stringify(file, null, '\t'), { mode: 0o600 });
}

/**
 * `miniapp serve` with the memory store, HTTP and gRPC on free ports; it
 * stores its gRPC address and admin token in the profile of `env`. Resolves
 * once the gRPC service is up, with a function that stops it.
 */
async function startServe(env) {
  const child = spawn(NODE, [BIN, 'serve', '--port', '0', '--grpc-port', '0', '--store', 'memory', '--log-level', 'error'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const ready = new Promise((resolve, reject) => {
    const onData = (chunk) => {
      output += chunk;
      if (/^\s*admin\s/m.test(output)) resolve();
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.stderr.setEncoding('utf8').on('data', onData);
    child.once('exit', (code) => reject(new Error(`miniapp serve exited with ${code} before it was ready:\n${output}`)));
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  try {
    await ready;
  } finally {
    clearTimeout(timer);
  }
  return async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  };
}

/** How the gRPC client commands run. */
const GRPC_WHY =
  'one call over node:http2, its messages encoded and decoded from the compiled schema (no grpc-js, no proto loading); serve (memory store) started by the bench, not counted; ';

/** Fails unless `value` is true, naming the command and what it printed. */
function expectPrinted(value, label, stdout) {
  if (!value) throw new Error(`${label} printed something else: ${stdout.slice(0, 300)}`);
}

/** The one-shot gRPC client commands, each with a check of what it prints against the data the bench put in place. */
function grpcCommands(cli, orderId) {
  return [
    {
      side: cli('users', 'get', '1', '--json'),
      check: (stdout, label) => {
        const user = JSON.parse(stdout);
        expectPrinted(user.id === 1 && user.username === 'bench', label, stdout);
      },
    },
    {
      side: cli('users', 'list', '--json'),
      check: (stdout, label) => {
        const users = JSON.parse(stdout);
        expectPrinted(users.length === 1 && users[0].username === 'bench', label, stdout);
      },
    },
    {
      side: cli('orders', 'list', '--json'),
      check: (stdout, label) => {
        const orders = JSON.parse(stdout);
        expectPrinted(orders.length === 1 && orders[0].id === orderId && orders[0].items[0].quantity === 2, label, stdout);
      },
    },
    {
      side: cli('inventory', 'stock', '--json'),
      check: (stdout, label) => {
        const levels = JSON.parse(stdout);
        expectPrinted(levels.length === 1 && levels[0].sku === 'MUG' && levels[0].on_hand === 10 && levels[0].reserved === 2, label, stdout);
      },
    },
    {
      side: cli('monitor', 'metrics', '--count', '1', '--json'),
      check: (stdout, label) => {
        const lines = stdout.trim().split('\n');
        const snapshot = JSON.parse(lines[0]);
        expectPrinted(lines.length === 1 && snapshot.service.startsWith('miniapp') && Object.keys(snapshot.metrics).length > 10, label, stdout);
      },
    },
  ];
}

export default async function startup(ctx) {
  const tempDir = mkdtempSync(join(tmpdir(), 'miniapp-bench-'));
  try {
    const key = randomBytes(32);
    const aad = randomBytes(16);
    const env = childEnv(tempDir, {
      MINIAPP_DECRYPT_KEY: key.toString('hex'),
      MINIAPP_DECRYPT_AAD: aad.toString('hex'),
    });
    // The floor gets the same environment, so only the work differs.
    const floor = { cmd: NODE, args: FLOOR.args, env };

    const help = { cmd: NODE, args: [BIN, '--help'], env };
    if (!runOnce(help).includes('Usage: miniapp')) throw new Error('miniapp --help printed no usage');
    ctx.log('miniapp --help');
    const helpResult = await pairedRuns({ a: help, b: floor, runs: ctx.runs, warmup: ctx.warmup });

    const decrypt = { cmd: NODE, args: [BIN, 'decrypt', '--json'], env, stdin: await samplePayload(key, aad) };
    verifyDecrypt(decrypt);
    ctx.log('miniapp decrypt --json');
    const decryptResult = await pairedRuns({ a: decrypt, b: floor, runs: ctx.runs, warmup: ctx.warmup });

    const plainEnv = childEnv(tempDir);
    writeProfile(join(tempDir, 'config'));
    const tokenShow = { cmd: NODE, args: [BIN, 'token', 'show'], env: plainEnv };
    if (!runOnce(tokenShow).includes('accessToken')) throw new Error('miniapp token show printed no accessToken');
    ctx.log('miniapp token show');
    const tokenResult = await pairedRuns({ a: tokenShow, b: floor, runs: ctx.runs, warmup: ctx.warmup });

    const configGet = { cmd: NODE, args: [BIN, 'config', 'get', 'base-url'], env: plainEnv };
    if (runOnce(configGet).trim() !== 'https://partner.example.com') throw new Error('miniapp config get base-url printed another value');
    ctx.log('miniapp config get base-url');
    const configResult = await pairedRuns({ a: configGet, b: floor, runs: ctx.runs, warmup: ctx.warmup });

    ctx.log('the gRPC client commands (against a running serve)');
    const stopServe = await startServe(env); // with the decrypt key and AAD that its relay needs
    const grpcResults = [];
    try {
      const cli = (...args) => ({ cmd: NODE, args: [BIN, ...args], env: plainEnv });
      runOnce(cli('users', 'create', '--username', 'bench', '--email', 'bench@example.com', '--password', 'bench-password-1'));
      runOnce(cli('inventory', 'set', 'MUG', '--quantity', '10', '--price', '12000', '--name', 'Mug'));
      const order = JSON.parse(runOnce(cli('orders', 'create', '--item', 'MUG:2', '--idempotency-key', 'bench-order', '--json')));
      for (const { side, check } of grpcCommands(cli, order.id)) {
        const label = `miniapp ${side.args.slice(1).join(' ')}`;
        check(runOnce(side), label);
        ctx.log(label);
        grpcResults.push({ label, result: await pairedRuns({ a: side, b: floor, runs: ctx.runs, warmup: ctx.warmup }) });
      }
    } finally {
      await stopServe();
    }
    // The config file keeps what serve stored; this bench's own settings must still be there.
    if (!readFileSync(join(tempDir, 'config', 'config.json'), 'utf8').includes('grpc-token')) throw new Error('serve stored no grpc-token');

    return [
      row('miniapp --help', helpResult, 1.25, `${QUICK}; `),
      row('miniapp decrypt --json', decryptResult, 1.4, `${QUICK}; node:crypto alone adds about 6 ms; `),
      row('miniapp token show', tokenResult, 1.25, `${QUICK}; the stored tokens read from the config file without conf; `),
      row('miniapp config get base-url', configResult, 1.25, `${QUICK}; the setting read from the config file without conf; `),
      ...grpcResults.map(({ label, result }) => row(`${label} (serve running)`, result, 1.4, GRPC_WHY)),
    ];
  } finally {
    rmSync(tempDir, { recursive: true, force: true });
  }
}
