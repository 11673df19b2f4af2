/**
 * The sign-up limit (src/auth/signup-limits.ts) through serve's HTTP and
 * gRPC ports on both backends: 10 sign-ups per address an hour over POST
 * /users and CreateUser together, then 429 TOO_MANY_SIGNUPS with
 * Retry-After / RESOURCE_EXHAUSTED with a google.rpc.RetryInfo; another
 * address unaffected; the admin token not counted; the window over, a new
 * one, and the rows of windows that are over deleted. Kept in the store:
 * shared by two instances on one PostgreSQL, and kept over a restart on
 * SQLite.
 *
 * serve runs on a clock the test sets; the second client address is
 * 127.0.0.2 (all of 127/8 is the loopback).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import { fromBinary, type DescMessage } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { FROM_B, postFrom, testClock } from '../helpers/post-from.js';
import { BACKENDS, createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { UserClients, unary, type AnyClient } from '../helpers/user-client.js';
import { descriptorRegistry } from '../../src/grpc/descriptor-set.js';
import { openStore } from '../../src/store/store.js';
import { DEFAULT_SIGNUP_LIMITS, signupAddressKey } from '../../src/auth/signup-limits.js';

const HOUR = 3_600_000;
let made = 0;
const person = () => {
  made++;
  return { username: `person${made}`, email: `person${made}@example.com`, password: 'correct-horse-1' };
};

const signUp = (running: RunningServe, from?: string, user = person()) => postFrom(`${running.url}/api/v2/users`, user, from);

async function signUpAsAdmin(running: RunningServe): Promise<number> {
  const answer = await request(`${running.url}/api/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${running.adminToken}` },
    body: JSON.stringify(person()),
  });
  await answer.body.dump();
  return answer.statusCode;
}

/** The google.rpc.RetryInfo delay a refused call carries, in ms. */
function retryDelayMs(error: grpc.ServiceError): number {
  const registry = descriptorRegistry();
  const [bytes] = error.metadata.get('grpc-status-details-bin');
  const status = fromBinary(registry.getMessage('google.rpc.Status') as DescMessage, bytes as Buffer) as any;
  expect(status.code).toBe(error.code);
  const info = anyUnpack(status.details[0], registry.getMessage('google.rpc.RetryInfo') as DescMessage) as any;
  return Number(info.retryDelay.seconds) * 1000 + info.retryDelay.nanos / 1e6;
}

async function createUser(c: AnyClient, metadata?: grpc.Metadata): Promise<string | grpc.ServiceError> {
  try {
    await unary(c, 'CreateUser', { ...person(), full_name: '' }, metadata);
    return 'OK';
  } catch (error) {
    return error as grpc.ServiceError;
  }
}

describe.each(BACKENDS)('sign-up limit on %s', (backend) => {
  const clock = testClock();
  let serve: UserClients;
  let running: RunningServe;
  beforeAll(async () => {
    running = await startTestServe(
      { now: clock.now, signupLimits: DEFAULT_SIGNUP_LIMITS, grpc: { host: '127.0.0.1', port: 0 }, shutdownDeadlineMs: 500 },
      backend,
    );
    serve = new UserClients(running);
  });
  afterAll(async () => serve?.close());

  it('lets 10 sign-ups an hour from an address through POST /users and CreateUser together, then 429 TOO_MANY_SIGNUPS and RESOURCE_EXHAUSTED', async () => {
    const c = serve.client();
    const first = person();
    const statuses = [(await signUp(running, undefined, first)).status];
    for (let i = 0; i < 5; i++) statuses.push((await signUp(running)).status);
    expect(statuses).toEqual(Array(6).fill(201));
    // gRPC CreateUser without a token counts against the same address (127.0.0.1).
    for (let i = 0; i < 4; i++) expect(await createUser(c)).toBe('OK');

    clock.advance(10 * 60_000);
    const refused = await signUp(running);
    expect(refused.status).toBe(429);
    expect(refused.retryAfter).toBe(String(50 * 60));
    expect(refused.body).toEqual({
      error: 'Too Many Requests',
      code: 'TOO_MANY_SIGNUPS',
      detail: 'more than 10 sign-ups from this address in an hour: try again in 3000 s',
    });
    const overGrpc = await createUser(c);
    expect(typeof overGrpc).not.toBe('string');
    expect(grpc.status[(overGrpc as grpc.ServiceError).code]).toBe('RESOURCE_EXHAUSTED');
    expect((overGrpc as grpc.ServiceError).details).toBe('more than 10 sign-ups from this address in an hour: try again in 3000 s');
    expect(retryDelayMs(overGrpc as grpc.ServiceError)).toBe(3000 * 1000);
    // A user token is no admin: its CreateUser is a sign-up like any other.
    const token = await request(`${running.url}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: first.username, password: first.password }),
    });
    const { access_token: userToken } = (await token.body.json()) as { access_token: string };
    expect(grpc.status[((await createUser(c, serve.auth(userToken))) as grpc.ServiceError).code]).toBe('RESOURCE_EXHAUSTED');

    // Another address signs up as before; the admin token makes accounts however many were signed up.
    expect((await signUp(running, FROM_B)).status).toBe(201);
    for (let i = 0; i < 3; i++) expect(await signUpAsAdmin(running)).toBe(201);
    expect(await createUser(c, serve.auth())).toBe('OK');

    // The window (from the address's first sign-up) over, the address starts again; the rows of windows over go.
    clock.advance(50 * 60_000);
    expect((await signUp(running)).status).toBe(201);
    expect(await createUser(c)).toBe('OK');
  });

  it('documents 429 TOO_MANY_SIGNUPS and 503 SIGNUPS_BUSY with Retry-After on POST /users of every mount', async () => {
    for (const mount of ['/api/v1', '/api/v2', '/api']) {
      const spec = (await (await request(`${running.url}${mount}/openapi.json`)).body.json()) as any;
      const responses = spec.paths['/users'].post.responses;
      expect(responses['429'].description, mount).toMatch(/TOO_MANY_SIGNUPS/);
      expect(responses['429'].headers['Retry-After'], mount).toBeDefined();
      expect(responses['503'].description, mount).toMatch(/SIGNUPS_BUSY/);
      expect(responses['503'].headers['Retry-After'], mount).toBeDefined();
    }
  });
});

describe('sign-up limit kept in the store', () => {
  const clock = testClock();
  let database: TestDatabase | undefined;
  let dir: string | undefined;
  const running: RunningServe[] = [];
  afterEach(async () => {
    for (const serve of running.splice(0)) await serve.close();
    await database?.drop();
    database = undefined;
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('is one count for two instances on one PostgreSQL, and its rows of windows that are over are deleted', async () => {
    database = await createTestDatabase();
    const location = { kind: 'postgres', url: database.url, poolSize: 5 } as const;
    const options = { now: clock.now, signupLimits: { perAddress: 4, windowMs: HOUR }, store: location };
    const [a, b] = [await startTestServe(options, 'postgres'), await startTestServe(options, 'postgres')];
    running.push(a, b);
    // Two from each instance, at once: all counted, and no more.
    const answers = await Promise.all([signUp(a), signUp(b), signUp(a), signUp(b), signUp(a), signUp(b)]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([201, 201, 201, 201, 429, 429]);
    expect((await signUp(b)).status).toBe(429);
    expect((await signUp(a, FROM_B)).status).toBe(201);

    const store = await openStore(location);
    try {
      expect(
        (await store.sql.all<{ address: string; used: number }>('SELECT address, used FROM signup_counts ORDER BY address')).map((row) => [
          row.address,
          Number(row.used),
        ]),
      ).toEqual([
        ['127.0.0.1', 7],
        ['127.0.0.2', 1],
      ]);
      clock.advance(HOUR);
      // The next sign-up, from either address, on either instance, deletes the rows of windows that are over.
      expect((await signUp(b, FROM_B)).status).toBe(201);
      expect(await store.sql.all('SELECT address, used FROM signup_counts')).toEqual([{ address: '127.0.0.2', used: 1 }]);
      expect((await signUp(a)).status).toBe(201);
    } finally {
      await store.close();
    }
  });

  it('holds over a restart on SQLite', async () => {
    dir = mkdtempSync(join(tmpdir(), 'miniapp-signups-'));
    const options = { now: clock.now, signupLimits: { perAddress: 3, windowMs: HOUR }, store: { kind: 'sqlite', dataDir: dir } } as const;
    const first = await startTestServe(options);
    for (let i = 0; i < 3; i++) expect((await signUp(first)).status).toBe(201);
    await first.close();
    const second = await startTestServe(options);
    running.push(second);
    const refused = await signUp(second);
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('TOO_MANY_SIGNUPS');
  });
});

describe('the address a sign-up counts under', () => {
  it('is an IPv4 address as it is, and an IPv6 address by its /64', () => {
    expect(signupAddressKey('203.0.113.7')).toBe('203.0.113.7');
    expect(signupAddressKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(signupAddressKey('2001:db8:0:42:1:2:3:4')).toBe('2001:db8:0:42::/64');
    expect(signupAddressKey('2001:0db8:0000:0042:ffff::1')).toBe('2001:db8:0:42::/64');
    expect(signupAddressKey('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(signupAddressKey('::1')).toBe('0:0:0:0::/64');
    expect(signupAddressKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
  });
});
