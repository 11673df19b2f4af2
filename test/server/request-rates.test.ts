/**
 * Request rates per token or address (src/auth/request-rates.ts) through
 * serve's real ports: the HTTP APIs answer 429 with Retry-After, the
 * RateLimit headers and the usual error body; the gRPC services answer
 * RESOURCE_EXHAUSTED with a google.rpc.RetryInfo in grpc-status-details-bin,
 * decoded here as a grpc-js client would; health, metrics, docs, gRPC
 * health and reflection are never limited; a token serve does not know
 * counts against its address; a stream counts once, and each SyncUsers
 * message once more; and the token never shows in an answer or the log.
 *
 * serve runs on a clock the test moves (2 requests a second, bursts of 3),
 * so each bucket holds exactly what the test says. The buckets are in
 * memory, not in the store: one backend is enough.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import { fromBinary, type DescMessage } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { collect, newUser, unary, UserClients, type AnyClient } from '../helpers/user-client.js';
import { descriptorRegistry } from '../../src/grpc/descriptor-set.js';
import { Capture } from '../helpers/cli.js';
import { RequestRates } from '../../src/auth/request-rates.js';
import { tokenHash } from '../../src/auth/tokens.js';

/** A clock the test moves. */
function testClock() {
  let now = Date.parse('2026-11-25T12:00:00.000Z');
  return {
    now: () => new Date(now),
    advance: (ms: number) => {
      now += ms;
    },
  };
}

const clock = testClock();
const logs = new Capture();
let running: RunningServe;
let clients: UserClients;
let c: AnyClient;

beforeAll(async () => {
  running = await startTestServe({
    now: clock.now,
    grpc: { host: '127.0.0.1', port: 0 },
    requestRates: { perSecond: 2, burst: 3 },
    logger: { level: 'info', stream: logs },
    shutdownDeadlineMs: 500,
  });
  clients = new UserClients(running);
  c = clients.client();
  // Five users, made without a token (by address), a second apart: each within the address's budget.
  for (let i = 1; i <= 5; i++) {
    await unary(c, 'CreateUser', newUser(i));
    clock.advance(1_000);
  }
});
afterAll(async () => clients?.close());
// Every test starts with full buckets: more than burst / rate seconds later.
beforeEach(() => clock.advance(60_000));

async function get(path: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' | 'POST' = 'GET') {
  const answer = await request(`${running.url}${path}`, { method, headers });
  const text = await answer.body.text();
  const json = String(answer.headers['content-type']).startsWith('application/json');
  return { status: answer.statusCode, headers: answer.headers, body: json && text ? JSON.parse(text) : text };
}

const bearer = () => ({ authorization: `Bearer ${running.adminToken}` });

describe('request rates over HTTP', () => {
  it('lets a burst through with the RateLimit headers, then answers 429 with Retry-After and the error body', async () => {
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const answer = await get('/api/v2/blog/posts');
      expect(answer.status).toBe(200);
      expect(answer.headers).toMatchObject({ 'ratelimit-limit': '3', 'ratelimit-policy': '3;w=2' });
      remaining.push(String(answer.headers['ratelimit-remaining']));
    }
    expect(remaining).toEqual(['2', '1', '0']);
    const refused = await get('/api/v1/blog/posts');
    expect(refused.status).toBe(429);
    expect(refused.headers).toMatchObject({
      'retry-after': '1',
      'ratelimit-remaining': '0',
      'ratelimit-reset': '2',
      'content-type': 'application/json; charset=utf-8',
      'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
    });
    expect(refused.body).toEqual({
      error: 'Too Many Requests',
      code: 'RATE_LIMITED',
      detail: 'more than 2 requests a second (bursts of 3) from this address: try again in 1 s',
    });
    // Half a second refills one request at 2 a second: one goes through, the next does not.
    clock.advance(500);
    expect((await get('/api/v2/blog/posts')).status).toBe(200);
    expect((await get('/api/v2/blog/posts')).status).toBe(429);
  });

  it('limits the relay, the images and HEAD requests (once each), and never /health, /metrics or the docs', async () => {
    expect((await get('/api/auth/refresh', {}, 'POST')).status).toBe(400);
    expect((await get('/uploads/0000', {}, 'HEAD')).headers['ratelimit-remaining']).toBe('1');
    expect((await get('/api/v2/blog/posts', {}, 'HEAD')).headers['ratelimit-remaining']).toBe('0');
    const relay = await get('/api/auth/refresh', {}, 'POST');
    expect(relay.status).toBe(429);
    expect(relay.body.code).toBe('RATE_LIMITED');
    expect((await get('/uploads/0000')).status).toBe(429);
    for (const path of [
      '/health',
      '/health/ready',
      '/metrics',
      '/api/v2/docs/',
      '/api/v1/docs/static/index.css',
      '/api/v2/openapi.json',
      '/api/openapi.json',
    ]) {
      const answer = await get(path);
      expect(answer.status, path).toBe(200);
      expect(answer.headers['ratelimit-limit'], path).toBeUndefined();
    }
  });

  it('documents 429 RATE_LIMITED with Retry-After on every operation of every mount', async () => {
    for (const mount of ['/api/v1', '/api/v2', '/api']) {
      const document = (await get(`${mount}/openapi.json`)).body;
      for (const [path, operations] of Object.entries(document.paths as Record<string, Record<string, any>>)) {
        for (const [method, operation] of Object.entries(operations)) {
          const answer = operation.responses['429'];
          expect(answer?.description, `${mount} ${method} ${path}`).toMatch(/RATE_LIMITED/);
          expect(answer.headers['Retry-After'].schema, `${mount} ${method} ${path}`).toEqual({ type: 'integer' });
        }
      }
    }
  });

  it('counts made-up tokens against their address: a fresh random token per request buys no fresh bucket', async () => {
    const made = () => ({ authorization: `Bearer mat_${randomBytes(32).toString('base64url')}` });
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push((await get('/api/v2/blog/posts', made())).status);
    expect(statuses).toEqual([200, 200, 200, ...Array(17).fill(429)]);
    const refused = await get('/api/v2/blog/posts/1', made());
    expect(refused.body.detail).toBe('more than 2 requests a second (bursts of 3) from this address: try again in 1 s');
    // A protected route, refused when the address has room, is no way around either.
    clock.advance(60_000);
    const limited: boolean[] = [];
    for (let i = 0; i < 5; i++) limited.push((await get('/api/v2/blog/posts', made(), 'POST')).status === 429);
    expect(limited).toEqual([false, false, false, true, true]);
    // A token serve knows (issued here: the admin's, a login's) has its own bucket meanwhile.
    expect((await get('/api/v2/blog/posts', bearer())).status).toBe(200);
    const login = await request(`${running.url}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'user1', password: newUser(1).password }),
    });
    // The login itself comes from the spent address.
    expect(login.statusCode).toBe(429);
    await login.body.dump();
    clock.advance(60_000);
    const loggedIn = (await (
      await request(`${running.url}/api/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'user1', password: newUser(1).password }),
      })
    ).body.json()) as { access_token: string };
    for (let i = 0; i < 3; i++) expect((await get('/api/v2/blog/posts', made())).status).toBe(i < 2 ? 200 : 429);
    for (let i = 0; i < 3; i++) expect((await get('/api/v2/blog/posts', { authorization: `Bearer ${loggedIn.access_token}` })).status).toBe(200);
    expect((await get('/api/v2/blog/posts', { authorization: `Bearer ${loggedIn.access_token}` })).status).toBe(429);
  });

  it('counts a bearer token apart from its address, and never shows the token', async () => {
    for (let i = 0; i < 3; i++) expect((await get('/api/v2/blog/posts')).status).toBe(200);
    expect((await get('/api/v2/blog/posts')).status).toBe(429);
    // The token has its own bucket.
    for (let i = 0; i < 3; i++) expect((await get('/api/v2/blog/posts', bearer())).status).toBe(200);
    const refused = await get('/api/v2/blog/posts/999', bearer());
    expect(refused.status).toBe(429);
    expect(refused.body.detail).toBe('more than 2 requests a second (bursts of 3) from this access token: try again in 1 s');
    // A token serve does not know counts against the address, which is spent.
    expect((await get('/api/v2/blog/posts', { authorization: 'Bearer mat_not-a-token' })).status).toBe(429);
    expect(JSON.stringify(refused)).not.toContain(running.adminToken);
    expect(logs.text).not.toContain(running.adminToken);
  });
});

/** The google.rpc.Status a refused call carries, with its RetryInfo unpacked. */
function statusDetails(error: grpc.ServiceError) {
  const registry = descriptorRegistry();
  const [bytes] = error.metadata.get('grpc-status-details-bin');
  expect(Buffer.isBuffer(bytes), 'grpc-status-details-bin is a binary trailer').toBe(true);
  const status = fromBinary(registry.getMessage('google.rpc.Status') as DescMessage, bytes as Buffer) as any;
  const retryInfo = anyUnpack(status.details[0], registry) as any;
  return { code: status.code, message: status.message, typeUrl: status.details[0].typeUrl, retryInfo };
}

async function refusal(promise: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    await promise;
  } catch (error) {
    return error as grpc.ServiceError;
  }
  throw new Error('the call succeeded');
}

describe('request rates over gRPC', () => {
  it('answers RESOURCE_EXHAUSTED with a google.rpc.RetryInfo once a token is over its rate', async () => {
    for (let i = 0; i < 3; i++) expect((await unary(c, 'GetUser', { user_id: '1' }, clients.auth())).username).toBe('user1');
    const error = await refusal(unary(c, 'GetUser', { user_id: '1' }, clients.auth()));
    expect(error.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(error.details).toBe('more than 2 calls a second (bursts of 3) with this token: retry in 500 ms');
    expect(statusDetails(error)).toEqual({
      code: grpc.status.RESOURCE_EXHAUSTED,
      message: error.details,
      typeUrl: 'type.googleapis.com/google.rpc.RetryInfo',
      retryInfo: expect.objectContaining({ retryDelay: expect.objectContaining({ seconds: 0n, nanos: 500_000_000 }) }),
    });
    expect(error.details).not.toContain(running.adminToken);
  });

  it('counts calls with made-up tokens against their address', async () => {
    const made = () => {
      const metadata = new grpc.Metadata();
      metadata.set('authorization', `Bearer mat_${randomBytes(32).toString('base64url')}`);
      return metadata;
    };
    const codes: grpc.status[] = [];
    for (let i = 0; i < 6; i++) codes.push((await refusal(unary(c, 'GetUser', { user_id: '1' }, made()))).code);
    expect(codes).toEqual([...Array(3).fill(grpc.status.UNAUTHENTICATED), ...Array(3).fill(grpc.status.RESOURCE_EXHAUSTED)]);
    const error = await refusal(unary(c, 'GetUser', { user_id: '1' }, made()));
    expect(error.details).toMatch(/with this address: retry in \d+ ms$/);
    // The admin token is known: its own bucket.
    expect((await unary(c, 'GetUser', { user_id: '1' }, clients.auth())).username).toBe('user1');
  });

  it("shares a token's budget between HTTP and gRPC", async () => {
    for (let i = 0; i < 3; i++) expect((await get('/api/v2/blog/posts', bearer())).status).toBe(200);
    expect((await refusal(unary(c, 'GetUser', { user_id: '1' }, clients.auth()))).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
  });

  it('counts a stream once, at its start, and calls without a token by address', async () => {
    // Three streams of several users each take the whole burst; the fourth call is refused.
    for (let i = 0; i < 3; i++) expect((await collect(c.ListUsers({}, clients.auth()))).length).toBe(5);
    expect((await refusal(collect(c.ListUsers({}, clients.auth())))).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    // Without a token, by address: CreateUser is public; the fourth is refused before it runs.
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await unary(c, 'CreateUser', newUser(`anon${i}`)));
    expect(made).toHaveLength(3);
    const error = await refusal(unary(c, 'CreateUser', newUser('anon3')));
    expect(error.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(error.details).toMatch(/with this address: retry in \d+ ms$/);
    clock.advance(60_000);
    expect((await collect(c.ListUsers({}, clients.auth()))).map((u) => u.username)).not.toContain('useranon3');
  });

  it('counts each SyncUsers message, and paces the stream past the rate (it is not read further) instead of ending it', async () => {
    const user1 = await unary(c, 'GetUser', { user_id: '1' }, clients.auth());
    clock.advance(60_000);
    const call = c.SyncUsers(clients.auth());
    const answers: any[] = [];
    const ended = new Promise<void>((resolve, reject) =>
      call
        .on('data', (a: any) => answers.push(a))
        .on('end', resolve)
        .on('error', reject),
    );
    for (let i = 0; i < 10; i++) {
      call.write({
        client_ref: `r${i}`,
        upsert: { user: { id: user1.id, username: 'user1', email: 'user1@example.com', full_name: `Synced ${i}`, is_active: true, roles: user1.roles } },
      });
    }
    call.end();
    const settled = async (count: number) => {
      await expect.poll(() => answers.length, { timeout: 5_000 }).toBe(count);
      // And no more while the clock stands still.
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(answers.length).toBe(count);
    };
    // The call took one of the burst of 3; two messages go, the third waits for the bucket.
    await settled(2);
    clock.advance(1_000);
    await settled(4);
    // Still the token's budget: a unary call meanwhile is refused as the stream's messages would be.
    expect((await refusal(unary(c, 'GetUser', { user_id: '1' }, clients.auth()))).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    clock.advance(60_000);
    await settled(7);
    clock.advance(60_000);
    await ended;
    expect(answers.map((a) => a.client_ref)).toEqual(Array.from({ length: 10 }, (_, i) => `r${i}`));
    expect(answers.every((a) => a.result === 'user')).toBe(true);
    clock.advance(60_000);
    expect((await unary(c, 'GetUser', { user_id: '1' }, clients.auth())).full_name).toBe('Synced 9');
  });

  it('never limits the health and reflection services', async () => {
    const raw = clients.raw();
    const call = (path: string) =>
      new Promise((resolve, reject) =>
        raw.makeUnaryRequest(
          path,
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.alloc(0),
          clients.auth(),
          (e, r) => (e ? reject(e) : resolve(r)),
        ),
      );
    for (let i = 0; i < 10; i++) await call('/grpc.health.v1.Health/Check');
    const reflection = raw.makeBidiStreamRequest(
      '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo',
      (b: Buffer) => b,
      (b: Buffer) => b,
      clients.auth(),
    );
    const answers: Buffer[] = [];
    const done = new Promise((resolve, reject) => {
      reflection
        .on('data', (b: Buffer) => answers.push(b))
        .on('end', resolve)
        .on('error', reject);
    });
    // list_services (field 7, an empty string), ten times over one stream.
    for (let i = 0; i < 10; i++) reflection.write(Buffer.from([0x3a, 0]));
    reflection.end();
    await done;
    expect(answers).toHaveLength(10);
    // The token's budget is untouched by all that.
    for (let i = 0; i < 3; i++) expect((await unary(c, 'GetUser', { user_id: '1' }, clients.auth())).username).toBe('user1');
  });
});

describe('RequestRates', () => {
  it('keys a token by itself only once vouched for, and forgets it when it no longer authenticates', () => {
    const rates = new RequestRates({ perSecond: 1, burst: 1 }, () => 0);
    expect(rates.keyOf('Bearer mat_x', '10.0.0.1')).toBe('a:10.0.0.1');
    rates.vouch(tokenHash('mat_x'), true);
    expect(rates.keyOf('bearer   mat_x', '10.0.0.1')).toMatch(/^t:/);
    // The address is asked for only when the token has no bucket.
    expect(rates.keyOf('Bearer mat_x', () => expect.unreachable('asked for the address'))).toMatch(/^t:/);
    rates.vouch(tokenHash('mat_x'), false);
    expect(rates.keyOf('Bearer mat_x', '10.0.0.1')).toBe('a:10.0.0.1');
    expect(rates.keyOf(undefined, '10.0.0.1')).toBe('a:10.0.0.1');
    expect(rates.keyOf('Bearer mat_y', () => '10.0.0.2')).toBe('a:10.0.0.2');
  });

  it('refills at its rate up to its burst, and forgets full buckets once it holds too many keys', () => {
    let now = 0;
    const rates = new RequestRates({ perSecond: 10, burst: 2 }, () => now, 4);
    expect([rates.take('a'), rates.take('a'), rates.take('a')]).toEqual([0, 0, 100]);
    now += 50;
    expect(rates.take('a')).toBe(50);
    now += 50;
    expect(rates.take('a')).toBe(0);
    for (const key of ['b', 'c', 'd']) rates.take(key);
    expect(rates.size).toBe(4);
    now += 1_000;
    rates.take('e');
    expect(rates.size).toBe(1);
  });
});
