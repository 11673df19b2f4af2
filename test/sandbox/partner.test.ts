import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { SandboxClock } from '../../src/sandbox/clock.js';
import { buildSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { personFor } from '../../src/sandbox/partner/people.js';
import { decryptUserInfo } from '../../src/login/user-info.js';
import { AAD, KEY } from '../helpers/vectors.js';

const P = '/api-partner/v1/miniapp/user/oauth2';
let now = Date.parse('2026-11-21T00:00:00Z');
let sandbox: Sandbox;

async function start(options: Parameters<typeof buildSandbox>[0] extends infer O ? Partial<O> : never = {}) {
  sandbox = await buildSandbox({ key: KEY, aad: AAD, clock: new SandboxClock(() => now), ...options });
  return sandbox;
}
afterEach(async () => sandbox?.app.close());

async function call(method: 'GET' | 'POST', url: string, payload?: unknown, token?: string) {
  const response = await sandbox.app.inject({
    method,
    url,
    ...(payload === undefined ? {} : { payload: payload as object }),
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  return { status: response.statusCode, body: response.json() as Record<string, any> };
}
async function login(userKey = 1001): Promise<string> {
  return (await call('POST', '/__sandbox/login', { userKey })).body.authorizationCode;
}
async function tokens(userKey = 1001) {
  const res = await call('POST', `${P}/generate-token`, { authorizationCode: await login(userKey), referrer: 'sandbox' });
  expect(res.status).toBe(200);
  return res.body.success as { accessToken: string; refreshToken: string; expiresIn: number; tokenType: string; scope: string };
}

describe('partner sandbox rules', () => {
  beforeEach(async () => {
    now = Date.parse('2026-11-21T00:00:00Z');
    await start();
  });

  it('issues TokenData in the envelope for a fresh code', async () => {
    const data = await tokens();
    expect(data).toMatchObject({ tokenType: 'Bearer', expiresIn: 3600 });
    expect(data.scope.split(' ')).toEqual(expect.arrayContaining(['user_ci', 'user_name', 'user_phone', 'user_key']));
  });

  it('uses a code once, and not after 10 minutes', async () => {
    const code = await login();
    expect((await call('POST', `${P}/generate-token`, { authorizationCode: code, referrer: 'sandbox' })).status).toBe(200);
    const reuse = await call('POST', `${P}/generate-token`, { authorizationCode: code, referrer: 'sandbox' });
    expect(reuse).toEqual({ status: 400, body: { resultType: 'FAIL', error: { errorCode: 'invalid_grant', reason: expect.any(String) } } });

    const late = await login();
    now += 10 * 60_000;
    expect((await call('POST', `${P}/generate-token`, { authorizationCode: late, referrer: 'sandbox' })).status).toBe(400);
  });

  it('requires both fields of GenerateTokenRequest', async () => {
    const res = await call('POST', `${P}/generate-token`, { authorizationCode: await login() });
    expect(res.status).toBe(400);
    expect(res.body.error.reason).toContain('referrer');
  });

  it('answers login-me with the personal fields encrypted with its key and AAD', async () => {
    const { accessToken } = await tokens(4242);
    const res = await call('GET', `${P}/login-me`, undefined, accessToken);
    expect(res.status).toBe(200);
    const person = personFor(4242);
    expect(res.body.success.name).not.toBe(person.name);
    const { user, failed } = decryptUserInfo(res.body.success, KEY, AAD);
    expect(failed).toEqual([]);
    expect(user).toMatchObject({ userKey: 4242, name: person.name, phone: person.phone, birthday: person.birthday, agreedTerms: expect.any(Array) });
  });

  it('expires the access token after an hour with 401 invalid_grant', async () => {
    const { accessToken } = await tokens();
    now += 60 * 60_000 - 1;
    expect((await call('GET', `${P}/login-me`, undefined, accessToken)).status).toBe(200);
    now += 1;
    const res = await call('GET', `${P}/login-me`, undefined, accessToken);
    expect(res.status).toBe(401);
    expect(res.body.error.errorCode).toBe('invalid_grant');
  });

  it('refreshes into a new pair and retires the old access and refresh tokens', async () => {
    const first = await tokens();
    const res = await call('POST', `${P}/refresh-token`, { refreshToken: first.refreshToken });
    expect(res.status).toBe(200);
    const second = res.body.success;
    expect(second.accessToken).not.toBe(first.accessToken);
    expect((await call('GET', `${P}/login-me`, undefined, first.accessToken)).status).toBe(401);
    expect((await call('GET', `${P}/login-me`, undefined, second.accessToken)).status).toBe(200);
    expect((await call('POST', `${P}/refresh-token`, { refreshToken: first.refreshToken })).status).toBe(400);
  });

  it('expires the refresh token after 14 days', async () => {
    const { refreshToken } = await tokens();
    now += 14 * 86_400_000;
    const res = await call('POST', `${P}/refresh-token`, { refreshToken });
    expect(res).toMatchObject({ status: 400, body: { error: { errorCode: 'invalid_grant' } } });
  });

  it('removes a connection by access token or by userKey, retiring its tokens', async () => {
    const a = await tokens(1);
    expect((await call('POST', `${P}/access/remove-by-access-token`, {}, a.accessToken)).body).toEqual({ resultType: 'SUCCESS', success: { userKey: 1 } });
    expect((await call('GET', `${P}/login-me`, undefined, a.accessToken)).status).toBe(401);

    const b = await tokens(2);
    const c = await tokens(3);
    expect((await call('POST', `${P}/access/remove-by-user-key`, { userKey: 2 }, c.accessToken)).status).toBe(200);
    expect((await call('POST', `${P}/refresh-token`, { refreshToken: b.refreshToken })).status).toBe(400);
    expect((await call('POST', `${P}/access/remove-by-user-key`, { userKey: 2 })).status).toBe(401); // Bearer required
    const unknown = await call('POST', `${P}/access/remove-by-user-key`, { userKey: 999 }, c.accessToken);
    expect(unknown).toMatchObject({ status: 404, body: { error: { errorCode: 'USER_NOT_FOUND' } } });
  });

  it('answers a malformed body with a FAIL envelope', async () => {
    const res = await sandbox.app.inject({ method: 'POST', url: `${P}/generate-token`, headers: { 'content-type': 'application/json' }, payload: '{' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ resultType: 'FAIL', error: { errorCode: 'BAD_REQUEST' } });
  });

  it('moves its clock with /__sandbox/advance and reports stats', async () => {
    const before = (await call('GET', '/__sandbox/stats')).body;
    await call('POST', '/__sandbox/advance', { ms: 7_200_000 });
    const after = (await call('GET', '/__sandbox/stats')).body;
    expect(Date.parse(after.now) - Date.parse(before.now)).toBe(7_200_000);
    expect((await call('POST', '/__sandbox/advance', { ms: -1 })).status).toBe(400);
  });
});

describe('failure shapes', () => {
  it.each([
    ['bare', { error: 'invalid_grant', error_description: expect.any(String) }],
    ['top-level', { errorCode: 'invalid_grant', reason: expect.any(String) }],
  ] as const)('answers invalid_grant in the %s shape when asked', async (errorShape, body) => {
    await start({ errorShape });
    const code = await login();
    await call('POST', `${P}/generate-token`, { authorizationCode: code, referrer: 'sandbox' });
    expect(await call('POST', `${P}/generate-token`, { authorizationCode: code, referrer: 'sandbox' })).toEqual({ status: 400, body });
  });
});

describe('personFor', () => {
  it('is deterministic and realistic', () => {
    expect(personFor(7)).toEqual(personFor(7));
    expect(personFor(7)).not.toEqual(personFor(8));
    for (let key = 0; key < 200; key++) {
      const p = personFor(key);
      expect(p.name).toMatch(/^[가-힣]{3}$/);
      expect(p.phone).toMatch(/^010\d{8}$/);
      expect(p.birthday).toMatch(/^(19[6-9]\d|200\d)(0[1-9]|1[0-2])(0[1-9]|[12]\d)$/);
      expect(['MALE', 'FEMALE']).toContain(p.gender);
      expect(['LOCAL', 'FOREIGNER']).toContain(p.nationality);
      expect(p.email === null || /^[a-z]+\d+@example\.com$/.test(p.email)).toBe(true);
    }
  });
});

describe('unlink callback', () => {
  let receiver: Server;
  let received: { method: string; url: string; auth?: string; body: string }[];
  let receiverUrl: string;
  beforeEach(async () => {
    received = [];
    receiver = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        received.push({ method: req.method!, url: req.url!, auth: req.headers.authorization, body });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"success":true}');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/cb`;
  });
  afterEach(async () => new Promise<void>((resolve) => receiver.close(() => resolve())));

  it('POSTs JSON with Basic auth', async () => {
    await start({ callback: { url: receiverUrl, method: 'POST', basicAuth: 'partner:s3cret' } });
    await tokens(77);
    const res = await call('POST', '/__sandbox/unlink', { userKey: 77, reason: 'WITHDRAWAL_TERMS' });
    expect(res.body).toMatchObject({ userKey: 77, reason: 'WITHDRAWAL_TERMS', callback: { status: 200 } });
    expect(received).toEqual([
      { method: 'POST', url: '/cb', auth: `Basic ${Buffer.from('partner:s3cret').toString('base64')}`, body: '{"userKey":77,"referrer":"WITHDRAWAL_TERMS"}' },
    ]);
  });

  it('GETs with query parameters', async () => {
    await start({ callback: { url: receiverUrl, method: 'GET' } });
    await login(78);
    await call('POST', '/__sandbox/unlink', { userKey: 78, reason: 'UNLINK' });
    expect(received).toMatchObject([{ method: 'GET', url: '/cb?userKey=78&referrer=UNLINK', auth: undefined }]);
  });

  it('refuses to unlink a user without a connection', async () => {
    await start({ callback: { url: receiverUrl, method: 'POST' } });
    expect((await call('POST', '/__sandbox/unlink', { userKey: 5, reason: 'UNLINK' })).status).toBe(404);
    expect(received).toEqual([]);
  });
});
