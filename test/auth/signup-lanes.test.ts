/**
 * Sign-ups cannot starve logins (src/auth/passwords.ts's sign-up lane),
 * through a real serve: a flood of sign-ups over HTTP and over gRPC, and a
 * login sent while they wait for their hashes. What each scrypt derivation
 * waited for is what passwords.ts publishes as it starts (no clock): the
 * login's starts without waiting for a place, while sign-ups still wait,
 * and the sign-ups past the bounded queue are refused at once, 503
 * SIGNUPS_BUSY with Retry-After / UNAVAILABLE with a RetryInfo.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { postFrom } from '../helpers/post-from.js';
import { UserClients, unary } from '../helpers/user-client.js';
import { scryptChannel, SIGNUP_QUEUE } from '../../src/auth/passwords.js';

interface Derivation {
  lane: string;
  waited: boolean;
  waiting: { now: number; signup: number; bulk: number };
}

/** Three times the sign-up lane's queue (SIGNUP_QUEUE, 32). */
const FLOOD = 96;
const PASSWORD = 'correct-horse-1';
let events: Derivation[] = [];
const record = (message: unknown) => void events.push(message as Derivation);
let serve: UserClients;
let running: RunningServe;

beforeAll(async () => {
  // Hashes at serve's default cost (about 30 ms each): a flood of them keeps sign-ups waiting for a while.
  running = await startTestServe({ hashCost: 14, grpc: { host: '127.0.0.1', port: 0 }, shutdownDeadlineMs: 500 });
  serve = new UserClients(running);
  const created = await request(`${running.url}/api/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${running.adminToken}` },
    body: JSON.stringify({ username: 'alice', email: 'alice@example.com', password: PASSWORD }),
  });
  expect(created.statusCode).toBe(201);
  await created.body.dump();
  // The first login also makes the decoy hash of unknown accounts (users/service.ts): made now, not in the flood.
  expect((await postFrom(`${running.url}/api/v2/auth/login`, { email: 'alice@example.com', password: PASSWORD })).status).toBe(200);
});
afterAll(async () => serve?.close());
afterEach(() => {
  scryptChannel.unsubscribe(record);
  events = [];
});

/** Resolves once three derivations of the flood have started: the rest of it is on its way or waiting. */
function queued(): Promise<void> {
  return new Promise((resolve) => {
    let started = 0;
    const look = () => {
      if (++started < 3) return;
      scryptChannel.unsubscribe(look);
      resolve();
    };
    scryptChannel.subscribe(look);
  });
}

/** The login's derivation, and what started after it. */
function loginWhileFlooded(): { login: Derivation; after: Derivation[] } {
  const index = events.findIndex((event) => event.lane === 'now');
  expect(index, 'the login was hashed').toBeGreaterThanOrEqual(0);
  expect(
    events.filter((event) => event.lane === 'now'),
    'one derivation for the login',
  ).toHaveLength(1);
  return { login: events[index]!, after: events.slice(index + 1) };
}

describe('sign-ups flooding serve', () => {
  it('over HTTP: the login starts at once ahead of the sign-ups that wait, and those past the queue get 503 SIGNUPS_BUSY', async () => {
    scryptChannel.subscribe(record);
    const flooded = queued();
    const signups = Array.from({ length: FLOOD }, (_, i) =>
      postFrom(`${running.url}/api/v2/users`, { username: `http${i}`, email: `http${i}@example.com`, password: PASSWORD }),
    );
    await flooded;
    const login = await postFrom(`${running.url}/api/v2/auth/login`, { email: 'alice@example.com', password: PASSWORD });
    const answers = await Promise.all(signups);
    expect(login.status).toBe(200);

    const { login: derivation, after } = loginWhileFlooded();
    expect(derivation.waited).toBe(false);
    // Sign-ups still waited as it started: it went ahead of them, it did not wait for them.
    expect(derivation.waiting.signup).toBeGreaterThan(0);
    expect(after.some((event) => event.lane === 'signup')).toBe(true);

    const busy = answers.filter((answer) => answer.status === 503);
    expect(answers.every((answer) => answer.status === 201 || answer.status === 503)).toBe(true);
    expect(busy.length).toBeGreaterThan(0);
    expect(busy[0]!.retryAfter).toBe('1');
    expect(busy[0]!.body).toEqual({
      error: 'Service Unavailable',
      code: 'SIGNUPS_BUSY',
      detail: `${SIGNUP_QUEUE} sign-ups are waiting for their password to be hashed already: try again in 1 s`,
    });
    // No sign-up ever waited beyond the queue's bound.
    expect(Math.max(...events.map((event) => event.waiting.signup))).toBeLessThanOrEqual(SIGNUP_QUEUE);
  });

  it('over gRPC: CreateUser past the queue ends UNAVAILABLE with a RetryInfo, and a login still starts at once', async () => {
    scryptChannel.subscribe(record);
    const c = serve.client();
    const flooded = queued();
    const calls = Array.from({ length: FLOOD }, (_, i) =>
      unary(c, 'CreateUser', { username: `grpc${i}`, email: `grpc${i}@example.com`, password: PASSWORD, full_name: '' }).then(
        () => 'OK',
        (error: grpc.ServiceError) => error,
      ),
    );
    await flooded;
    const login = await postFrom(`${running.url}/api/v1/auth/login`, { username: 'alice', password: PASSWORD });
    const outcomes = await Promise.all(calls);
    expect(login.status).toBe(200);
    expect(loginWhileFlooded().login.waited).toBe(false);

    const refused = outcomes.filter((outcome): outcome is grpc.ServiceError => outcome !== 'OK');
    expect(refused.length).toBeGreaterThan(0);
    for (const error of refused) expect(grpc.status[error.code], error.details).toBe('UNAVAILABLE');
    expect(refused[0]!.details).toBe(`${SIGNUP_QUEUE} sign-ups are waiting for their password to be hashed already: try again in 1 s`);
    expect(refused[0]!.metadata.get('grpc-status-details-bin')).toHaveLength(1);
  });
});
