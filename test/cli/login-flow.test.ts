/**
 * The login issue's acceptance scenario, through the CLI in-process against
 * a real sandbox listening on 127.0.0.1:0.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Sandbox } from '../helpers/cli.js';
import { startSandbox, type RunningSandbox } from '../helpers/partner-sandbox.js';
import { personFor } from '../../src/sandbox/partner/people.js';
import { ConfigStore } from '../../src/config/store.js';
import { KEY_HEX } from '../helpers/vectors.js';

let cli: Sandbox;
let sandbox: RunningSandbox;
beforeEach(async () => {
  cli = new Sandbox();
  sandbox = await startSandbox();
});
afterEach(async () => {
  await sandbox.close();
  cli.dispose();
});

const run = (argv: string[], env: Record<string, string> = {}) => cli.run(argv, { env: { ...sandbox.env, ...env } });

async function codeFor(userKey: number): Promise<string> {
  const result = await run(['sandbox', 'login', '--user-key', String(userKey), '--url', sandbox.url, '--json']);
  expect(result.code, result.stderr).toBe(0);
  const body = JSON.parse(result.stdout);
  expect(body.referrer).toBe('sandbox');
  return body.authorizationCode;
}

function storedTokens() {
  return new ConfigStore(cli.configDir).getSection<{ accessToken: string; refreshToken: string }>('default', 'tokens');
}

describe('login flow against the sandbox', () => {
  it('exchanges a code, reads and decrypts the user, refreshes by itself, and fails once the refresh token is gone', async () => {
    // 1-2: a code, the exchange, the user with every personal field decrypted
    const code = await codeFor(1001);
    const exchange = await run(['token', 'exchange', '--code', code, '--referrer', 'SANDBOX']);
    expect(exchange.code, exchange.stderr).toBe(0);
    const first = storedTokens()!;
    expect(first.accessToken).toMatch(/^at_/);
    expect(exchange.stdout).not.toContain(first.accessToken); // masked in the summary

    const me = await run(['me', '--json']);
    expect(me.code, me.stderr).toBe(0);
    const person = personFor(1001);
    expect(JSON.parse(me.stdout)).toMatchObject({
      userKey: 1001,
      name: person.name,
      phone: person.phone,
      birthday: person.birthday,
      ci: person.ci,
      gender: person.gender,
      nationality: person.nationality,
      email: person.email,
      di: null,
    });

    // 3: the same code again
    const again = await run(['token', 'exchange', '--code', code, '--referrer', 'sandbox']);
    expect(again.code).toBe(4);
    expect(again.stderr).toContain('call appLogin() again');

    // 4: two hours on, `me` refreshes by itself and stores the new pair
    expect((await run(['sandbox', 'advance', '2h', '--url', sandbox.url])).code).toBe(0);
    const refreshed = await run(['me', '--json']);
    expect(refreshed.code, refreshed.stderr).toBe(0);
    expect(refreshed.stderr).toContain('refreshed');
    expect(JSON.parse(refreshed.stdout).userKey).toBe(1001);
    const second = storedTokens()!;
    expect(second.accessToken).not.toBe(first.accessToken);
    expect(second.refreshToken).not.toBe(first.refreshToken);

    // 5: fifteen days on, the refresh token is gone too
    expect((await run(['sandbox', 'advance', '15d', '--url', sandbox.url])).code).toBe(0);
    const expired = await run(['me']);
    expect(expired.code).toBe(4);
    expect(expired.stderr).toContain('log in again');
  });

  it('refreshes on the stored expiry without asking the API first', async () => {
    await run(['token', 'exchange', '--code', await codeFor(5), '--referrer', 'sandbox']);
    const callsBefore = sandbox.stats.partnerCalls;
    const later = new Date(Date.now() + 2 * 3600_000);
    const result = await cli.run(['me', '--json'], { env: sandbox.env, now: later });
    expect(result.code, result.stderr).toBe(0);
    expect(sandbox.stats.partnerCalls - callsBefore).toBe(2); // refresh-token, then login-me
  });

  it('logs out: the connection is removed, the tokens are cleared, and `me` exits 4', async () => {
    await run(['token', 'exchange', '--code', await codeFor(2002), '--referrer', 'sandbox']);
    const token = storedTokens()!.accessToken;
    const logout = await run(['logout']);
    expect(logout.code, logout.stderr).toBe(0);
    expect(storedTokens()).toBeUndefined();
    expect((await run(['me'])).code).toBe(4);
    // the token itself is retired upstream too
    const withOld = await run(['me'], { MINIAPP_ACCESS_TOKEN: token });
    expect(withOld.code).toBe(4);
  });

  it('logs out another user by userKey with the Bearer token', async () => {
    await codeFor(3003);
    await run(['token', 'exchange', '--code', await codeFor(3004), '--referrer', 'sandbox']);
    const result = await run(['logout', '--user-key', '3003', '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ success: true, userKey: 3003 });
    const callsBefore = sandbox.stats.partnerCalls;
    const unknown = await run(['logout', '--user-key', '3003']);
    expect(unknown.code).toBe(4); // our tokens were cleared: no Bearer token any more
    expect(unknown.stderr).toContain('logout --user-key needs an access token as its Bearer token');
    expect(unknown.stderr).toContain('nothing was sent');
    expect(sandbox.stats.partnerCalls).toBe(callsBefore); // never sent without a token
    expect((await run(['logout', '--user-key', 'abc'])).code).toBe(2);
  });

  it('logs out with an expired access token (refreshed first), and clears tokens the API no longer takes', async () => {
    await run(['token', 'exchange', '--code', await codeFor(4004), '--referrer', 'sandbox']);
    expect((await run(['sandbox', 'advance', '2h', '--url', sandbox.url])).code).toBe(0);
    const later = new Date(Date.now() + 2 * 3600_000);
    const logout = await cli.run(['logout'], { env: sandbox.env, now: later });
    expect(logout.code, logout.stderr).toBe(0);
    expect(logout.stderr).toContain('removed the login connection');
    expect(storedTokens()).toBeUndefined();

    // Both tokens past their life: the API takes neither, and they are cleared all the same (exit 4 says the
    // connection could not be removed).
    await run(['token', 'exchange', '--code', await codeFor(4005), '--referrer', 'sandbox']);
    expect((await run(['sandbox', 'advance', '15d', '--url', sandbox.url])).code).toBe(0);
    const stale = await cli.run(['logout'], { env: sandbox.env, now: new Date(Date.now() + 16 * 86_400_000) });
    expect(stale.code).toBe(4);
    expect(stale.stderr).toContain('the tokens stored in profile "default" were cleared anyway');
    expect(storedTokens()).toBeUndefined();
    // The advice works as given, step by step: with the tokens just cleared, `logout --user-key` alone has no Bearer
    // token to send, so logging in again comes first, before either way of removing the connection.
    const hint = stale.stderr.split('\n')[1]!;
    const login = hint.indexOf('`miniapp token exchange --code CODE`');
    expect(login).toBeGreaterThan(-1);
    for (const next of ['`miniapp logout`', '`miniapp logout --user-key N`']) expect(hint.indexOf(next), next).toBeGreaterThan(login);
    const weeksOn = new Date(Date.now() + 16 * 86_400_000);
    const alone = await cli.run(['logout', '--user-key', '4005'], { env: sandbox.env, now: weeksOn });
    expect(alone.code).toBe(4);
    expect(alone.stderr).toContain('logout --user-key needs an access token');
    const exchanged = await cli.run(['token', 'exchange', '--code', await codeFor(4005), '--referrer', 'sandbox'], { env: sandbox.env, now: weeksOn });
    expect(exchanged.code, exchanged.stderr).toBe(0);
    const followed = await cli.run(['logout'], { env: sandbox.env, now: weeksOn });
    expect(followed.code, followed.stderr).toBe(0);
    expect(followed.stderr).toContain('removed the login connection');
  });

  it('logout --local forgets the stored tokens without calling the API', async () => {
    await run(['token', 'exchange', '--code', await codeFor(4006), '--referrer', 'sandbox']);
    const callsBefore = sandbox.stats.partnerCalls;
    const local = await run(['logout', '--local']);
    expect(local.code, local.stderr).toBe(0);
    expect(local.stderr).toContain('forgot the tokens stored in profile "default" (the partner API was not called)');
    expect(storedTokens()).toBeUndefined();
    expect(sandbox.stats.partnerCalls).toBe(callsBefore);
    const again = await run(['logout', '--local', '--json']);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ success: true, local: true, cleared: false });
    expect((await run(['logout', '--local', '--user-key', '1'])).code).toBe(2);
  });

  it('shows stored tokens masked, in full with --reveal or --json, and refreshes on request', async () => {
    await run(['token', 'exchange', '--code', await codeFor(9), '--referrer', 'sandbox']);
    const { accessToken, refreshToken } = storedTokens()!;
    const show = await run(['token', 'show']);
    expect(show.stdout).toContain('accessTokenExpiresAt');
    expect(show.stdout).toMatch(/59m \d+s left|1h left/);
    expect(show.stdout).not.toContain(accessToken);
    expect((await run(['token', 'show', '--reveal'])).stdout).toContain(accessToken);
    expect(JSON.parse((await run(['token', 'show', '--json'])).stdout)).toMatchObject({ accessToken, refreshToken, accessTokenExpired: false });

    const refresh = await run(['token', 'refresh', '--json']);
    expect(refresh.code, refresh.stderr).toBe(0);
    expect(JSON.parse(refresh.stdout)).toMatchObject({ tokenType: 'Bearer', scope: expect.stringContaining('user_ci') });
    expect(storedTokens()!.refreshToken).not.toBe(refreshToken);
    const stale = await run(['token', 'refresh', '--refresh-token', refreshToken]);
    expect(stale.code).toBe(4);
  });

  it('prints the encrypted payload with --raw and needs no key for it', async () => {
    await run(['token', 'exchange', '--code', await codeFor(11), '--referrer', 'sandbox']);
    const raw = await run(['me', '--raw', '--json'], { MINIAPP_DECRYPT_KEY: '' });
    expect(raw.code, raw.stderr).toBe(0);
    const body = JSON.parse(raw.stdout);
    expect(body.userKey).toBe(11);
    expect(body.name).not.toBe(personFor(11).name);
  });

  it('writes with --raw alone the JSON that decrypt reads back (me --raw > response.json; decrypt response.json)', async () => {
    await run(['token', 'exchange', '--code', await codeFor(13), '--referrer', 'sandbox']);
    const raw = await run(['me', '--raw'], { MINIAPP_DECRYPT_KEY: '' });
    expect(raw.code, raw.stderr).toBe(0);
    expect(JSON.parse(raw.stdout).userKey).toBe(13);
    const decrypted = await cli.run(['decrypt', '--json'], { env: sandbox.env, stdin: raw.stdout });
    expect(decrypted.code, decrypted.stderr).toBe(0);
    expect(JSON.parse(decrypted.stdout).name).toBe(personFor(13).name);
  });

  it('exits 3 naming the fields when the profile has the wrong AAD', async () => {
    await run(['token', 'exchange', '--code', await codeFor(12), '--referrer', 'sandbox']);
    const result = await run(['me'], { MINIAPP_DECRYPT_AAD: 'ffff' });
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('name, phone, birthday');
    expect(result.stderr).not.toContain(KEY_HEX);
  });

  it('explains what is missing before calling anything', async () => {
    expect((await cli.run(['token', 'exchange', '--code', 'x'])).stderr).toContain('base-url is not set');
    expect((await run(['token', 'exchange'])).code).toBe(2);
    const referrer = await run(['token', 'exchange', '--code', 'x', '--referrer', 'prod']);
    expect(referrer.code).toBe(2);
    expect(referrer.stderr).toContain('unknown referrer "prod"');
    const me = await run(['me']);
    expect(me.code).toBe(4);
    expect(me.stderr).toContain('no tokens are stored');
    expect((await run(['token', 'show'])).code).toBe(4);
  });
});

describe('faults', () => {
  it('gives exit 5 after the time-out when the sandbox answers too slowly', async () => {
    const slow = await startSandbox({ delayMs: 2_000 });
    try {
      const result = await cli.run(['token', 'exchange', '--code', 'whatever', '--referrer', 'sandbox', '--timeout', '200ms'], { env: slow.env });
      expect(result.code).toBe(5);
      expect(result.stderr).toContain('did not answer within 0.2 s');
    } finally {
      await slow.close();
    }
  });

  it("times out from the Agent's own timers for time-outs of a second and more", async () => {
    const slow = await startSandbox({ delayMs: 3_000 });
    try {
      // Had the time-out not fired, the sandbox's late answer (invalid_grant) would exit 4.
      const result = await cli.run(['token', 'exchange', '--code', 'whatever', '--referrer', 'sandbox', '--timeout', '1s'], { env: slow.env });
      expect(result.code).toBe(5);
      expect(result.stderr).toContain('did not answer within 1 s');
    } finally {
      await slow.close();
    }
  });

  it('gives exit 5 when nothing listens', async () => {
    const url = sandbox.url;
    await sandbox.close();
    const result = await cli.run(['me'], { env: { ...sandbox.env, MINIAPP_BASE_URL: url, MINIAPP_ACCESS_TOKEN: 'x' } });
    expect(result.code).toBe(5);
    expect(result.stderr).toContain('ECONNREFUSED');
    sandbox = await startSandbox();
  });

  it.each(['bare', 'top-level'] as const)('understands the %s failure shape through the real client', async (errorShape) => {
    const other = await startSandbox({ errorShape });
    try {
      const env = { ...other.env };
      const code = JSON.parse((await cli.run(['sandbox', 'login', '--user-key', '1', '--url', other.url, '--json'], { env })).stdout).authorizationCode;
      expect((await cli.run(['token', 'exchange', '--code', code, '--referrer', 'sandbox'], { env })).code).toBe(0);
      const reuse = await cli.run(['token', 'exchange', '--code', code, '--referrer', 'sandbox'], { env });
      expect(reuse.code).toBe(4);
      expect(reuse.stderr).toContain('call appLogin() again');
    } finally {
      await other.close();
    }
  });
});
