/**
 * Issue 21: rolling restarts that drop nothing. Two real `serve` processes
 * on one PostgreSQL behind a round-robin TCP balancer written here (one for
 * HTTP, one for gRPC), which, like a cloud load balancer, sends each new
 * connection to the next instance whose /health/ready answers 200 and skips
 * one that refuses connections. A client load runs through the balancers
 * (gRPC CreateUser + GetUser, blog post writes and reads whose writes send
 * post.created webhooks to a receiver here, and the real `miniapp users
 * watch`) while each instance in turn gets SIGTERM, exits, and starts again
 * on the same ports.
 *
 * What must hold: no call of the load fails; the watch prints every user
 * change exactly once, in order; every post's webhook is delivered.
 *
 * Retries in play, and only these:
 * - grpc-js's transparent retry, built into every grpc-js client: a call
 *   the server never saw (its stream refused after the GOAWAY of a stopping
 *   server, or never started) is sent again once, on a new connection. No
 *   retry policy is configured, so a call the server did see is never sent
 *   twice (CreateUser is not idempotent).
 * - `miniapp users watch` reconnects after UNAVAILABLE and resumes after
 *   the last change it printed (its own behaviour, tested here).
 * - No HTTP request is retried. The HTTP client closes connections idle for
 *   300 ms (undici's keepAliveTimeout), below serve's --drain of 2 s: a
 *   real deployment keeps its clients' (or its load balancer's) idle
 *   time-out below the drain period, so that by the end of the drain every
 *   connection to the stopping instance has either been closed by its
 *   answer (`Connection: close` while draining) or by the client.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import * as grpc from '@grpc/grpc-js';
import { startServeProcess, type ServeProcess } from '../helpers/chaos.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { adminSql } from '../helpers/pg-admin.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { BIN } from '../helpers/launcher.js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { newUser } from '../helpers/user-client.js';

const DRAIN = '2s';
const PASSWORD = 'rolling-password-1';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

interface Backend {
  port: number;
  readyUrl: string;
  /** Connections sent to it so far. */
  connections: number;
}

/**
 * A round-robin TCP balancer as cloud load balancers are: it asks each
 * backend's readiness URL every 100 ms and sends each new connection to the
 * next backend that answered 200 last time. A backend that refuses a
 * connection all the same (it stopped before the balancer saw it go) is
 * skipped for the next one, and counted in `refused`: with a drain period
 * longer than the health checks' interval, that never happens.
 */
async function startBalancer(backends: Backend[]): Promise<{ port: number; refused: () => number; stop(): Promise<void> }> {
  const health = new Agent({ keepAliveTimeout: 100, keepAliveMaxTimeout: 100 });
  const healthy = backends.map(() => false);
  let stopped = false;
  const check = async (i: number) => {
    try {
      const answer = await request(backends[i]!.readyUrl, { dispatcher: health, headersTimeout: 2_000, bodyTimeout: 2_000 });
      await answer.body.dump();
      healthy[i] = answer.statusCode === 200;
    } catch {
      healthy[i] = false;
    }
  };
  await Promise.all(backends.map((_, i) => check(i)));
  const checking = (async () => {
    while (!stopped) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      await Promise.all(backends.map((_, i) => check(i)));
    }
  })();
  const open = (port: number) =>
    new Promise<Socket | undefined>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => resolve(socket));
      socket.once('error', () => resolve(undefined));
    });
  const sockets = new Set<Socket>();
  let next = 0;
  let refused = 0;
  const server: Server = createServer((client) => {
    client.pause();
    sockets.add(client);
    client.on('error', () => undefined);
    client.once('close', () => sockets.delete(client));
    void (async () => {
      const started = Date.now();
      while (!stopped && !client.destroyed && Date.now() - started < 20_000) {
        const i = next++ % backends.length;
        if (!healthy[i]) {
          // None healthy (one restarting, the other not yet seen back): look again shortly.
          if (!healthy.some(Boolean)) await new Promise((resolve) => setTimeout(resolve, 20));
          continue;
        }
        const backend = backends[i]!;
        const upstream = await open(backend.port);
        if (!upstream) {
          refused++;
          continue;
        }
        backend.connections++;
        sockets.add(upstream);
        upstream.on('error', () => undefined);
        upstream.once('close', () => {
          sockets.delete(upstream);
          client.destroy();
        });
        client.once('close', () => upstream.destroy());
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
        return;
      }
      client.destroy();
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    refused: () => refused,
    async stop() {
      stopped = true;
      await checking;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await health.close();
    },
  };
}

describe('a rolling restart of two serve instances on PostgreSQL behind a load balancer', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('fails no call, shows the watch every change once, and delivers every webhook', async () => {
    const database = await createTestDatabase({ migrated: true });
    cleanups.push(() => database.drop());
    const receiver = await startWebhookReceiver();
    cleanups.push(() => receiver.close());

    const ports = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    const instances = [
      { port: ports[0]!, grpcPort: ports[1]! },
      { port: ports[2]!, grpcPort: ports[3]! },
    ];
    const start = (i: number) =>
      startServeProcess({
        databaseUrl: database.url,
        poolSize: 4,
        port: instances[i]!.port,
        grpcPort: instances[i]!.grpcPort,
        // The default drain would do; a shorter one keeps the test short.
        extraArgs: ['--drain', DRAIN, '--webhook-url', receiver.url, '--webhook-secret', 'rolling-secret'],
      });
    const serves: ServeProcess[] = [await start(0), await start(1)];
    cleanups.push(() => {
      for (const serve of serves) serve.dispose();
    });
    const token = serves[0]!.info.adminToken;

    const httpBackends = instances.map((instance) => ({ port: instance.port, readyUrl: `http://127.0.0.1:${instance.port}/health/ready`, connections: 0 }));
    const grpcBackends = instances.map((instance) => ({ port: instance.grpcPort, readyUrl: `http://127.0.0.1:${instance.port}/health/ready`, connections: 0 }));
    const httpBalancer = await startBalancer(httpBackends);
    cleanups.push(() => httpBalancer.stop());
    const grpcBalancer = await startBalancer(grpcBackends);
    cleanups.push(() => grpcBalancer.stop());
    const base = `http://127.0.0.1:${httpBalancer.port}`;
    const grpcAddress = `127.0.0.1:${grpcBalancer.port}`;

    const failures: string[] = [];
    const http = new Agent({ keepAliveTimeout: 300, keepAliveMaxTimeout: 300 });
    cleanups.push(() => http.destroy());
    const call = async (method: 'GET' | 'POST', path: string, body?: unknown, bearer?: string): Promise<{ status: number; body: any }> => {
      try {
        const answer = await request(`${base}${path}`, {
          method,
          dispatcher: http,
          headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
          body: body ? JSON.stringify(body) : undefined,
          headersTimeout: 15_000,
          bodyTimeout: 15_000,
        });
        const text = await answer.body.text();
        return { status: answer.statusCode, body: text ? JSON.parse(text) : undefined };
      } catch (error) {
        return { status: 0, body: String((error as Error & { code?: string }).code ?? error) };
      }
    };

    // A blog author, made before the restarts.
    const signup = await call('POST', '/api/v2/users', { username: 'author', email: 'author@example.com', password: PASSWORD });
    expect(signup.status, JSON.stringify(signup.body)).toBe(201);
    const login = await call('POST', '/api/v2/auth/login', { email: 'author@example.com', password: PASSWORD });
    expect(login.status, JSON.stringify(login.body)).toBe(200);
    const author = login.body.access_token as string;

    // The real CLI's watch, through the balancer, from now on (no --resume-after).
    const home = mkdtempSync(join(tmpdir(), 'miniapp-rolling-watch-'));
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));
    const watcher: ChildProcess = spawn(process.execPath, [BIN, 'users', 'watch', '--json'], {
      env: {
        PATH: process.env.PATH,
        HOME: home,
        MINIAPP_CONFIG_DIR: home,
        MINIAPP_GRPC_ADDR: grpcAddress,
        MINIAPP_GRPC_TOKEN: token,
        MINIAPP_GRPC_RECONNECT_MS: '50',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(() => void watcher.kill('SIGKILL'));
    let watched = '';
    let watchErrors = '';
    watcher.stdout!.setEncoding('utf8').on('data', (chunk: string) => (watched += chunk));
    watcher.stderr!.setEncoding('utf8').on('data', (chunk: string) => (watchErrors += chunk));
    const watchExit = new Promise<number | null>((resolve) => watcher.once('exit', (code) => resolve(code)));
    const printed = () =>
      watched
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { sequence: number; type: string; user: { username: string } });

    // One gRPC client for the whole run, as an application keeps one channel.
    const { Client } = userServiceDefinition();
    const users = new Client(grpcAddress, grpc.credentials.createInsecure()) as grpc.Client & Record<string, any>;
    cleanups.push(() => users.close());
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    const unary = (method: string, body: unknown) =>
      new Promise<{ code: string; response?: any; details?: string }>((resolve) =>
        users[method](body, metadata, { deadline: Date.now() + 15_000 }, (error: grpc.ServiceError | null, response: unknown) =>
          resolve(error ? { code: grpc.status[error.code], details: error.details } : { code: 'OK', response }),
        ),
      );

    // The watch is live once it prints a change: markers until it does (it starts from now on, whenever that is).
    for (let i = 0; printed().length === 0; i++) {
      const marker = await unary('CreateUser', newUser(`marker${i}`));
      expect(marker.code, marker.details).toBe('OK');
      await until(() => printed().length > 0 || i % 20 !== 19, `the watch to print a marker: ${watchErrors}`).catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const firstSeq = printed()[0]!.sequence;

    let running = true;
    const counts = { grpc: 0, writes: 0, reads: 0 };
    const posts: number[] = [];
    let n = 0;
    const grpcWorker = async () => {
      while (running) {
        const name = `load${n++}`;
        const made = await unary('CreateUser', newUser(name));
        if (made.code !== 'OK') {
          failures.push(`CreateUser ${name}: ${made.code} ${made.details}`);
          continue;
        }
        const got = await unary('GetUser', { user_id: made.response.user.id });
        if (got.code !== 'OK' || got.response.username !== made.response.user.username)
          failures.push(`GetUser ${name}: ${got.code} ${got.details ?? got.response?.username}`);
        counts.grpc++;
      }
    };
    const writer = async () => {
      while (running) {
        const made = await call('POST', '/api/v2/blog/posts', { title: `post ${n++}`, content: 'rolling' }, author);
        if (made.status !== 201) failures.push(`POST /api/v2/blog/posts: ${made.status} ${JSON.stringify(made.body)}`);
        else posts.push(Number(made.body.id));
        counts.writes++;
      }
    };
    const reader = async () => {
      while (running) {
        const listed = await call('GET', '/api/v2/blog/posts?page_size=5');
        if (listed.status !== 200) failures.push(`GET /api/v2/blog/posts: ${listed.status} ${JSON.stringify(listed.body)}`);
        const latest = posts.at(-1);
        if (latest !== undefined) {
          const one = await call('GET', `/api/v2/blog/posts/${latest}`);
          if (one.status !== 200) failures.push(`GET /api/v2/blog/posts/${latest}: ${one.status} ${JSON.stringify(one.body)}`);
        }
        counts.reads++;
      }
    };
    const load = Promise.all([grpcWorker(), grpcWorker(), writer(), writer(), reader()]);
    const progressed = async (what: string) => {
      const before = { ...counts };
      await until(() => counts.grpc > before.grpc + 20 && counts.writes > before.writes + 10 && counts.reads > before.reads + 10, what);
    };

    await progressed('the load to run on both instances');
    for (const i of [0, 1]) {
      const stopped = await serves[i]!.stop('SIGTERM');
      expect(stopped.code, serves[i]!.stderr().slice(-2000)).toBe(0);
      expect(serves[i]!.stderr()).toContain(`SIGTERM: draining for ${DRAIN}`);
      const connectionsBefore = httpBackends[i]!.connections;
      serves[i] = await start(i);
      // Back in the rotation: the balancer sends it new connections, and the load goes on.
      await until(() => httpBackends[i]!.connections > connectionsBefore, `instance ${i} to take connections again`);
      await progressed(`the load to go on after instance ${i} restarted`);
    }
    running = false;
    await load;
    await http.close();

    expect(failures).toEqual([]);
    // Each instance left the rotation (not ready) before it stopped listening.
    expect({ http: httpBalancer.refused(), grpc: grpcBalancer.refused() }).toEqual({ http: 0, grpc: 0 });

    // The watch: every change from its first one on, exactly once, in order, across both restarts.
    const admin = adminSql(database.url);
    cleanups.push(() => admin.end());
    const log = (await admin<{ seq: number }>`SELECT seq FROM user_events WHERE seq >= ${firstSeq} ORDER BY seq`).map((row) => Number(row.seq));
    await until(() => printed().length >= log.length, `the watch to print all ${log.length} changes`);
    watcher.kill('SIGINT');
    expect(await watchExit).toBe(0);
    expect(printed().map((event) => event.sequence)).toEqual(log);
    // It was there when its streams were ended, and said so on stderr.
    expect(watchErrors).toMatch(/reconnected to \S+; resuming after change \d+/);

    // Every post's post.created reached the receiver (at least once; receivers deduplicate by X-Webhook-Delivery).
    const delivered = () => new Set(receiver.received.map((hit) => Number(JSON.parse(hit.body).data.id)));
    await until(() => posts.every((id) => delivered().has(id)), `all ${posts.length} post.created deliveries`);
    const states = async () =>
      (await admin<{ state: string; count: number }>`SELECT state, count(*)::int AS count FROM webhook_deliveries GROUP BY state`).map((row) => ({ ...row }));
    await until(async () => (await states()).every((row) => row.state === 'delivered'), 'every delivery recorded as delivered');
    expect(await states()).toEqual([{ state: 'delivered', count: posts.length }]);
  }, 180_000);
});
