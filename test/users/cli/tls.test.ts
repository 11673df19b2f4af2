/**
 * `miniapp users ... --tls` as a user runs it: the real launcher against
 * dist/ (npm test builds it first) in a child process, so that everything
 * Node itself prints on stderr is seen, against a real `miniapp serve` on
 * 127.0.0.1. A plaintext server is one line saying it does not speak TLS
 * (exit 5); no command prints Node's DEP0123 warning about a TLS server
 * name that is an IP address.
 */
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RunningServe } from '../../../src/server/serve.js';
import { startTestServe } from '../../helpers/serve.js';
import { makePki, type Pki } from '../../helpers/certs.js';
import { Sandbox } from '../../helpers/cli.js';
import { startUserServer, type UserServer } from './harness.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const bin = join(root, 'bin', 'miniapp.cjs');

beforeAll(() => {
  if (!existsSync(join(root, 'dist', 'cli', 'commands', 'users', 'index.js')))
    throw new Error('dist/ is missing the users commands: run `npm run build` (npm test does)');
});

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

/** The launcher in a child process (not spawnSync: the server answers from this process's event loop). */
function miniapp(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { env: { PATH: process.env.PATH, HOME: sb.root, ...sb.env, ...env }, encoding: 'utf8' },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('--tls against a server without TLS', () => {
  let server: UserServer;
  beforeEach(async () => {
    server = await startUserServer();
  });
  afterEach(() => server.close());

  it('is one line saying the server does not speak TLS, exit 5, for a call and for a stream', async () => {
    for (const args of [
      ['users', 'list', '--tls'],
      ['users', 'watch', '--count', '1', '--tls'],
      ['users', 'get', '1', '--tls', '--json'],
    ]) {
      const result = await miniapp(args, server.env);
      expect(result.code, result.stderr).toBe(5);
      const lines = result.stderr.trimEnd().split('\n');
      expect(lines, result.stderr).toHaveLength(1);
      const message = `UNAVAILABLE: the user service at ${server.address} does not speak TLS; connect without --tls (and without --ca or the grpc-ca setting)`;
      if (args.includes('--json')) expect(JSON.parse(lines[0]!)).toEqual({ error: { code: 'UNAVAILABLE', exitCode: 5, message } });
      else expect(lines[0]).toBe(`error: ${message}`);
      expect(result.stdout).toBe('');
    }
  });
});

describe('TLS to an IP address', () => {
  let pki: Pki;
  let tls: RunningServe;
  beforeEach(async () => {
    pki = makePki();
    tls = await startTestServe({
      grpc: { host: '127.0.0.1', port: 0, tls: { cert: pki.read(pki.serverCert), key: pki.read(pki.serverKey) } },
    });
  });
  afterEach(async () => {
    await tls.close();
    pki.dispose();
  });

  it('connects and prints nothing on stderr: no deprecation warning about an IP as the TLS server name, nor any other', async () => {
    const env = { MINIAPP_GRPC_ADDR: tls.grpc!.address, MINIAPP_GRPC_TOKEN: tls.adminToken };
    const created = await miniapp(
      ['users', 'create', '--username', 'tina', '--email', 'tina@example.com', '--password', 'correct-horse', '--ca', pki.caCert, '--json'],
      env,
    );
    expect(created.code, created.stderr).toBe(0);
    expect(created.stderr).toBe('');
    const listed = await miniapp(['users', 'list', '--ca', pki.caCert, '--json'], env);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toHaveLength(1);
    expect(listed.stderr).toBe('');
  });
});
