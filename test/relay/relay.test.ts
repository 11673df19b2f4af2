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
    expect((await call('POST', '/api/auth/token', { json: { authorizationCode: 5, referrer: 'sandbox' } })).body.error).toBe('authorizationCode must be a string');
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
    expect((await call('POST', '/api/auth/refresh', { json: { refreshToken: first.refreshToken } }))).toMatchObject({
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
    expect(await call('GET', '/api/auth/me', { headers: { authorization: 'Token abc' } })).toMatchObject({ status: 401, body: { code: 'MALFORMED_AUTHORIZATION' } });
    expect(await call('GET', '/api/auth/me', { headers: { authorization: 'Bearer ' } })).toMatchObject({ status: 401 });
    expect(await call('GET', '/api/auth/me', { headers: { authorization: 'Bearerabc' } })).toMatchObject({ status: 401, body: { code: 'MALFORMED_AUTHORIZATION' } });
    // The scheme's name in any case (RFC 9110 section 11.1), as the blog API already takes it.
    const fresh = await tokens(78);
    for (const scheme of ['bearer', 'BEARER']) {
      expect(await call('GET', '/api/auth/me', { headers: { authorization: `${scheme} ${fresh.accessToken}` } })).toMatchObject({ status: 200, body: { userKey: 78 } });
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
    const { accessToken } = await tokens(1);
    await tokens(2);
    await tokens(3);
    expect(await call('POST', '/api/auth/logout-by-user-key?userKey=2', { headers: bearer(accessToken) })).toMatchObject({
      status: 200,
      body: { success: true, userKey: 2 },
    });
    expect(await call('POST', '/api/auth/logout-by-user-key', { headers: bearer(accessToken), json: { userKey: 3 } })).toMatchObject({
      status: 200,
      body: { success: true, userKey: 3 },
    });
    expect(await call('POST', '/api/auth/logout-by-user-key', { headers: bearer(accessToken), json: {} })).toMatchObject({
      status: 400,
      body: { code: 'MISSING_FIELD' },
    });
    expect(await call('POST', '/api/auth/logout-by-user-key?userKey=-4', { headers: bearer(accessToken) })).toMatchObject({ status: 400 });
    expect((await call('POST', '/api/auth/logout-by-user-key?userKey=2')).status).toBe(401);
  });

  it('GET /health answers both variants\' fields', async () => {
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
    const secrets = [first.accessToken, first.refreshToken, second.accessToken, second.refreshToken, KEY_HEX, AAD_HEX, person.name, person.phone, person.birthday, person.ci];
    for (const secret of secrets) expect(text).not.toContain(secret);
  });
});
