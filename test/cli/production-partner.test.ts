/**
 * What a user of the production partner API meets that the spec writes
 * otherwise (issue 40, item 4), through the CLI: the production prefix as
 * the one word `production` (doctor suggesting it when the spec's prefix
 * answers 404, and the reverse); login-me's scope comma-separated and
 * failures as a bare {"error":"invalid_grant"} (`sandbox --vendor-shapes`),
 * read by the CLI and the relay; and the unlink reason WITHDRAWAL_TOSS,
 * known beside the spec's WITHDRAWAL_PLATFORM.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { request } from 'undici';
import { Sandbox } from '../helpers/cli.js';
import { startSandbox, type RunningSandbox } from '../helpers/partner-sandbox.js';
import { startTestServe } from '../helpers/serve.js';
import { PARTNER_PREFIXES } from '../../src/login/partner-prefix.js';
import { GRANTED_SCOPE } from '../../src/sandbox/partner/state.js';
import type { RunningServe } from '../../src/server/serve.js';

let sb: Sandbox;
let sandbox: RunningSandbox | undefined;
let serve: RunningServe | undefined;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(async () => {
  await serve?.close();
  serve = undefined;
  await sandbox?.close();
  sandbox = undefined;
  sb.dispose();
});

interface Check {
  check: string;
  status: string;
  detail: string;
}

async function doctor(env: Record<string, string>): Promise<Check> {
  const result = await sb.run(['doctor', '--json'], { env });
  return (JSON.parse(result.stdout).checks as Check[]).find((c) => c.check === 'partner API')!;
}

describe('path-prefix production', () => {
  it('is a one-word setting for the production prefix, spec the word for the default, anything else exit 2', async () => {
    const set = await sb.run(['config', 'set', 'path-prefix', 'production']);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stderr).toContain(`set path-prefix in profile "default" (${PARTNER_PREFIXES.production})`);
    expect((await sb.run(['config', 'get', 'path-prefix'])).stdout).toBe(`${PARTNER_PREFIXES.production}\n`);
    expect((await sb.run(['config', 'get', 'path-prefix'], { env: { MINIAPP_PATH_PREFIX: 'Spec' } })).stdout).toBe(`${PARTNER_PREFIXES.spec}\n`);
    const bad = await sb.run(['config', 'set', 'path-prefix', 'prod']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('path-prefix must be spec, production or a URL path starting with "/"; got "prod"');
    const conflict = await sb.run(['sandbox', '--port', '0', '--vendor-shapes', '--error-shape', 'envelope']);
    expect(conflict.code).toBe(2);
    expect(conflict.stderr).toContain('--vendor-shapes answers failures bare; it does not go with --error-shape envelope');
    const badFlag = await sb.run(['sandbox', '--port', '0', '--prefix', 'prod']);
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toContain('--prefix must be spec, production or a URL path');
  });

  it('logs in against a partner API at the production prefix', async () => {
    sandbox = await startSandbox({ prefix: PARTNER_PREFIXES.production });
    const env = { ...sandbox.env, MINIAPP_PATH_PREFIX: 'production' };
    const { authorizationCode } = sandbox.state.login(1001);
    const exchange = await sb.run(['token', 'exchange', '--code', authorizationCode, '--referrer', 'sandbox'], { env });
    expect(exchange.code, exchange.stderr).toBe(0);
    const me = await sb.run(['me', '--json'], { env });
    expect(me.code, me.stderr).toBe(0);
    expect(JSON.parse(me.stdout)).toMatchObject({ userKey: 1001, name: sandbox.state.user(1001)!.name });
  });

  it('doctor suggests production when the spec prefix answers 404, and spec when production does', async () => {
    sandbox = await startSandbox({ prefix: PARTNER_PREFIXES.production });
    const atSpec = await doctor(sandbox.env);
    expect(atSpec.status).toBe('fail');
    expect(atSpec.detail).toContain(`answered 404 at the spec prefix ${PARTNER_PREFIXES.spec}, but the partner API answers at ${PARTNER_PREFIXES.production}`);
    expect(atSpec.detail).toContain('`miniapp config set path-prefix production`');
    expect((await doctor({ ...sandbox.env, MINIAPP_PATH_PREFIX: 'production' })).status).toBe('ok');
    await sandbox.close();

    sandbox = await startSandbox();
    const atProduction = await doctor({ ...sandbox.env, MINIAPP_PATH_PREFIX: 'production' });
    expect(atProduction.status).toBe('fail');
    expect(atProduction.detail).toContain('`miniapp config set path-prefix spec`');
    // A path of one's own that 404s, where the spec's prefix answers: spec, named.
    expect((await doctor({ ...sandbox.env, MINIAPP_PATH_PREFIX: '/v2/oauth' })).detail).toContain('answered 404 at /v2/oauth, but the partner API answers at');
    await sandbox.close();

    // Neither known prefix answers: the plain advice, naming both.
    sandbox = await startSandbox({ prefix: '/partner/oauth' });
    const elsewhere = await doctor(sandbox.env);
    expect(elsewhere).toMatchObject({ status: 'fail' });
    expect(elsewhere.detail).toContain(
      `answered 404 at ${PARTNER_PREFIXES.spec}: check path-prefix (spec: ${PARTNER_PREFIXES.spec}; production: ${PARTNER_PREFIXES.production})`,
    );
    expect((await doctor({ ...sandbox.env, MINIAPP_PATH_PREFIX: '/partner/oauth' })).status).toBe('ok');
  });
});

describe("the vendor's shapes (sandbox --vendor-shapes)", () => {
  it('comma-separated scopes and bare invalid_grant are read by the CLI: scopes stored and printed space-separated, expiry refreshed', async () => {
    sandbox = await startSandbox({ scopeSeparator: ',', errorShape: 'bare' });
    const { authorizationCode } = sandbox.state.login(2001);
    const exchange = await sb.run(['token', 'exchange', '--code', authorizationCode, '--referrer', 'sandbox', '--json'], { env: sandbox.env });
    expect(exchange.code, exchange.stderr).toBe(0);
    expect(JSON.parse(exchange.stdout).scope).toBe(GRANTED_SCOPE);
    const raw = await sb.run(['me', '--raw'], { env: sandbox.env });
    expect(JSON.parse(raw.stdout).scope).toBe(GRANTED_SCOPE.split(' ').join(','));
    const me = await sb.run(['me', '--json'], { env: sandbox.env });
    expect(JSON.parse(me.stdout).scope).toBe(GRANTED_SCOPE);
    // An hour on, login-me answers a bare {"error":"invalid_grant"} (HTTP 401): me refreshes once and goes on.
    sandbox.clock.advance(61 * 60_000);
    const later = await sb.run(['me', '--json'], { env: sandbox.env });
    expect(later.code, later.stderr).toBe(0);
    expect(later.stderr).toContain('the access token had expired: refreshed it');
    // A used code, answered bare: the same typed error as from the envelope.
    const again = await sb.run(['token', 'exchange', '--code', authorizationCode, '--referrer', 'sandbox'], { env: sandbox.env });
    expect(again.code).toBe(4);
    expect(again.stderr).toContain('the authorization code has expired or was already used (invalid_grant');
  });

  it('are read by the relay: /me answers the scope space-separated, an expired token is 401 with the Bearer challenge', async () => {
    sandbox = await startSandbox({ scopeSeparator: ',', errorShape: 'bare' });
    serve = await startTestServe({
      upstream: { baseUrl: sandbox.url, pathPrefix: PARTNER_PREFIXES.spec, tls: {} },
      decrypt: { key: sandbox.env.MINIAPP_DECRYPT_KEY, aad: sandbox.env.MINIAPP_DECRYPT_AAD },
    });
    const { authorizationCode } = sandbox.state.login(2002);
    const post = async (path: string, json: unknown) => {
      const response = await request(`${serve!.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(json) });
      return { status: response.statusCode, body: (await response.body.json()) as Record<string, any> };
    };
    const tokens = await post('/api/auth/token', { authorizationCode, referrer: 'sandbox' });
    expect(tokens).toMatchObject({ status: 200, body: { scope: GRANTED_SCOPE } });
    const me = await request(`${serve.url}/api/auth/me`, { headers: { authorization: `Bearer ${tokens.body.accessToken}` } });
    const user = (await me.body.json()) as Record<string, unknown>;
    expect(me.statusCode).toBe(200);
    expect(user).toMatchObject({ userKey: 2002, scope: GRANTED_SCOPE, name: sandbox.state.user(2002)!.name });
    sandbox.clock.advance(61 * 60_000);
    const expired = await request(`${serve.url}/api/auth/me`, { headers: { authorization: `Bearer ${tokens.body.accessToken}` } });
    await expired.body.dump();
    expect(expired.statusCode).toBe(401);
    expect(expired.headers['www-authenticate']).toContain('error="invalid_token"');
    expect(await post('/api/auth/refresh', { refreshToken: tokens.body.refreshToken })).toMatchObject({ status: 200, body: { scope: GRANTED_SCOPE } });
  });
});

describe('the unlink reason WITHDRAWAL_TOSS', () => {
  it('is offered by sandbox unlink, and recorded and listed as known, beside WITHDRAWAL_PLATFORM; others as unknown', async () => {
    const dataDir = join(sb.root, 'data');
    serve = await startTestServe({ store: { kind: 'sqlite', dataDir } });
    const url = serve.sandbox!.url;
    const help = await sb.run(['sandbox', 'unlink', '--help']);
    expect(help.stdout).toContain('WITHDRAWAL_TOSS');
    for (const [userKey, reason] of [
      [3001, 'WITHDRAWAL_TOSS'],
      [3002, 'WITHDRAWAL_PLATFORM'],
      [3003, 'WITHDRAWL_TOSS'],
    ] as const) {
      expect((await sb.run(['sandbox', 'login', '--user-key', String(userKey), '--url', url])).code).toBe(0);
      const unlink = await sb.run(['sandbox', 'unlink', '--user-key', String(userKey), '--reason', reason, '--url', url]);
      expect(unlink.code, unlink.stderr).toBe(0);
      expect(unlink.stderr).toContain(`removed the login connection of userKey ${userKey} (${reason})`);
      if (reason === 'WITHDRAWL_TOSS') expect(unlink.stderr).toContain('WITHDRAWL_TOSS is not a reason the partner API is known to send');
      else expect(unlink.stderr).not.toContain('not a reason');
    }
    const listed = await sb.run(['callbacks', 'list', '--json'], { env: { MINIAPP_DATA_DIR: dataDir } });
    expect(listed.code, listed.stderr).toBe(0);
    expect(
      (JSON.parse(listed.stdout) as Record<string, unknown>[]).map(({ userKey, referrer, known, meaning }) => ({ userKey, referrer, known, meaning })),
    ).toEqual([
      { userKey: 3001, referrer: 'WITHDRAWAL_TOSS', known: true, meaning: "the user left the host platform (the vendor's name for WITHDRAWAL_PLATFORM)" },
      { userKey: 3002, referrer: 'WITHDRAWAL_PLATFORM', known: true, meaning: 'the user left the host platform' },
      { userKey: 3003, referrer: 'WITHDRAWL_TOSS', known: false, meaning: 'unknown reason, recorded as it came' },
    ]);
    const rows = (await sb.run(['callbacks', 'list'], { env: { MINIAPP_DATA_DIR: dataDir } })).stdout.trim().split('\n');
    expect(rows[0]!.split('\t').slice(1, 3)).toEqual(['3001', 'WITHDRAWAL_TOSS']);
    expect(rows[0]!.split('\t').at(-1)).toBe("the user left the host platform (the vendor's name for WITHDRAWAL_PLATFORM)");
    expect(rows[2]!.split('\t').at(-1)).toBe('unknown reason, recorded as it came');
  });
});
