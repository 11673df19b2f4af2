/**
 * --database-timeout bounds a whole call of serve, not each statement or
 * wait of it: with the network to PostgreSQL stalled (the fault proxy's
 * black hole), blog lists, creates, sign-ups and gRPC calls all fail with
 * 503 / UNAVAILABLE within about the time-out, and a write whose time ran
 * out is not committed later when the network heals.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { request } from 'undici';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { startTestServe } from '../helpers/serve.js';
import { UserClients } from '../helpers/user-client.js';
import type { RunningServe } from '../../src/server/serve.js';

const TIMEOUT_MS = 1_000;
/** Room for a busy machine's timers; a time-out per statement or per wait would be well past it. */
const SLACK_MS = 900;

let database: TestDatabase;
let proxy: TcpProxy;
let running: RunningServe;
let clients: UserClients;
let token: string;

beforeAll(async () => {
  database = await createTestDatabase();
  const url = new URL(database.url);
  proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
  url.port = String(proxy.port);
  running = await startTestServe({
    store: { kind: 'postgres', url: url.href, poolSize: 3, timeoutMs: TIMEOUT_MS },
    grpc: { host: '127.0.0.1', port: 0 },
    shutdownDeadlineMs: 500,
  });
  clients = new UserClients(running);
  await request(`${running.url}/api/v2/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'writer', email: 'writer@example.com', password: 'password-1' }),
  }).then((r) => r.body.dump());
  const login = await request(`${running.url}/api/v2/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'writer@example.com', password: 'password-1' }),
  });
  token = ((await login.body.json()) as { access_token: string }).access_token;
});

afterAll(async () => {
  await running?.close();
  await proxy?.stop();
  await database?.drop();
});

async function timed<T>(call: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const started = Date.now();
  const result = await call();
  return { result, ms: Date.now() - started };
}

const http = (method: string, path: string, body?: unknown, auth?: string) =>
  request(`${running.url}${path}`, {
    method: method as 'GET',
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  }).then(async (r) => {
    await r.body.dump();
    return r.statusCode;
  });

describe('a call of serve while the network to PostgreSQL is stalled', () => {
  it('fails within its --database-timeout, whatever it does, and what timed out is not committed later', async () => {
    const client = clients.client();
    const unary = (method: string, body: unknown) =>
      new Promise<string>((resolve) =>
        client[method](body, clients.auth(), { deadline: Date.now() + 20_000 }, (e: grpc.ServiceError | null) => resolve(e ? grpc.status[e.code]! : 'OK')),
      );
    proxy.setMode('blackhole');
    const calls = await Promise.all([
      timed(() => http('GET', '/api/v2/blog/posts')),
      timed(() => http('GET', '/api/v2/blog/posts?search=x&page=3')),
      timed(() => http('POST', '/api/v2/blog/posts', { title: 'stalled', content: 'never committed' }, token)),
      timed(() => http('POST', '/api/v2/users', { username: 'stalled', email: 'stalled@example.com', password: 'password-1' })),
      timed(() => unary('GetUser', { user_id: '1' })),
      timed(() => unary('CreateUser', { username: 'stalledgrpc', email: 'stalledgrpc@example.com', password: 'password-1', full_name: '' })),
      // More calls than connections: some wait for a slot, and that wait counts too.
      ...Array.from({ length: 6 }, () => timed(() => http('GET', '/api/v2/blog/posts'))),
    ]);
    proxy.setMode('pass');
    for (const { result, ms } of calls) {
      expect([503, 'UNAVAILABLE']).toContain(result);
      expect(ms, `call ${calls.findIndex((c) => c.ms === ms)}: ${JSON.stringify(calls.map((c) => c.ms))}`).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    }
    // The network is back: whatever was in flight reaches the server now, and none of it may commit.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const direct = new pg.Client({ connectionString: database.url });
    await direct.connect();
    try {
      expect((await direct.query("SELECT count(*)::int AS n FROM posts WHERE title = 'stalled'")).rows[0].n).toBe(0);
      expect((await direct.query("SELECT count(*)::int AS n FROM users WHERE username IN ('stalled', 'stalledgrpc')")).rows[0].n).toBe(0);
    } finally {
      await direct.end();
    }
    expect(await http('GET', '/api/v2/blog/posts')).toBe(200);
  }, 30_000);
});
