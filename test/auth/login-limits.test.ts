/**
 * Limits on guessing passwords at the blog's login (src/auth/login-limits.ts),
 * through serve's HTTP port on both backends: per account and address, per
 * address, back-off that doubles, 429 with Retry-After, a right password
 * from another address unaffected, and one count over several instances.
 *
 * serve runs on a clock the test sets, so each lock lasts exactly as long as
 * the test says; a second client address is 127.0.0.2 (all of 127/8 is the
 * loopback).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { FROM_B, postFrom, testClock } from '../helpers/post-from.js';
import { BACKENDS, createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

const ALICE = { username: 'alice', email: 'alice@example.com', password: 'alice-password-1' };

async function signUp(running: RunningServe, user = ALICE): Promise<void> {
  const created = await request(`${running.url}/api/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(user),
  });
  expect(created.statusCode, await created.body.text()).toBe(201);
}

function login(running: RunningServe, email: string, password: string, from?: string) {
  return postFrom(`${running.url}/api/v2/auth/login`, { email, password }, from);
}

describe.each(BACKENDS)('login limits on %s', (backend) => {
  const clock = testClock();
  let running: RunningServe;
  beforeAll(async () => {
    running = await startTestServe({ now: clock.now }, backend);
    await signUp(running);
  });
  afterAll(async () => running?.close());

  it('answers the first wrong passwords normally, then 429 with Retry-After, and lets the right password in from another address', async () => {
    const statuses: number[] = [];
    let locked: Awaited<ReturnType<typeof login>> | undefined;
    for (let i = 0; i < 200; i++) {
      const answer = await login(running, ALICE.email, `wrong-${i}`);
      statuses.push(answer.status);
      if (answer.status === 429) locked ??= answer;
    }
    // Five free failures; the sixth is checked and locks; none after it is checked while the lock holds.
    expect(statuses.slice(0, 6)).toEqual(Array(6).fill(401));
    expect(statuses.slice(6)).toEqual(Array(194).fill(429));
    expect(locked!.retryAfter).toBe('1');
    expect(locked!.body).toEqual({
      error: 'Too Many Requests',
      code: 'TOO_MANY_ATTEMPTS',
      detail: 'too many failed logins for this email from this address: try again in 1 s',
    });

    // The right password from another address logs in; the locked address stays locked, even with it.
    expect((await login(running, ALICE.email, ALICE.password, FROM_B)).status).toBe(200);
    expect((await login(running, ALICE.email, ALICE.password)).status).toBe(429);

    // Once the lock is over, each further wrong password doubles it: 2 s, then 4 s.
    clock.advance(1_000);
    expect((await login(running, ALICE.email, 'wrong-again')).status).toBe(401);
    expect((await login(running, ALICE.email, ALICE.password)).retryAfter).toBe('2');
    clock.advance(2_000);
    expect((await login(running, ALICE.email, 'wrong-once-more')).status).toBe(401);
    expect((await login(running, ALICE.email, ALICE.password)).retryAfter).toBe('4');

    // After the lock, the right password logs in and starts the count again.
    clock.advance(4_000);
    expect((await login(running, ALICE.email, ALICE.password)).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await login(running, ALICE.email, `wrong-after-${i}`)).status).toBe(401);
  });

  it('counts guesses sent all at once as it counts them one by one: no more are checked than the limit lets through', async () => {
    await signUp(running, { username: 'bob', email: 'bob@example.com', password: 'bob-password-1' });
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => login(running, 'bob@example.com', `parallel-${i}`)));
    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses).toEqual([...Array(6).fill(401), ...Array(6).fill(429)]);
    // The right password from this address waits for the lock like any other attempt; it ends, and the count with it.
    expect((await login(running, 'bob@example.com', 'bob-password-1')).status).toBe(429);
    clock.advance(1_000);
    expect((await login(running, 'bob@example.com', 'bob-password-1')).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await login(running, 'bob@example.com', `again-${i}`)).status).toBe(401);
    clock.advance(60 * 60_000);
  });

  it('locks an address that guesses across many accounts, known or not, and counts the versions of the API together', async () => {
    // From 127.0.0.2, whose count of the test before is one right password (nothing counted against it).
    const statuses: number[] = [];
    for (let i = 0; i < 50; i++) statuses.push((await login(running, `nobody-${i}@example.com`, 'guess', FROM_B)).status);
    expect(statuses).toEqual(Array(50).fill(401));
    // The 51st failure of the address locks it, for every account: Alice's right password included.
    expect((await postFrom(`${running.url}/api/v1/auth/login`, { username: 'nobody', password: 'guess' }, FROM_B)).status).toBe(401);
    const after = await login(running, ALICE.email, ALICE.password, FROM_B);
    expect(after.status).toBe(429);
    expect(after.body.detail).toBe('too many failed logins for this email from this address: try again in 1 s');
  });

  it('counts one account once, whether it is named by username (v1) or by e-mail (v2)', async () => {
    clock.advance(60 * 60_000);
    const carol = { username: 'carol', email: 'carol@example.com', password: 'carol-password-1' };
    await signUp(running, carol);
    const byUsername = (password: string) => postFrom(`${running.url}/api/v1/auth/login`, { username: carol.username, password });
    // Locked through v2 by e-mail: v1 by username is the same account at the same address, locked with it.
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await login(running, carol.email, `wrong-${i}`)).status);
    expect(statuses).toEqual(Array(6).fill(401));
    const locked = await byUsername('wrong-v1');
    expect(locked.status).toBe(429);
    expect(locked.body.detail).toBe('too many failed logins for this username from this address: try again in 1 s');
    expect((await byUsername(carol.password)).status).toBe(429);
    // And the other way round, in any case: five wrong by username, the sixth by e-mail locks both.
    clock.advance(60 * 60_000);
    expect((await byUsername(carol.password)).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await byUsername(`wrong-again-${i}`)).status).toBe(401);
    expect((await login(running, 'Carol@Example.com', 'wrong-by-email')).status).toBe(401);
    expect((await byUsername(carol.password)).status).toBe(429);
    expect((await login(running, carol.email, carol.password)).status).toBe(429);
    // A login that names no account is counted by its text: six wrong for a stranger's name lock only that name.
    clock.advance(60 * 60_000);
    for (let i = 0; i < 6; i++) expect((await login(running, 'stranger@example.com', `guess-${i}`)).status).toBe(401);
    expect((await login(running, 'stranger@example.com', 'guess')).status).toBe(429);
    expect((await login(running, carol.email, carol.password)).status).toBe(200);
    clock.advance(60 * 60_000);
  });

  it("documents 429 and its Retry-After on every mount's login", async () => {
    for (const mount of ['/api/v1', '/api/v2', '/api']) {
      const document = (await (await request(`${running.url}${mount}/openapi.json`)).body.json()) as any;
      const answer = document.paths['/auth/login'].post.responses['429'];
      expect(answer.description, mount).toMatch(/TOO_MANY_ATTEMPTS/);
      expect(answer.headers['Retry-After'], mount).toMatchObject({ schema: { type: 'integer' }, description: expect.stringMatching(/lock/) });
    }
  });
});

describe('login limits over two instances on one PostgreSQL database', () => {
  const clock = testClock();
  let database: TestDatabase;
  const instances: RunningServe[] = [];
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true });
    for (let i = 0; i < 2; i++) instances.push(await startTestServe({ now: clock.now, store: { kind: 'postgres', url: database.url, poolSize: 3 } }));
    await signUp(instances[0]!);
  });
  afterEach(() => clock.advance(60 * 60_000));
  afterAll(async () => {
    for (const instance of instances) await instance.close();
    await database?.drop();
  });

  it('counts wrong passwords sent to either instance once', async () => {
    const [a, b] = instances as [RunningServe, RunningServe];
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await login(i % 2 === 0 ? a : b, ALICE.email, `wrong-${i}`)).status);
    expect(statuses).toEqual(Array(6).fill(401));
    expect((await login(a, ALICE.email, ALICE.password)).status).toBe(429);
    expect((await login(b, ALICE.email, ALICE.password)).status).toBe(429);
    // Sent to both at once, the failures are all counted: none lost to a race between the instances.
    clock.advance(60 * 60_000);
    const together = await Promise.all(Array.from({ length: 6 }, (_, i) => login(i % 2 === 0 ? a : b, ALICE.email, `together-${i}`)));
    expect(together.map((t) => t.status)).toEqual(Array(6).fill(401));
    expect((await login(b, ALICE.email, ALICE.password)).status).toBe(429);
  });
});
