/**
 * The partner sandbox under mutual TLS: remove-by-user-key authenticated by
 * the client certificate alone (the vendor's example posts only { userKey }),
 * a Bearer token that is sent still checked, and the CLI still sending its
 * token.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request } from 'undici';
import { makePki, type Pki } from '../helpers/certs.js';
import { startSandbox, type RunningSandbox } from '../helpers/partner-sandbox.js';
import { Sandbox } from '../helpers/cli.js';

const P = '/api-partner/v1/miniapp/user/oauth2';
let pki: Pki;
let sandbox: RunningSandbox;
let plainSandbox: RunningSandbox;
let agent: Agent;
let cli: Sandbox;

beforeAll(async () => {
  pki = makePki();
  sandbox = await startSandbox({ tls: { cert: pki.read(pki.serverCert), key: pki.read(pki.serverKey), ca: pki.read(pki.caCert) } });
  plainSandbox = await startSandbox();
  agent = new Agent({ connect: { cert: pki.read(pki.clientCert), key: pki.read(pki.clientKey), ca: pki.read(pki.caCert) } });
  cli = new Sandbox();
});
afterAll(async () => {
  await agent.close();
  await sandbox.close();
  await plainSandbox.close();
  cli.dispose();
  pki.dispose();
});

async function call(base: string, method: 'GET' | 'POST', path: string, options: { json?: unknown; token?: string } = {}) {
  const headers: Record<string, string> = {};
  if (options.json !== undefined) headers['content-type'] = 'application/json';
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const response = await request(`${base}${path}`, {
    method,
    headers,
    body: options.json === undefined ? undefined : JSON.stringify(options.json),
    dispatcher: base.startsWith('https:') ? agent : undefined,
  });
  return { status: response.statusCode, body: (await response.body.json()) as Record<string, any> };
}

async function tokensOf(target: RunningSandbox, userKey: number) {
  const { authorizationCode } = target.state.login(userKey);
  const res = await call(target.url, 'POST', `${P}/generate-token`, { json: { authorizationCode, referrer: 'sandbox' } });
  expect(res.status).toBe(200);
  return res.body.success as { accessToken: string; refreshToken: string };
}

describe('remove-by-user-key under mutual TLS', () => {
  it('takes a body without Authorization, the client certificate authenticating the caller, and the user is logged out', async () => {
    const { accessToken } = await tokensOf(sandbox, 501);
    expect((await call(sandbox.url, 'GET', `${P}/login-me`, { token: accessToken })).status).toBe(200);
    const removed = await call(sandbox.url, 'POST', `${P}/access/remove-by-user-key`, { json: { userKey: 501 } });
    expect(removed).toEqual({ status: 200, body: { resultType: 'SUCCESS', success: { userKey: 501 } } });
    expect(await call(sandbox.url, 'GET', `${P}/login-me`, { token: accessToken })).toMatchObject({
      status: 401,
      body: { error: { errorCode: 'invalid_grant' } },
    });
  });

  it('answers 400 for a body without a userKey and USER_NOT_FOUND for a user without a connection', async () => {
    expect(await call(sandbox.url, 'POST', `${P}/access/remove-by-user-key`, { json: {} })).toMatchObject({ status: 400, body: { resultType: 'FAIL' } });
    expect(await call(sandbox.url, 'POST', `${P}/access/remove-by-user-key`, { json: { userKey: 999_999 } })).toMatchObject({
      status: 404,
      body: { error: { errorCode: 'USER_NOT_FOUND' } },
    });
  });

  it('still checks a Bearer token that is sent, as the spec writes', async () => {
    await tokensOf(sandbox, 502);
    const refused = await call(sandbox.url, 'POST', `${P}/access/remove-by-user-key`, { json: { userKey: 502 }, token: 'at_not-a-token' });
    expect(refused).toMatchObject({ status: 401, body: { error: { errorCode: 'invalid_grant' } } });
    const { accessToken } = await tokensOf(sandbox, 503);
    expect((await call(sandbox.url, 'POST', `${P}/access/remove-by-user-key`, { json: { userKey: 502 }, token: accessToken })).status).toBe(200);
  });

  it('without mutual TLS still requires the Bearer token', async () => {
    await tokensOf(plainSandbox, 504);
    expect((await call(plainSandbox.url, 'POST', `${P}/access/remove-by-user-key`, { json: { userKey: 504 } })).status).toBe(401);
  });

  it('the CLI keeps sending its token: a rejected one fails `logout --user-key` although the certificate alone would do', async () => {
    await tokensOf(sandbox, 505);
    const env = { ...sandbox.env, MINIAPP_MTLS_CA: pki.caCert, MINIAPP_MTLS_CERT: pki.clientCert, MINIAPP_MTLS_KEY: pki.clientKey };
    const rejected = await cli.run(['logout', '--user-key', '505'], { env: { ...env, MINIAPP_ACCESS_TOKEN: 'at_revoked' } });
    expect(rejected.code, rejected.stderr).toBe(4);
    const { accessToken } = await tokensOf(sandbox, 506);
    const accepted = await cli.run(['logout', '--user-key', '505', '--json'], { env: { ...env, MINIAPP_ACCESS_TOKEN: accessToken } });
    expect(accepted.code, accepted.stderr).toBe(0);
    expect(JSON.parse(accepted.stdout)).toEqual({ success: true, userKey: 505 });
  });
});
