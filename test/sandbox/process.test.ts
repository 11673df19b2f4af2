/**
 * `miniapp sandbox` as a user runs it: a real process on a free port that
 * prints its URL when ready and stops cleanly on SIGTERM and SIGINT.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AAD_HEX, KEY_HEX } from '../helpers/vectors.js';

const bin = fileURLToPath(new URL('../../bin/miniapp.cjs', import.meta.url));
const home = mkdtempSync(join(tmpdir(), 'miniapp-sbproc-'));
const env = { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config') };
let child: ChildProcess | undefined;

afterEach(() => {
  child?.kill('SIGKILL');
  child = undefined;
});

function start(args: string[]): Promise<{ url: string; output: () => string }> {
  child = spawn(process.execPath, [bin, 'sandbox', '--port', '0', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stderr!.on('data', (chunk) => (output += chunk));
  return new Promise((resolve, reject) => {
    child!.stdout!.on('data', (chunk) => {
      output += chunk;
      const match = /listening on (http\S+)|"url":"(http[^"]+)"/.exec(output);
      if (match) resolve({ url: (match[1] ?? match[2])!, output: () => output });
    });
    child!.once('exit', (code) => reject(new Error(`sandbox exited with ${code}: ${output}`)));
  });
}

function exited(): Promise<number | null> {
  return new Promise((resolve) => child!.once('exit', (code) => resolve(code)));
}

describe('miniapp sandbox (process)', () => {
  it('prints its URL and a generated key with the config lines, serves, and stops on SIGTERM', async () => {
    const { url, output } = await start([]);
    expect(output()).toMatch(/miniapp config set decrypt-key [0-9a-f]{64}/);
    expect(output()).toMatch(/miniapp config set decrypt-aad [0-9a-f]+/);
    const login = spawnSync(process.execPath, [bin, 'sandbox', 'login', '--user-key', '1001', '--url', url, '--json'], { env, encoding: 'utf8' });
    expect(login.status, login.stderr).toBe(0);
    expect(JSON.parse(login.stdout)).toMatchObject({ authorizationCode: expect.stringMatching(/^code_/), referrer: 'sandbox' });
    const done = exited();
    child!.kill('SIGTERM');
    expect(await done).toBe(0);
    expect(output()).toContain('SIGTERM: stopping the sandbox');
  });

  it('uses the given key and AAD, prints JSON with --json, and stops on SIGINT', async () => {
    const { output } = await start(['--key', KEY_HEX, '--aad', AAD_HEX, '--json']);
    const info = JSON.parse(output().split('\n')[0]!);
    expect(info).toMatchObject({ key: KEY_HEX, aad: AAD_HEX, generatedKey: false, graphUrl: expect.stringMatching(/\/graph$/) });
    const done = exited();
    child!.kill('SIGINT');
    expect(await done).toBe(0);
  });

  it('takes the AAD as text (--aad TOSS, as the vendor writes it) and prints its bytes as hex', async () => {
    const { output } = await start(['--key', KEY_HEX, '--aad', 'TOSS', '--json']);
    expect(JSON.parse(output().split('\n')[0]!)).toMatchObject({ aad: Buffer.from('TOSS').toString('hex'), generatedKey: false });
  });

  it('refuses bad flags with exit 2', () => {
    for (const args of [['--port', 'x'], ['--mtls'], ['--callback-method', 'PUT'], ['--error-shape', 'weird'], ['--key', 'abc'], ['--aad', 'hex:TOSS']]) {
      const result = spawnSync(process.execPath, [bin, 'sandbox', ...args], { env, encoding: 'utf8' });
      expect(result.status, args.join(' ')).toBe(2);
    }
  });

  it('says so when the port is taken', async () => {
    const { url } = await start([]);
    const port = new URL(url).port;
    const second = spawnSync(process.execPath, [bin, 'sandbox', '--port', port], { env, encoding: 'utf8' });
    // A port that cannot be used is a setting that cannot work, as serve says of its own (exit 2).
    expect(second.status).toBe(2);
    expect(second.stderr).toContain(`port ${port} on 127.0.0.1 is already in use`);
  });
});

process.on('exit', () => rmSync(home, { recursive: true, force: true }));
