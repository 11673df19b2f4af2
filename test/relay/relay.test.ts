/**
 * The relay through a real listening server (`startServe`, port 0) in
 * front of a real sandbox, with undici as the browser would call it.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import type { RunningServe, ServeOptions } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { startSandbox, type RunningSandbox } from '../helpers/partner-sandbox.js';
import { personFor } from '../../src/sandbox/partner/people.js';
import { AAD_HEX, KEY_HEX } from '../helpers/vectors.js';
import { Capture } from '../helpers/cli.js';

let dataDir: string;
let sandbox: RunningSandbox;
let relay: RunningServe;
let logs: Capture;

async function serve(overrides: Partial<ServeOptions> = {}): Promise<RunningServe> {
  logs = new Capture();
  return startTestServe({
    store: { kind: 'sqlite', dataDir },
    upstream: { baseUrl: sandbox.url, pathPrefix: '/api-partner/v1/miniapp/user/oauth2', tls: {} },
    decrypt: { key: KEY_HEX, aad: AAD_HEX },
    logger: { level: 'info', stream: logs },
    version: '1.2.3',
    ...overrides,
  });
}

beforeEach(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'miniapp-relay-'));
  sandbox = await startSandbox();
  relay = await serve();
});
afterEach(async () => {
  await relay.close();
  await sandbox.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function call(method: 'GET' | 'POST' | 'OPTIONS', path: string, options: { json?: unknown; body?: string; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { ...options.headers };
  let body = options.body;
  if (options.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.json);
  }
  const response = await request(`${relay.url}${path}`, { method, headers, body });
  const text = await response.body.text();
  let parsed: any;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = text;
  }
  return { status: response.statusCode, headers: response.headers, body: parsed };
}

async function code(userKey = 1001): Promise<string> {
  return sandbox.state.login(userKey).authorizationCode;
}
async function tokens(userKey = 1001) {
  const res = await call('POST', '/api/auth/token', { json: { authorizationCode: await code(userKey), referrer: 'sandbox' } });
  expect(res.status).toBe(200);
  return res.body as { accessToken: string; refreshToken: string };
}
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('relay endpoints', () => {
  it('answers tokens and personal fields with Cache-Control: no-store, refusals included (RFC 6749 section 5.1)', async () => {
    const granted = await call('POST', '/api/auth/token', { json: { authorizationCode: await code(), referrer: 'sandbox' } });
    const { refreshToken } = granted.body as { refreshToken: string };
    const refreshed = await call('POST', '/api/auth/refresh', { json: { refreshToken } });
    const answers = [
      granted,
      refreshed,
      await call('GET', '/api/auth/me', { headers: bearer((refreshed.body as { accessToken: string }).accessToken) }),
      await call('POST', '/api/auth/token', { json: { authorizationCode: 'used-or-wrong', referrer: 'sandbox' } }),
      await call('GET', '/api/auth/me'),
    ];
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, expect.any(Number), 401]);
    for (const answer of answers) expect(answer.headers['cache-control']).toBe('no-store');
    // Answers that hold nothing private keep their caching as it was.
    expect((await call('GET', '/health')).headers['cache-control']).toBeUndefined();
  });

  it('POST /token answers the TokenData with the envelope unwrapped', async () => {
    const res = await call('POST', '/api/auth/token', { json: { authorizationCode: await code(), referrer: 'SANDBOX' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ tokenType: 'Bearer', accessToken: expect.any(String), refreshToken: expect.any(String), expiresIn: 3600 });
  });

  it('POST /token names the missing or malformed field with 400', async () => {
    expect((await call('POST', '/api/auth/token', { json: { referrer: 'sandbox' } })).body).toEqual({
      error: 'authorizationCode is required',
      detail: 'authorizationCode is required',
      code: 'MISSING_FIELD',
    });
    expect((await call('POST', '/api/auth/token', { json: { authorizationCode: 'x' } })).body.error).toBe('referrer is required');
    expect((await call('POST', '/api/auth/token', { json: { authorizationCode: 5, referrer: 'sandbox' } })).body.error).toBe(
      'authorizationCode must be a string',
    );
    expect((await call('POST', '/api/auth/token', { json: { authorizationCode: 'x', referrer: 'prod' } })).body.code).toBe('INVALID_FIELD');
    expect((await call('POST', '/api/auth/token', { json: [1] })).status).toBe(400);
    const broken = await call('POST', '/api/auth/token', { body: '{"authorizationCode":', headers: { 'content-type': 'application/json' } });
    expect(broken).toMatchObject({ status: 400, body: { code: 'INVALID_JSON' } });
    expect((await call('POST', '/api/auth/token')).status).toBe(400);
  });

  it('POST /token with a used code is 400 INVALID_GRANT, not a token to refresh', async () => {
    const authorizationCode = await code();
    await call('POST', '/api/auth/token', { json: { authorizationCode, referrer: 'sandbox' } });
    const again = await call('POST', '/api/auth/token', { json: { authorizationCode, referrer: 'sandbox' } });
    expect(again).toMatchObject({ status: 400, body: { code: 'INVALID_GRANT' } });
    expect(again.body.detail).toBe(again.body.error);
  });

  it('POST /refresh issues a new pair; 400 without refreshToken, 401 with a dead one', async () => {
    const first = await tokens();
    const res = await call('POST', '/api/auth/refresh', { json: { refreshToken: first.refreshToken } });
    expect(res.status).toBe(200);
    expect(res.body.accessToken).not.toBe(first.accessToken);
    expect((await call('POST', '/api/auth/refresh', { json: {} })).body).toMatchObject({ code: 'MISSING_FIELD', error: 'refreshToken is required' });
    expect(await call('POST', '/api/auth/refresh', { json: { refreshToken: first.refreshToken } })).toMatchObject({
      status: 401,
      body: { code: 'REFRESH_TOKEN_EXPIRED' },
    });
  });

  it('GET /me answers the UserInfo decrypted', async () => {
    const { accessToken } = await tokens(77);
    const res = await call('GET', '/api/auth/me', { headers: bearer(accessToken) });
    expect(res.status).toBe(200);
    const person = personFor(77);
    expect(res.body).toMatchObject({ userKey: 77, name: person.name, phone: person.phone, birthday: person.birthday, gender: person.gender, di: null });
  });

  it('GET /me is 401 without the header, with a malformed one, and with an expired token', async () => {
    expect(await call('GET', '/api/auth/me')).toMatchObject({ status: 401, body: { code: 'MISSING_AUTHORIZATION' } });
    expect(await call('GET', '/api/auth/me', { headers: { authorization: 'Token abc' } })).toMatchObject({
      status: 401,
      body: { code: 'MALFORMED_AUTHORIZATION' },
    });
    expect(await call('GET', '/api/auth/me', { headers: { authorization: 'Bearer ' } })).toMatchObject({ status: 401 });
    expect(await call('GET', '/api/auth/me', { headers: { authorization: 'Bearerabc' } })).toMatchObject({
      status: 401,
      body: { code: 'MALFORMED_AUTHORIZATION' },
    });
    // The scheme's name in any case (RFC 9110 section 11.1), as the blog API already takes it.
    const fresh = await tokens(78);
    for (const scheme of ['bearer', 'BEARER']) {
      expect(await call('GET', '/api/auth/me', { headers: { authorization: `${scheme} ${fresh.accessToken}` } })).toMatchObject({
        status: 200,
        body: { userKey: 78 },
      });
    }
    const { accessToken } = await tokens();
    sandbox.clock.advance(3600_000);
    expect(await call('GET', '/api/auth/me', { headers: bearer(accessToken) })).toMatchObject({ status: 401, body: { code: 'ACCESS_TOKEN_EXPIRED' } });
  });

  it('GET /me is 500 DECRYPT_FAILED naming the fields when the relay has the wrong AAD', async () => {
    await relay.close();
    relay = await serve({ decrypt: { key: KEY_HEX, aad: 'abcd' } });
    const { accessToken } = await tokens();
    const res = await call('GET', '/api/auth/me', { headers: bearer(accessToken) });
    expect(res).toMatchObject({ status: 500, body: { code: 'DECRYPT_FAILED' } });
    expect(res.body.error).toContain('name, phone');
    expect(JSON.stringify(res.body)).not.toMatch(/stack|at \//);
  });

  it('POST /logout removes the connection', async () => {
    const { accessToken } = await tokens();
    expect(await call('POST', '/api/auth/logout', { headers: bearer(accessToken) })).toMatchObject({ status: 200, body: { success: true } });
    expect((await call('GET', '/api/auth/me', { headers: bearer(accessToken) })).status).toBe(401);
    expect((await call('POST', '/api/auth/logout')).status).toBe(401);
  });

  it('POST /logout-by-user-key takes userKey from the query or the JSON body', async () => {
    const two = await tokens(2);
    const three = await tokens(3);
    expect(await call('POST', '/api/auth/logout-by-user-key?userKey=2', { headers: bearer(two.accessToken) })).toMatchObject({
      status: 200,
      body: { success: true, userKey: 2 },
    });
    expect((await call('GET', '/api/auth/me', { headers: bearer(two.accessToken) })).status).toBe(401);
    expect(await call('POST', '/api/auth/logout-by-user-key', { headers: bearer(three.accessToken), json: { userKey: 3 } })).toMatchObject({
      status: 200,
      body: { success: true, userKey: 3 },
    });
    const one = await tokens(1);
    expect(await call('POST', '/api/auth/logout-by-user-key', { headers: bearer(one.accessToken), json: {} })).toMatchObject({
      status: 400,
      body: { code: 'MISSING_FIELD' },
    });
    expect(await call('POST', '/api/auth/logout-by-user-key?userKey=-4', { headers: bearer(one.accessToken) })).toMatchObject({ status: 400 });
    expect((await call('POST', '/api/auth/logout-by-user-key?userKey=1')).status).toBe(401);
  });

  it("POST /logout-by-user-key removes only the caller's own connection: 403 for another user's, the same whether it exists or not", async () => {
    const one = await tokens(1);
    const two = await tokens(2);
    const calls = sandbox.stats.partnerCalls;
    const other = await call('POST', '/api/auth/logout-by-user-key', { headers: bearer(one.accessToken), json: { userKey: 2 } });
    const nobody = await call('POST', '/api/auth/logout-by-user-key', { headers: bearer(one.accessToken), json: { userKey: 987_654 } });
    expect(other).toMatchObject({ status: 403, body: { code: 'NOT_YOUR_CONNECTION', error: expect.stringContaining('X-Operator-Token') } });
    expect(nobody.status).toBe(other.status);
    expect(nobody.body).toEqual(other.body);
    // One login-me learned whose token it is; no removal went upstream.
    expect(sandbox.stats.partnerCalls - calls).toBe(1);
    expect((await call('GET', '/api/auth/me', { headers: bearer(two.accessToken) })).body).toMatchObject({ userKey: 2 });
    // A token the partner API does not take is a 401 before anything else is told.
    expect((await call('POST', '/api/auth/logout-by-user-key', { headers: bearer('at_never-issued'), json: { userKey: 2 } })).status).toBe(401);
  });

  it("POST /logout-by-user-key after /me spends no second login-me: the token's user is remembered", async () => {
    const { accessToken } = await tokens(5);
    expect((await call('GET', '/api/auth/me', { headers: bearer(accessToken) })).status).toBe(200);
    const calls = sandbox.stats.partnerCalls;
    expect((await call('POST', '/api/auth/logout-by-user-key', { headers: bearer(accessToken), json: { userKey: 5 } })).status).toBe(200);
    expect(sandbox.stats.partnerCalls - calls).toBe(1);
    expect(sandbox.state.user(5)).toBeDefined();
    expect((await call('GET', '/api/auth/me', { headers: bearer(accessToken) })).status).toBe(401);
  });

  it("POST /logout-by-user-key with the operator token (X-Operator-Token) removes any user's connection; a wrong one is 403", async () => {
    const operatorToken = 'op-5f1c0e8a9b2d4c7e';
    await relay.close();
    relay = await serve({ operatorToken });
    const one = await tokens(1);
    const two = await tokens(2);
    const operator = { 'x-operator-token': operatorToken };
    expect(await call('POST', '/api/auth/logout-by-user-key', { headers: { ...operator, ...bearer(one.accessToken) }, json: { userKey: 2 } })).toMatchObject({
      status: 200,
      body: { success: true, userKey: 2 },
    });
    expect((await call('GET', '/api/auth/me', { headers: bearer(two.accessToken) })).status).toBe(401);
    for (const wrong of ['op-5f1c0e8a9b2d4c7f', 'short', `${operatorToken}x`]) {
      const refused = await call('POST', '/api/auth/logout-by-user-key', {
        headers: { 'x-operator-token': wrong, ...bearer(one.accessToken) },
        json: { userKey: 1 },
      });
      expect(refused).toMatchObject({ status: 403, body: { code: 'OPERATOR_TOKEN_REFUSED' } });
    }
    expect((await call('GET', '/api/auth/me', { headers: bearer(one.accessToken) })).status).toBe(200);
    expect(logs.text).not.toContain(operatorToken);
  });

  it('POST /logout-by-user-key refuses any X-Operator-Token when serve has none configured', async () => {
    const one = await tokens(1);
    await tokens(2);
    const refused = await call('POST', '/api/auth/logout-by-user-key', {
      headers: { 'x-operator-token': 'anything-at-all-16', ...bearer(one.accessToken) },
      json: { userKey: 2 },
    });
    expect(refused).toMatchObject({ status: 403, body: { code: 'OPERATOR_TOKEN_REFUSED' } });
  });

  it('a 401 for a rejected or expired token carries the RFC 6750 challenge with error="invalid_token"', async () => {
    const missing = await call('GET', '/api/auth/me');
    expect(missing.headers['www-authenticate']).toBe('Bearer realm="miniapp relay"');
    const malformed = await call('POST', '/api/auth/logout', { headers: { authorization: 'Token abc' } });
    expect(malformed.headers['www-authenticate']).toMatch(/^Bearer realm="miniapp relay", error="invalid_request", error_description="[^"]+"$/);
    const rejected = await call('GET', '/api/auth/me', { headers: bearer('at_never-issued') });
    expect(rejected.status).toBe(401);
    expect(rejected.headers['www-authenticate']).toBe(
      'Bearer realm="miniapp relay", error="invalid_token", error_description="the access token has expired or was revoked; refresh it and retry"',
    );
    const first = await tokens();
    sandbox.clock.advance(3600_000);
    for (const answer of [
      await call('GET', '/api/auth/me', { headers: bearer(first.accessToken) }),
      await call('POST', '/api/auth/logout', { headers: bearer(first.accessToken) }),
      await call('POST', '/api/auth/logout-by-user-key', { headers: bearer(first.accessToken), json: { userKey: 1001 } }),
    ]) {
      expect(answer).toMatchObject({ status: 401, body: { code: 'ACCESS_TOKEN_EXPIRED' } });
      expect(answer.headers['www-authenticate']).toMatch(/^Bearer realm="miniapp relay", error="invalid_token", error_description="[^"]+"$/);
    }
    sandbox.clock.advance(15 * 86_400_000);
    const refresh = await call('POST', '/api/auth/refresh', { json: { refreshToken: first.refreshToken } });
    expect(refresh).toMatchObject({ status: 401, body: { code: 'REFRESH_TOKEN_EXPIRED' } });
    expect(refresh.headers['www-authenticate']).toBe(
      'Bearer realm="miniapp relay", error="invalid_token", error_description="the refresh token has expired or was revoked; log in again"',
    );
    // A used code is the client's to fix by logging in again: 400, no challenge.
    const code = await call('POST', '/api/auth/token', { json: { authorizationCode: 'code_used', referrer: 'sandbox' } });
    expect(code.status).toBe(400);
    expect(code.headers['www-authenticate']).toBeUndefined();
  });

  it("GET /health answers both variants' fields", async () => {
    const res = await call('GET', '/health');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', timestamp: expect.any(String), service: 'miniapp-relay', version: '1.2.3' });
    expect(Number.isNaN(Date.parse(res.body.timestamp))).toBe(false);
  });

  it('answers 404 with the error body and 413 for an oversized body', async () => {
    expect(await call('GET', '/api/auth/nothing')).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } });
    const big = await call('POST', '/api/auth/token', { json: { authorizationCode: 'x'.repeat(100_000), referrer: 'sandbox' } });
    expect(big).toMatchObject({ status: 413, body: { code: 'PAYLOAD_TOO_LARGE' } });
  });
});

describe('unlink callback', () => {
  it('records GET and POST receipts, userKey 0 and unknown referrers, before answering', async () => {
    expect(await call('GET', '/api/auth/unlink-callback?userKey=0&referrer=UNLINK')).toMatchObject({ status: 200, body: { success: true } });
    expect(await call('POST', '/api/auth/unlink-callback', { json: { userKey: 42, referrer: 'WITHDRAWAL_TOSS' } })).toMatchObject({ status: 200 });
    const { openStore } = await import('../../src/store/store.js');
    const { UnlinkEventStore } = await import('../../src/store/unlink-events.js');
    const store = await openStore({ kind: 'sqlite', dataDir, readonly: true });
    try {
      expect(await new UnlinkEventStore(store.sql).list()).toMatchObject([
        { userKey: 0, referrer: 'UNLINK', method: 'GET', source: '127.0.0.1' },
        { userKey: 42, referrer: 'WITHDRAWAL_TOSS', method: 'POST' },
      ]);
    } finally {
      await store.close();
    }
  });

  it('rejects a malformed callback with 400 naming userKey', async () => {
    expect(await call('GET', '/api/auth/unlink-callback?referrer=UNLINK')).toMatchObject({ status: 400, body: { error: expect.stringContaining('userKey') } });
    expect(await call('POST', '/api/auth/unlink-callback', { json: { userKey: 'abc' } })).toMatchObject({ status: 400 });
    expect(await call('POST', '/api/auth/unlink-callback', { json: { userKey: 1.5 } })).toMatchObject({ status: 400 });
    expect(await call('POST', '/api/auth/unlink-callback', { body: 'nope', headers: { 'content-type': 'application/json' } })).toMatchObject({ status: 400 });
  });

  it('requires the configured Basic auth', async () => {
    await relay.close();
    relay = await serve({ callbackAuth: 'partner:s3cret' });
    const good = { authorization: `Basic ${Buffer.from('partner:s3cret').toString('base64')}` };
    const bad = { authorization: `Basic ${Buffer.from('partner:wrong').toString('base64')}` };
    expect(await call('GET', '/api/auth/unlink-callback?userKey=1&referrer=UNLINK', { headers: good })).toMatchObject({ status: 200 });
    const refused = await call('POST', '/api/auth/unlink-callback', { json: { userKey: 1, referrer: 'UNLINK' }, headers: bad });
    expect(refused).toMatchObject({ status: 401, body: { code: 'CALLBACK_UNAUTHORIZED' } });
    expect(refused.headers['www-authenticate']).toContain('Basic');
    expect((await call('POST', '/api/auth/unlink-callback', { json: { userKey: 1, referrer: 'UNLINK' } })).status).toBe(401);
  });

  it('keeps receipts across a restart', async () => {
    await call('POST', '/api/auth/unlink-callback', { json: { userKey: 5, referrer: 'WITHDRAWAL_PLATFORM' } });
    await relay.close();
    relay = await serve();
    await call('POST', '/api/auth/unlink-callback', { json: { userKey: 6, referrer: 'UNLINK' } });
    const { openStore } = await import('../../src/store/store.js');
    const { UnlinkEventStore } = await import('../../src/store/unlink-events.js');
    const store = await openStore({ kind: 'sqlite', dataDir, readonly: true });
    expect((await new UnlinkEventStore(store.sql).list()).map((e) => e.userKey)).toEqual([5, 6]);
    await store.close();
  });
});

describe('CORS', () => {
  beforeEach(async () => {
    await relay.close();
    relay = await serve({ corsOrigin: 'https://app.example.com' });
  });

  it('answers a preflight from the configured origin, with credentials', async () => {
    const res = await call('OPTIONS', '/api/auth/me', {
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(res.headers['access-control-allow-credentials']).toBe('true');
    expect(String(res.headers['access-control-allow-headers']).toLowerCase()).toContain('authorization');
    const simple = await call('GET', '/health', { headers: { origin: 'https://app.example.com' } });
    expect(simple.headers['access-control-allow-origin']).toBe('https://app.example.com');
  });

  it('gives another origin no CORS headers', async () => {
    const res = await call('OPTIONS', '/api/auth/me', { headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' } });
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    const simple = await call('GET', '/health', { headers: { origin: 'https://evil.example' } });
    expect(simple.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('the upstream URL', () => {
  it('may be the whole partner URL, as serve and the sandbox print it, without doubling the prefix', async () => {
    for (const base of [`${sandbox.url}/api-partner/v1/miniapp/user/oauth2`, `${sandbox.url}/api-partner/v1/miniapp/user/oauth2/`]) {
      await relay.close();
      relay = await serve({ upstream: { baseUrl: base, pathPrefix: '/api-partner/v1/miniapp/user/oauth2', tls: {} } });
      expect(relay.upstreamUrl).toBe(`${sandbox.url}/api-partner/v1/miniapp/user/oauth2`);
      const { accessToken } = await tokens();
      expect((await call('GET', '/api/auth/me', { headers: bearer(accessToken) })).status).toBe(200);
    }
  });

  it('may carry another partner prefix in full (the production one) when the setting is the default', async () => {
    const production = '/api-partner/v1/apps-in-toss/user/oauth2';
    const other = await startSandbox({ prefix: production });
    try {
      await relay.close();
      relay = await serve({ upstream: { baseUrl: `${other.url}${production}`, pathPrefix: '/api-partner/v1/miniapp/user/oauth2', tls: {} } });
      const res = await call('POST', '/api/auth/token', { json: { authorizationCode: other.state.login(1001).authorizationCode, referrer: 'sandbox' } });
      expect(res.status).toBe(200);
    } finally {
      await other.close();
    }
  });
});

describe('upstream faults', () => {
  it('gives 500 UPSTREAM_TIMEOUT for a slow sandbox, and keeps serving', async () => {
    const slow = await startSandbox({ delayMs: 1_000 });
    await relay.close();
    relay = await serve({ upstream: { baseUrl: slow.url, pathPrefix: '/api-partner/v1/miniapp/user/oauth2', tls: {} }, timeoutMs: 150 });
    try {
      const res = await call('POST', '/api/auth/token', { json: { authorizationCode: 'x', referrer: 'sandbox' } });
      expect(res).toMatchObject({ status: 500, body: { code: 'UPSTREAM_TIMEOUT', error: 'the partner API did not answer in time' } });
      expect((await call('GET', '/health')).status).toBe(200);
    } finally {
      await slow.close();
    }
  });

  it('gives a clean 500 for a refused connection and a malformed upstream body, and keeps serving', async () => {
    const junk: Server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('<html>oops'));
    await new Promise<void>((resolve) => junk.listen(0, '127.0.0.1', resolve));
    const junkUrl = `http://127.0.0.1:${(junk.address() as { port: number }).port}`;
    await relay.close();
    relay = await serve({ upstream: { baseUrl: junkUrl, pathPrefix: '/p', tls: {} } });
    try {
      const malformed = await call('POST', '/api/auth/token', { json: { authorizationCode: 'x', referrer: 'sandbox' } });
      expect(malformed).toMatchObject({ status: 500, body: { code: 'BAD_RESPONSE' } });
      await new Promise<void>((resolve) => junk.close(() => resolve()));
      const refused = await call('GET', '/api/auth/me', { headers: bearer('t') });
      expect(refused).toMatchObject({ status: 500, body: { code: 'UPSTREAM_UNREACHABLE', error: 'the partner API cannot be reached' } });
      expect(JSON.stringify(refused.body)).not.toContain(junkUrl);
      expect((await call('GET', '/health')).status).toBe(200);
    } finally {
      junk.close();
    }
  });
});

describe('logs', () => {
  it('hold no token, key, AAD or personal value after a full login flow', async () => {
    const first = await tokens(1234);
    await call('GET', '/api/auth/me', { headers: bearer(first.accessToken) });
    const second = (await call('POST', '/api/auth/refresh', { json: { refreshToken: first.refreshToken } })).body;
    await call('GET', '/api/auth/me', { headers: bearer(second.accessToken) });
    await call('POST', '/api/auth/logout-by-user-key', { headers: bearer(second.accessToken), json: { userKey: 1234 } });
    await call('GET', '/api/auth/me', { headers: bearer(second.accessToken) }); // a 401, logged
    const text = logs.text;
    expect(text).toContain('/api/auth/me'); // the log is there at all
    const person = personFor(1234);
    const secrets = [
      first.accessToken,
      first.refreshToken,
      second.accessToken,
      second.refreshToken,
      KEY_HEX,
      AAD_HEX,
      person.name,
      person.phone,
      person.birthday,
      person.ci,
    ];
    for (const secret of secrets) expect(text).not.toContain(secret);
  });
});

describe('the operator token setting', () => {
  it('is refused by `miniapp serve` when shorter than 16 characters, without echoing it (exit 2)', async () => {
    const { Sandbox } = await import('../helpers/cli.js');
    const cli = new Sandbox();
    try {
      for (const run of [
        () => cli.run(['serve', '--port', '0', '--no-grpc', '--operator-token', 'sh0rt-secret']),
        () => cli.run(['serve', '--port', '0', '--no-grpc'], { env: { MINIAPP_OPERATOR_TOKEN: 'sh0rt-secret' } }),
      ]) {
        const result = await run();
        expect(result.code).toBe(2);
        expect(result.stderr).toContain('at least 16 printable characters');
        expect(result.stderr).not.toContain('sh0rt-secret');
      }
    } finally {
      cli.dispose();
    }
  });
});
