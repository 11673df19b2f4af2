/**
 * The host page's routes (src/sandbox/host/routes.ts) through inject: its
 * pages under their policies, the module as a page on another origin loads
 * it, and the API the pages call: the login with and without the consent
 * screen, forced failures, the login window's origins, removals and their
 * callbacks, and precise refusals of bad input and of other sites.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { AAD, KEY } from '../helpers/vectors.js';

let sandbox: Sandbox;
const OWN = 'http://localhost:80';

async function api(method: 'GET' | 'POST', path: string, payload?: unknown, headers: Record<string, string> = {}) {
  const response = await sandbox.app.inject({
    method,
    url: `/host/api/${path}`,
    headers: { host: 'localhost:80', ...headers },
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
  return { status: response.statusCode, body: response.json() as Record<string, any>, headers: response.headers };
}

describe('the host page on the sandbox', () => {
  beforeEach(async () => {
    sandbox = await buildSandbox({ key: KEY, aad: AAD, host: { appOrigins: ['http://127.0.0.1:5173'] } });
  });
  afterEach(async () => sandbox.app.close());

  it('serves its pages with no inline script or style allowed, the phone frame limited to the one mini-app shown', async () => {
    const redirect = await sandbox.app.inject({ url: '/host?app=http%3A%2F%2F127.0.0.1%3A5173%2F' });
    expect(redirect.statusCode).toBe(302);
    expect(redirect.headers.location).toBe('/host/?app=http%3A%2F%2F127.0.0.1%3A5173%2F');

    const demo = await sandbox.app.inject({ url: '/host/' });
    expect(demo.statusCode).toBe(200);
    expect(demo.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(demo.body).toContain('<script type="module" src="host.js"></script>');
    const csp = String(demo.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self';");
    expect(csp).toContain("frame-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe');
    expect(demo.headers['x-frame-options']).toBe('DENY');

    const app = await sandbox.app.inject({ url: '/host/?app=http://127.0.0.1:5173/index.html' });
    expect(app.headers['content-security-policy']).toMatch(/(^|; )frame-src http:\/\/127\.0\.0\.1:5173(;|$)/);
    for (const bad of ['javascript:alert(1)', 'http://user:pw@127.0.0.1:5173/', 'not a url']) {
      const refused = await sandbox.app.inject({ url: `/host/?app=${encodeURIComponent(bad)}` });
      expect(refused.headers['content-security-policy'], bad).toContain("frame-src 'none'");
    }

    // Opened by a page of another origin, the login window must keep its opener.
    const login = await sandbox.app.inject({ url: '/host/login' });
    expect(login.headers['cross-origin-opener-policy']).toBe('unsafe-none');
    expect(login.headers['content-security-policy']).not.toContain('frame-src');
    const demoApp = await sandbox.app.inject({ url: '/host/demo' });
    expect(demoApp.headers['x-frame-options']).toBe('SAMEORIGIN');
    expect(demoApp.headers['content-security-policy']).toContain("frame-ancestors 'self'");
  });

  it('serves appLogin() as a JavaScript module any dev server may import, and nothing it does not have', async () => {
    const module = await sandbox.app.inject({ url: '/host/app-login.js', headers: { origin: 'http://127.0.0.1:5173' } });
    expect(module.statusCode).toBe(200);
    expect(module.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(module.headers['access-control-allow-origin']).toBe('*');
    expect(module.body).toContain('export function appLogin()');
    for (const file of ['host.js', 'consent.js', 'api.js', 'login.js', 'demo.js', 'host.css', 'demo.css']) {
      expect((await sandbox.app.inject({ url: `/host/${file}` })).statusCode, file).toBe(200);
    }
    const missing = await sandbox.app.inject({ url: '/host/secrets.js' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ code: 'NOT_FOUND', error: 'the host page has no file secrets.js' });
  });

  it('shows a first-time user the consent screen, then gives a code; a returning user gets one with no screen', async () => {
    const frame = { via: 'frame', origin: 'http://127.0.0.1:5173' };
    const first = await api('POST', 'login', frame);
    expect(first).toMatchObject({ status: 200, body: { outcome: 'consent', user: { userKey: 1001, connected: false }, terms: sandbox.state.terms } });
    const missing = await api('POST', 'login', { ...frame, userKey: 1001, agreedTerms: ['terms_service_required'] });
    expect(missing).toMatchObject({ status: 400, body: { code: 'REQUIRED_TERMS_MISSING', error: expect.stringContaining('missing terms_privacy_required') } });
    const agreed = await api('POST', 'login', { ...frame, userKey: 1001, agreedTerms: ['terms_service_required', 'terms_privacy_required'] });
    expect(agreed.body).toMatchObject({ outcome: 'code', userKey: 1001, referrer: 'SANDBOX', consented: ['terms_service_required', 'terms_privacy_required'] });
    expect(agreed.body.authorizationCode).toMatch(/^code_/);
    expect(agreed.headers['cache-control']).toBe('no-store');
    const again = await api('POST', 'login', frame);
    expect(again.body).toMatchObject({ outcome: 'code', userKey: 1001, consented: null });

    const state = await api('GET', 'state?after=0');
    expect(state.body).toMatchObject({
      users: [{ userKey: 1001, connected: true, agreedTerms: ['terms_service_required', 'terms_privacy_required'] }],
      selected: 1001,
      failure: 'none',
      callback: null,
      appUrl: null,
    });
    expect(state.body.events.map((event: { kind: string }) => event.kind)).toEqual(['user-created', 'code-issued', 'code-issued']);
    expect((await api('GET', `state?after=${state.body.last}`)).body.events).toEqual([]);
  });

  it('rejects appLogin() as the panel asks, and records a cancel', async () => {
    const frame = { via: 'frame', origin: 'http://127.0.0.1:5173' };
    for (const [failure, code] of [
      ['cancel', 'USER_CANCELLED'],
      ['network', 'NETWORK_ERROR'],
      ['no-host', 'NOT_IN_HOST_APP'],
    ]) {
      expect((await api('POST', 'failure', { failure })).body).toEqual({ failure });
      expect((await api('POST', 'login', frame)).body).toMatchObject({ outcome: 'rejected', code });
    }
    expect(await api('POST', 'failure', { failure: 'sometimes' })).toMatchObject({
      status: 400,
      body: { code: 'INVALID_FIELD', error: 'failure must be one of none, cancel, network, no-host' },
    });
    await api('POST', 'failure', { failure: 'none' });
    const cancel = await api('POST', 'cancel', { ...frame, userKey: 1001 });
    expect(cancel.body).toMatchObject({ outcome: 'rejected', code: 'USER_CANCELLED' });
    const failures = (await api('GET', 'state')).body.events.filter((event: { kind: string }) => event.kind === 'app-login-failed');
    expect(failures.map((event: { text: string }) => event.text)).toEqual([
      expect.stringContaining('rejected with USER_CANCELLED'),
      expect.stringContaining('rejected with NETWORK_ERROR'),
      expect.stringContaining('rejected with NOT_IN_HOST_APP'),
      'appLogin() from http://127.0.0.1:5173 (in the host page) cancelled on the consent screen (USER_CANCELLED)',
    ]);
  });

  it('gives codes through the login window only to pages of the origins it knows', async () => {
    const refused = await api('POST', 'login', { via: 'popup', origin: 'https://elsewhere.example' });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('ORIGIN_NOT_ALLOWED');
    expect(refused.body.error).toContain('allowed are http://localhost:80, http://127.0.0.1:5173');
    expect((await api('POST', 'login', { via: 'popup', origin: 'http://127.0.0.1:5173' })).body.outcome).toBe('consent');
    expect((await api('POST', 'login', { via: 'popup', origin: OWN })).body.outcome).toBe('consent');
  });

  it('refuses calls from other sites, and bad input with the field it is about', async () => {
    const cross = await api('POST', 'users', {}, { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' });
    expect(cross).toMatchObject({ status: 403, body: { code: 'CROSS_ORIGIN_REFUSED' } });
    expect((await api('GET', 'state', undefined, { 'sec-fetch-site': 'same-site' })).status).toBe(403);
    expect((await api('GET', 'state', undefined, { origin: OWN, 'sec-fetch-site': 'same-origin' })).status).toBe(200);
    expect(sandbox.state.users()).toEqual([]);

    expect(await api('POST', 'login', { via: 'window', origin: OWN })).toMatchObject({
      status: 400,
      body: { error: 'via must be frame (the host page) or popup (the login window)' },
    });
    expect(await api('POST', 'login', { via: 'frame' })).toMatchObject({ status: 400, body: { code: 'MISSING_FIELD' } });
    expect(await api('POST', 'select', { userKey: '1001' })).toMatchObject({ status: 400, body: { error: 'userKey must be a non-negative integer' } });
    expect(await api('POST', 'select', { userKey: 5 })).toMatchObject({ status: 404, body: { code: 'USER_NOT_FOUND' } });
    expect(await api('POST', 'users', [1])).toMatchObject({ status: 400, body: { code: 'INVALID_BODY' } });
    expect(await api('GET', 'state?after=-1')).toMatchObject({ status: 400, body: { code: 'INVALID_QUERY' } });
    expect(await api('POST', 'users', { userKey: 42 })).toMatchObject({ status: 201, body: { userKey: 42, connected: false } });
    expect(await api('POST', 'users', { userKey: 42 })).toMatchObject({ status: 409, body: { code: 'USER_EXISTS' } });
    expect(await api('POST', 'remove', { userKey: 42, reason: 'UNLINK' })).toMatchObject({ status: 409, body: { code: 'NO_CONNECTION' } });
    expect(await api('POST', 'remove', { userKey: 42, reason: 'BORED' })).toMatchObject({
      status: 400,
      body: { error: expect.stringContaining('UNLINK, WITHDRAWAL_TERMS, WITHDRAWAL_PLATFORM, WITHDRAWAL_TOSS') },
    });
  });
});

describe('removals from the host page', () => {
  let receiver: Server;
  const received: unknown[] = [];
  afterEach(async () => {
    await sandbox.app.close();
    await new Promise((resolve) => receiver.close(resolve));
  });

  it('remove the connection, send the callback with the reason, and log both', async () => {
    receiver = createServer((request, response) => {
      let body = '';
      request
        .on('data', (chunk) => (body += chunk))
        .on('end', () => {
          received.push({ path: request.url, authorization: request.headers.authorization, body: JSON.parse(body) });
          response.writeHead(200, { 'content-type': 'application/json' }).end('{"success":true}');
        });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    // A secret in the callback URL's query is sent, and shown nowhere.
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/callback?token=hook-secret`;
    const shown = url.replace('hook-secret', 'REDACTED');
    sandbox = await buildSandbox({ key: KEY, aad: AAD, host: {}, callback: { url, method: 'POST', basicAuth: 'partner:s3cret' } });
    sandbox.state.login(1001);
    const removal = await api('POST', 'remove', { userKey: 1001, reason: 'WITHDRAWAL_TERMS' });
    expect(removal.body).toEqual({ userKey: 1001, reason: 'WITHDRAWAL_TERMS', callback: { url: shown, method: 'POST', status: 200 } });
    expect(received).toEqual([
      {
        path: '/callback?token=hook-secret',
        authorization: `Basic ${Buffer.from('partner:s3cret').toString('base64')}`,
        body: { userKey: 1001, referrer: 'WITHDRAWAL_TERMS' },
      },
    ]);
    const state = (await api('GET', 'state')).body;
    expect(state.callback).toEqual({ url: shown, method: 'POST' });
    expect(JSON.stringify(state)).not.toContain('hook-secret');
    expect(state.users[0]).toMatchObject({ userKey: 1001, connected: false, agreedTerms: [] });
    expect(state.events.slice(-2).map((event: { kind: string; text: string }) => [event.kind, event.text])).toEqual([
      ['connection-removed', expect.stringContaining('removed by the user (WITHDRAWAL_TERMS)')],
      ['callback', `removal callback POST ${shown} {userKey: 1001, referrer: WITHDRAWAL_TERMS} answered HTTP 200`],
    ]);
  });
});

describe('a sandbox without the host page', () => {
  it('answers 404 under /host/', async () => {
    sandbox = await buildSandbox({ key: KEY, aad: AAD });
    for (const url of ['/host/', '/host/app-login.js', '/host/api/state']) expect((await sandbox.app.inject({ url })).statusCode, url).toBe(404);
    await sandbox.app.close();
  });
});
