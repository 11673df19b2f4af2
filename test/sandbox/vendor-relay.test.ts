/**
 * A relay written the way the partner API vendor's example server is
 * (test/fixtures/vendor-relay.ts: Express, mutual TLS from certificate
 * files, a Base64 key, the text AAD TOSS, the production prefix,
 * remove-by-user-key with a body only) against `miniapp sandbox --mtls` run
 * as a real process in the same mode (`--prefix production`, a Base64
 * `--key`, `--aad text:TOSS`, `--vendor-shapes`), through the whole login:
 * token, me with every personal field decrypted and right, refresh, log out
 * by token, log out by user key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from '../helpers/launcher.js';
import { makePki, type Pki } from '../helpers/certs.js';
import { createVendorRelay } from '../fixtures/vendor-relay.js';
import { personFor } from '../../src/sandbox/partner/people.js';
import { GRANTED_SCOPE, REQUIRED_TERMS } from '../../src/sandbox/partner/state.js';

const KEY_BASE64 = randomBytes(32).toString('base64');
const home = mkdtempSync(join(tmpdir(), 'miniapp-vendor-'));
/** The CLI's own settings for the admin calls (sandbox login): its client certificate for the --mtls sandbox. */
let cliEnv: Record<string, string>;
let pki: Pki;
let sandbox: ChildProcess;
let sandboxUrl: string;
let relay: Server;
let relayUrl: string;

function startSandbox(args: string[]): Promise<string> {
  sandbox = spawn(process.execPath, [BIN, 'sandbox', '--port', '0', '--json', ...args], { env: cliEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  sandbox.stderr!.on('data', (chunk) => (output += chunk));
  return new Promise((resolve, reject) => {
    sandbox.stdout!.on('data', (chunk) => {
      output += chunk;
      const line = output.split('\n').find((l) => l.startsWith('{'));
      if (line && output.includes('\n')) resolve((JSON.parse(line) as { url: string }).url);
    });
    sandbox.once('exit', (code) => reject(new Error(`the sandbox exited with ${code}: ${output}`)));
  });
}

beforeAll(async () => {
  pki = makePki();
  cliEnv = {
    PATH: process.env.PATH ?? '',
    HOME: home,
    MINIAPP_CONFIG_DIR: join(home, 'config'),
    MINIAPP_MTLS_CERT: pki.clientCert,
    MINIAPP_MTLS_KEY: pki.clientKey,
    MINIAPP_MTLS_CA: pki.caCert,
  };
  sandboxUrl = await startSandbox([
    '--mtls',
    '--cert',
    pki.serverCert,
    '--key-file',
    pki.serverKey,
    '--ca',
    pki.caCert,
    '--prefix',
    'production',
    '--key',
    KEY_BASE64,
    '--aad',
    'text:TOSS',
    '--vendor-shapes',
  ]);
  const app = createVendorRelay({
    apiBase: sandboxUrl,
    certFile: pki.clientCert,
    keyFile: pki.clientKey,
    caFile: pki.caCert,
    DECRYPTION_KEY_BASE64: KEY_BASE64,
    AAD_STRING: 'TOSS',
  });
  relay = await new Promise<Server>((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server));
  });
  relayUrl = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => relay?.close(resolve));
  if (sandbox && sandbox.exitCode === null) {
    const exited = new Promise((resolve) => sandbox.once('exit', resolve));
    sandbox.kill('SIGTERM');
    await exited;
  }
  pki?.dispose();
  rmSync(home, { recursive: true, force: true });
});

/** appLogin() on the phone, played by `miniapp sandbox login` against the --mtls sandbox. */
function appLogin(userKey: number): { authorizationCode: string; referrer: string } {
  const result = spawnSync(process.execPath, [BIN, 'sandbox', 'login', '--user-key', String(userKey), '--url', sandboxUrl, '--json'], {
    env: cliEnv,
    encoding: 'utf8',
  });
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
}

async function relayCall(method: 'GET' | 'POST', path: string, options: { json?: unknown; token?: string } = {}) {
  const headers: Record<string, string> = {};
  if (options.json !== undefined) headers['content-type'] = 'application/json';
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const response = await fetch(`${relayUrl}${path}`, { method, headers, body: options.json === undefined ? undefined : JSON.stringify(options.json) });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

async function logIn(userKey: number) {
  const { authorizationCode } = appLogin(userKey);
  // The SDK's types write the referrer SANDBOX; the sandbox takes any casing.
  const tokens = await relayCall('POST', '/api/auth/token', { json: { authorizationCode, referrer: 'SANDBOX' } });
  expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
  return tokens.body as { accessToken: string; refreshToken: string; scope: string; tokenType: string; expiresIn: number };
}

describe("a relay written as the vendor's example, against miniapp sandbox --mtls", () => {
  it('logs in, reads every personal field decrypted and right, refreshes, and logs out by token', async () => {
    const tokens = await logIn(4242);
    expect(tokens).toMatchObject({ tokenType: 'Bearer', expiresIn: 3600, scope: GRANTED_SCOPE.split(' ').join(',') });

    const me = await relayCall('GET', '/api/auth/me', { token: tokens.accessToken });
    expect(me.status, JSON.stringify(me.body)).toBe(200);
    const person = personFor(4242);
    expect(me.body).toEqual({
      userKey: 4242,
      // As the vendor documents it: comma-separated.
      scope: GRANTED_SCOPE.split(' ').join(','),
      agreedTerms: REQUIRED_TERMS,
      name: person.name,
      phone: person.phone,
      birthday: person.birthday,
      ci: person.ci,
      di: null,
      gender: person.gender,
      nationality: person.nationality,
      email: person.email,
    });

    const refreshed = await relayCall('POST', '/api/auth/refresh', { json: { refreshToken: tokens.refreshToken } });
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.accessToken).not.toBe(tokens.accessToken);
    // The old access token is retired; the bare {"error":"invalid_grant"} comes through as the vendor's server passes it.
    expect(await relayCall('GET', '/api/auth/me', { token: tokens.accessToken })).toMatchObject({ status: 401, body: { error: 'invalid_grant' } });
    expect((await relayCall('GET', '/api/auth/me', { token: refreshed.body.accessToken })).body.name).toBe(person.name);

    expect(await relayCall('POST', '/api/auth/logout', { token: refreshed.body.accessToken })).toEqual({ status: 200, body: { success: true } });
    expect((await relayCall('GET', '/api/auth/me', { token: refreshed.body.accessToken })).status).toBe(401);
    expect((await relayCall('POST', '/api/auth/refresh', { json: { refreshToken: refreshed.body.refreshToken } })).status).toBe(400);
  });

  it('logs out by user key with a body { userKey } only, the client certificate authenticating the call', async () => {
    const tokens = await logIn(4343);
    expect((await relayCall('GET', '/api/auth/me', { token: tokens.accessToken })).status).toBe(200);
    expect(await relayCall('POST', '/api/auth/logout-by-user-key', { json: { userKey: 4343 } })).toEqual({
      status: 200,
      body: { success: true, userKey: 4343 },
    });
    expect((await relayCall('GET', '/api/auth/me', { token: tokens.accessToken })).status).toBe(401);
    // Nobody left to log out: the partner API says so.
    expect((await relayCall('POST', '/api/auth/logout-by-user-key', { json: { userKey: 4343 } })).status).toBe(404);
  });
});
