/**
 * PostgreSQL stopped while `serve` runs, then started again: calls fail
 * fast with 503 / UNAVAILABLE (never a hang, never a crash), readiness
 * says so over HTTP and gRPC health, and serve recovers by itself.
 *
 * A PostgreSQL server of its own (stopping the run's shared one would
 * disturb the other files), on a port of its own, with its data kept
 * across the stop.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { request } from 'undici';
import { startEmbeddedPostgres, type RunningPostgres } from '../helpers/embedded-postgres.js';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { PROTO_ROOT } from '../../src/grpc/protos.js';
import { userServiceDefinition } from '../../src/users/proto.js';

let postgres: RunningPostgres;
let running: RunningServe;
let url: string;
const clients: grpc.Client[] = [];

beforeAll(async () => {
  // Its data kept across the stop in the test.
  postgres = await startEmbeddedPostgres({ prefix: 'miniapp-outage-', password: 'outage', persistent: true });
  url = postgres.url();
  running = await startTestServe({
    store: { kind: 'postgres', url, poolSize: 4, timeoutMs: 1_500 },
    grpc: { host: '127.0.0.1', port: 0 },
    shutdownDeadlineMs: 500,
  });
}, 60_000);

afterAll(async () => {
  for (const client of clients) client.close();
  await running?.close().catch(() => undefined);
  await postgres?.stop();
}, 30_000);

async function http(method: string, path: string, json?: unknown) {
  const response = await request(`${running.url}${path}`, {
    method: method as 'GET',
    headers: json === undefined ? {} : { 'content-type': 'application/json' },
    body: json === undefined ? undefined : JSON.stringify(json),
  });
  const text = await response.body.text();
  return { status: response.statusCode, headers: response.headers, body: text ? JSON.parse(text) : undefined };
}

function grpcStatus(method: string, request: unknown, token?: string): Promise<string> {
  const { Client } = userServiceDefinition();
  const client = new Client(running.grpc!.address, grpc.credentials.createInsecure()) as grpc.Client & Record<string, any>;
  clients.push(client);
  const metadata = new grpc.Metadata();
  if (token) metadata.set('authorization', `Bearer ${token}`);
  return new Promise((resolve) => {
    client[method](request, metadata, { deadline: Date.now() + 15_000 }, (error: grpc.ServiceError | null) => resolve(error ? grpc.status[error.code]! : 'OK'));
  });
}

function health(): Promise<string> {
  const definition = protoLoader.loadSync('grpc/health/v1/health.proto', { includeDirs: [PROTO_ROOT], enums: String });
  const Health = (grpc.loadPackageDefinition(definition) as any).grpc.health.v1.Health;
  const client = new Health(running.grpc!.address, grpc.credentials.createInsecure());
  clients.push(client);
  return new Promise((resolve, reject) =>
    client.Check({ service: 'user.v1.UserService' }, (e: unknown, r: { status: string }) => (e ? reject(e) : resolve(r.status))),
  );
}

async function until(what: string, condition: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 150; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('PostgreSQL stopped while serve runs', () => {
  it('fails calls fast with 503 / UNAVAILABLE, reports not ready, and recovers by itself', async () => {
    // A hang would show as DEADLINE_EXCEEDED (gRPC, 15 s) or as this test's time-out (HTTP): failing fast is
    // UNAVAILABLE and 503, which is what is checked, without timing anything.
    const token = running.adminToken;
    expect((await http('POST', '/api/users', { username: 'before', email: 'before@example.com', password: 'password-1' })).status).toBe(201);
    expect((await http('GET', '/health/ready')).status).toBe(200);
    expect(await health()).toBe('SERVING');

    await postgres.server.stop();

    const list = await http('GET', '/api/v2/blog/posts?search=during');
    expect(list.status).toBe(503);
    expect(list.body).toMatchObject({ code: 'SERVICE_UNAVAILABLE', error: expect.any(String), detail: expect.any(String) });
    expect(list.headers['retry-after']).toBeDefined();
    expect(list.body.detail).not.toContain('outage');
    const signup = await http('POST', '/api/users', { username: 'during', email: 'during@example.com', password: 'password-1' });
    expect(signup.status).toBe(503);
    expect(await grpcStatus('GetUser', { user_id: '1' }, token)).toBe('UNAVAILABLE');
    const ready = await http('GET', '/health/ready');
    expect(ready.status).toBe(503);
    expect(ready.body.status).toBe('unavailable');
    expect((await http('GET', '/health')).status).toBe(200);
    await until('gRPC health NOT_SERVING', async () => (await health()) === 'NOT_SERVING');

    await postgres.server.start();

    await until('readiness to return', async () => (await http('GET', '/health/ready')).status === 200);
    await until('gRPC health SERVING', async () => (await health()) === 'SERVING');
    expect((await http('POST', '/api/users', { username: 'after', email: 'after@example.com', password: 'password-1' })).status).toBe(201);
    expect(await grpcStatus('GetUser', { user_id: '1' }, token)).toBe('OK');
    expect((await http('GET', '/api/v2/blog/posts')).status).toBe(200);
  }, 90_000);
});
