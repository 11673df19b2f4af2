/**
 * Limits on guessing at the relay's token endpoints (POST /api/auth/token
 * and /refresh, src/relay/routes.ts): codes and refresh tokens the partner
 * API refuses are counted per client address in the store (login_failures,
 * a key space apart from the blog's logins), with the login limits'
 * doubling back-off, on both backends; an outage of the partner API is not
 * counted. serve runs on a clock the test moves, in front of a real
 * sandbox; the second client address is 127.0.0.2.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from 'node:net';
import type { RunningServe } from '../../src/server/serve.js';
import { DEFAULT_LOGIN_LIMITS } from '../../src/auth/login-limits.js';
import { startTestServe } from '../helpers/serve.js';
import { FROM_B, postFrom, testClock } from '../helpers/post-from.js';
import { startSandbox, type RunningSandbox } from '../helpers/partner-sandbox.js';
import { BACKENDS } from '../helpers/postgres.js';
import { AAD_HEX, KEY_HEX } from '../helpers/vectors.js';

const PREFIX = '/api-partner/v1/miniapp/user/oauth2';
/** Three refused grants per address are free; the fourth locks. */
const LIMITS = { ...DEFAULT_LOGIN_LIMITS, perAddress: 3 };

describe.each(BACKENDS)('relay grant limits on %s', (backend) => {
  const clock = testClock();
  let sandbox: RunningSandbox;
  let running: RunningServe;
  beforeAll(async () => {
    sandbox = await startSandbox();
    running = await startTestServe(
      {
        now: clock.now,
        upstream: { baseUrl: sandbox.url, pathPrefix: PREFIX, tls: {} },
        decrypt: { key: KEY_HEX, aad: AAD_HEX },
        loginLimits: LIMITS,
      },
      backend,
    );
  });
  afterAll(async () => {
    await running?.close();
    await sandbox?.close();
  });

  const exchange = (authorizationCode: string, from?: string) => postFrom(`${running.url}/api/auth/token`, { authorizationCode, referrer: 'sandbox' }, from);
  const refresh = (refreshToken: string, from?: string) => postFrom(`${running.url}/api/auth/refresh`, { refreshToken }, from);

  it('locks an address that sends refused codes and refresh tokens, with 429, Retry-After and the relay error body', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 2; i++) statuses.push((await exchange(`guess-${i}`)).status);
    statuses.push((await refresh('rt-guess')).status, (await exchange('guess-3')).status);
    // Three free refusals; the fourth is asked of the partner API too, and locks the address.
    expect(statuses).toEqual([400, 400, 401, 400]);
    const valid = sandbox.state.login(1001).authorizationCode;
    const locked = await exchange(valid);
    expect(locked.status).toBe(429);
    expect(locked.retryAfter).toBe('1');
    const detail = 'too many refused authorization codes or refresh tokens from this address: try again in 1 s';
    expect(locked.body).toEqual({ error: detail, detail, code: 'TOO_MANY_ATTEMPTS' });
    expect((await refresh('rt-another')).status).toBe(429);

    // Another address is not locked: the valid code (not used while the lock held) works from there.
    const tokens = await exchange(valid, FROM_B);
    expect(tokens.status).toBe(200);
    expect((await refresh(String(tokens.body.refreshToken), FROM_B)).status).toBe(200);

    // After the lock, the next refusal doubles it.
    clock.advance(1_000);
    expect((await exchange('guess-after')).status).toBe(400);
    expect((await exchange(sandbox.state.login(1002).authorizationCode)).retryAfter).toBe('2');
    clock.advance(2_000);
    // Once the lock is over, a valid code is exchanged.
    expect((await exchange(sandbox.state.login(1003).authorizationCode)).status).toBe(200);
    clock.advance(60 * 60_000);
  });

  it('never counts a grant the partner API accepts: an address that exchanges and refreshes often is not locked', async () => {
    // Ten times the free allowance of three, each accepted: none may count towards a lock.
    for (let i = 0; i < 30; i++) {
      const tokens = await exchange(sandbox.state.login(2000 + i).authorizationCode);
      expect(tokens.status).toBe(200);
      expect((await refresh(String(tokens.body.refreshToken))).status).toBe(200);
    }
    // The allowance is whole: three refusals are still free, the fourth locks.
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await exchange(`after-good-${i}`)).status);
    expect(statuses).toEqual([400, 400, 400, 400]);
    expect((await exchange('after-good-locked')).status).toBe(429);
    clock.advance(60 * 60_000);
  });

  it("counts the relay apart from the blog's logins", async () => {
    for (let i = 0; i < 4; i++) await exchange(`apart-${i}`);
    expect((await exchange('apart-locked')).status).toBe(429);
    const login = await postFrom(`${running.url}/api/v2/auth/login`, { email: 'nobody@example.com', password: 'guess' });
    expect(login.status).toBe(401);
    clock.advance(60 * 60_000);
  });
});

describe('relay grant limits when the partner API is down', () => {
  let running: RunningServe;
  beforeAll(async () => {
    // A port that refuses connections: taken, then freed.
    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    running = await startTestServe({
      upstream: { baseUrl: `http://127.0.0.1:${port}`, pathPrefix: PREFIX, tls: {} },
      decrypt: { key: KEY_HEX, aad: AAD_HEX },
      loginLimits: LIMITS,
    });
  });
  afterAll(async () => running?.close());

  it('does not count calls the partner API could not answer', async () => {
    const statuses = new Set<number>();
    for (let i = 0; i < 10; i++) {
      const answer = await postFrom(
        `${running.url}/api/auth/${i % 2 ? 'refresh' : 'token'}`,
        i % 2 ? { refreshToken: 'rt' } : { authorizationCode: 'code', referrer: 'sandbox' },
      );
      statuses.add(answer.status);
      expect(answer.body.code).toBe('UPSTREAM_UNREACHABLE');
    }
    expect([...statuses]).toEqual([500]);
  });
});
