/**
 * Start-up cost of the CLI against the cost of starting Node at all.
 *
 * `node -e 0` is the floor: no CLI can start faster than the runtime that
 * runs it. Each row is timed in its own paired run against that floor, so
 * the ratio says how much miniapp adds on top of Node on this machine, now.
 *
 * - `miniapp --help`: the lazy-loading path (commander and main.js only).
 * - `miniapp decrypt --json`: a real login-me response decrypted from stdin
 *   with key and AAD from the environment, the `curl ... | miniapp decrypt
 *   --json | jq` case, which by design loads neither chalk, the renderers
 *   nor the config store.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pairedRuns } from './lib.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const BIN = join(ROOT, 'bin', 'miniapp.js');
const NODE = process.execPath;

const FLOOR = { name: 'node -e 0', args: ['-e', '0'] };

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
  const success = encryptUserInfo(
    { userKey: 1001, scope: 'user_name user_phone user_ci', agreedTerms: ['terms_required'], ...PLAIN },
    key,
    aad,
  );
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

function row(name, result, target) {
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
    note: `p10-p90 ${a.p10.toFixed(1)}-${a.p90.toFixed(1)} ms; floor ${b.p10.toFixed(1)}-${b.p90.toFixed(1)} ms`,
  };
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

    return [row('miniapp --help', helpResult, 1.5), row('miniapp decrypt --json', decryptResult, 1.8)];
  } finally {
    rmSync(tempDir, { recursive: true, force: true });
  }
}
