/**
 * serve's drain before a stop (src/server/drain.ts, RunningServe.drain and
 * close), through its real ports, with the drain period's wait in the
 * test's hands: not ready at once, everything still answered until the
 * wait ends; then streams end with UNAVAILABLE while a call in flight
 * finishes. Also the readiness that stays down once draining, `--drain`'s
 * checks, and a watch that resumes across a stop without having seen a
 * change.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { drainAndClose, type DrainStep } from '../../src/server/drain.js';
import { Readiness } from '../../src/server/readiness.js';
import type { Store } from '../../src/store/store.js';
import { PROTO_ROOT } from '../../src/grpc/protos.js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { connectUserService, watchUserChanges, type UserEvent, type WatchUserRequest } from '../../src/users/client.js';
import { startTestServe } from '../helpers/serve.js';
import { newUser } from '../helpers/user-client.js';
import { Sandbox } from '../helpers/cli.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function until(check: () => boolean, what: string): Promise<void> {
  const started = Date.now();
  while (!check()) {
    if (Date.now() - started > 15_000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

type AnyClient = grpc.Client & Record<string, any>;

function clientsOf(running: RunningServe) {
  const { Client } = userServiceDefinition();
  const users = new Client(running.grpc!.address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }) as AnyClient;
  const definition = protoLoader.loadSync('grpc/health/v1/health.proto', { includeDirs: [PROTO_ROOT], enums: String });
  const Health = (grpc.loadPackageDefinition(definition) as any).grpc.health.v1.Health;
  const health = new Health(running.grpc!.address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }) as AnyClient;
  cleanups.push(
    () => users.close(),
    () => health.close(),
  );
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${running.adminToken}`);
  return {
    metadata,
    users,
    health,
    status: (service: string) =>
      new Promise<string>((resolve, reject) =>
        health.Check({ service }, (error: unknown, answer: { status: string }) => (error ? reject(error) : resolve(answer.status))),
      ),
    create: (n: string) =>
      new Promise<string>((resolve) =>
        users.CreateUser(newUser(n), metadata, (error: grpc.ServiceError | null) => resolve(error ? grpc.status[error.code]! : 'OK')),
      ),
  };
}

/** What a client's stream gave (`pick` of each message), its error, and whether it has ended (by 'end' or an error). */
function follow<T, S>(stream: grpc.ClientReadableStream<T> | grpc.ClientDuplexStream<unknown, T>, pick: (message: T) => S) {
  const followed = { seen: [] as S[], error: undefined as grpc.ServiceError | undefined, finished: false };
  stream.on('data', (message: T) => followed.seen.push(pick(message)));
  stream.on('error', (error: grpc.ServiceError) => {
    followed.error = error;
    followed.finished = true;
  });
  stream.on('end', () => (followed.finished = true));
  return followed;
}

/** A drain period that ends when the test says so. */
function heldWait() {
  let end!: () => void;
  const done = new Promise<void>((resolve) => (end = resolve));
  let asked: number | undefined;
  const wait = (ms: number) => {
    asked = ms;
    return { done, cancel: () => undefined };
  };
  return { wait, end, asked: () => asked };
}

describe('the drain of serve', () => {
  it('past the deadline of a stop, ends the connection of a client stream that never ends, so the process can exit', async () => {
    const running = await startTestServe({ grpc: { host: '127.0.0.1', port: 0 }, shutdownDeadlineMs: 300 });
    let closed = false;
    cleanups.push(() => (closed ? undefined : running.close()));
    const { users, metadata } = clientsOf(running);
    const importing = users.ImportUsers(metadata) as grpc.ClientDuplexStream<unknown, unknown>;
    const imported = follow(importing, (answer) => answer);
    importing.write(newUser('left-open'));
    await until(() => imported.seen.length === 1, 'the first imported row');
    // The client neither writes nor ends: grpc-js's own forceShutdown left such a connection (and serve's process) open.
    await running.close();
    closed = true;
    await until(() => imported.finished, 'the stream left open to end');
    expect(imported.error && grpc.status[imported.error.code]).toBe('UNAVAILABLE');
  });

  it('is not ready at once, answers everything until the wait ends, then ends streams with UNAVAILABLE while a call in flight finishes', async () => {
    const logged: Record<string, any>[] = [];
    const running = await startTestServe({
      grpc: { host: '127.0.0.1', port: 0 },
      shutdownDeadlineMs: 10_000,
      logger: { level: 'info', stream: { write: (line: string) => void logged.push(JSON.parse(line)) } },
    });
    let closed = false;
    cleanups.push(() => (closed ? undefined : running.close()));
    const { users, health, metadata, status, create } = clientsOf(running);
    expect(await status('')).toBe('SERVING');
    expect((await request(`${running.url}/health/ready`)).statusCode).toBe(200);
    // A health Watch, as clients with health checking keep open: it never ends by itself, and once kept serve alive
    // after it had stopped (grpc-js's forceShutdown missed its session).
    const healthWatch = follow(health.Watch({ service: '' }) as grpc.ClientReadableStream<{ status: string }>, (answer) => answer.status);
    await until(() => healthWatch.seen.length === 1, 'the health watch to answer');
    // A Check's NOT_FOUND names a bounded part of the service asked for, so that any client can read the answer.
    const unknown = await new Promise<grpc.ServiceError>((resolve) =>
      health.Check({ service: 'x'.repeat(100_000) }, (error: grpc.ServiceError) => resolve(error)),
    );
    expect([grpc.status[unknown.code], unknown.details]).toEqual(['NOT_FOUND', `Health status unknown for service ${'x'.repeat(200)}… (100000 characters)`]);

    // A watch (a stream that never ends by itself) and an import (a call in flight, one row answered).
    const watch = follow(users.WatchUserChanges({}, metadata) as grpc.ClientReadableStream<{ user: { username: string } }>, (event) => event.user.username);
    await until(() => running.users.watcherCount() === 1, 'the watch to be live');
    const importing = users.ImportUsers(metadata) as grpc.ClientDuplexStream<unknown, unknown>;
    const imported = follow(importing, (answer) => answer);
    importing.write(newUser('imported1'));
    await until(() => imported.seen.length === 1, 'the first imported row');

    const held = heldWait();
    const steps: DrainStep['step'][] = [];
    const stopping = drainAndClose(running, { drainMs: 5_000, wait: held.wait, onStep: (step) => steps.push(step.step) });
    // At once, before anything is awaited: the load balancers' next check sees it.
    expect(running.readiness.draining).toBe(true);
    expect(held.asked()).toBe(5_000);
    expect(steps).toEqual(['draining']);

    const ready = await request(`${running.url}/health/ready`);
    expect(ready.statusCode).toBe(503);
    expect(ready.headers.connection).toBe('close');
    expect(await ready.body.json()).toMatchObject({ status: 'unavailable', detail: 'draining: this instance is shutting down' });
    const live = await request(`${running.url}/health`);
    expect(live.statusCode).toBe(200);
    expect(live.headers.connection).toBe('close');
    await live.body.dump();
    const posts = await request(`${running.url}/api/v2/blog/posts`);
    expect(posts.statusCode).toBe(200);
    await posts.body.dump();
    for (const service of ['', 'user.v1.UserService', 'monitoring.v1.MonitoringService', 'order.v1.OrderService'])
      expect(await status(service), service).toBe('NOT_SERVING');
    await until(() => healthWatch.seen.at(-1) === 'NOT_SERVING', 'the health watch to hear NOT_SERVING');
    expect(healthWatch.error).toBeUndefined();
    // Still answering, streams included.
    expect(await create('during')).toBe('OK');
    await until(() => watch.seen.includes('userduring'), 'the watch to see the change made while draining');
    expect(watch.error).toBeUndefined();
    expect(steps).toEqual(['draining']);

    held.end();
    // The stop: the watch ends with UNAVAILABLE, which clients retry...
    await until(() => watch.error !== undefined, 'the watch to end');
    expect(grpc.status[watch.error!.code]).toBe('UNAVAILABLE');
    expect(watch.error!.details).toContain('shutting down');
    await until(() => healthWatch.error !== undefined, 'the health watch to end');
    expect([grpc.status[healthWatch.error!.code], healthWatch.error!.details]).toEqual(['UNAVAILABLE', 'the server is shutting down; reconnect to resume']);
    expect(healthWatch.seen).toEqual(['SERVING', 'NOT_SERVING']);
    // ...while the import in flight goes on to its end.
    importing.write(newUser('imported2'));
    importing.end();
    await until(() => imported.finished, 'the import to end');
    expect(imported.error).toBeUndefined();
    expect(imported.seen).toHaveLength(2);
    await stopping;
    closed = true;
    expect(steps).toEqual(['draining', 'stopping', 'stopped']);
    await expect(request(`${running.url}/health`)).rejects.toThrow();
    // The log says the watch was ended by the shutdown (info), not that a call failed (a warning an operator chases).
    const ended = logged.filter((line) => line.method === '/user.v1.UserService/WatchUserChanges');
    expect(ended).toMatchObject([{ level: 30, msg: 'grpc call ended by the shutdown', code: 'UNAVAILABLE' }]);
  });

  it('with 0 stops without waiting, and a skip cuts the wait short', async () => {
    const calls: string[] = [];
    const target = { drain: () => void calls.push('drain'), close: async () => void calls.push('close') };
    const steps: DrainStep['step'][] = [];
    const never = { wait: () => ({ done: new Promise<void>(() => undefined), cancel: () => void calls.push('cancel') }) };
    await drainAndClose(target, { drainMs: 0, ...never, onStep: (step) => steps.push(step.step) });
    expect(calls).toEqual(['drain', 'close']);
    expect(steps).toEqual(['stopping', 'stopped']);

    calls.length = 0;
    steps.length = 0;
    await drainAndClose(target, { drainMs: 5_000, ...never, skip: Promise.resolve('SIGTERM'), onStep: (step) => steps.push(step.step) });
    expect(calls).toEqual(['drain', 'cancel', 'close']);
    expect(steps).toEqual(['draining', 'drain-skipped', 'stopping', 'stopped']);
  });
});

describe('readiness once draining', () => {
  it('stays down, even when a database check under way answers afterwards', async () => {
    let answer!: () => void;
    const store = { kind: 'postgres', ready: () => new Promise<void>((resolve) => (answer = resolve)) } as unknown as Store;
    const changes: boolean[] = [];
    const readiness = new Readiness({ store, onChange: (ready) => changes.push(ready) });
    const checking = readiness.check();
    readiness.drain();
    answer();
    expect(await checking).toBe(false);
    expect(await readiness.check()).toBe(false);
    expect(readiness.reason).toBe('draining: this instance is shutting down');
    expect(changes).toEqual([false]);
  });
});

describe('serve --drain', () => {
  const sb = new Sandbox();
  afterEach(() => sb.dispose());

  it('takes 0 or a duration up to 10m, and says so otherwise (exit 2)', async () => {
    for (const [value, message] of [
      ['soon', 'invalid --drain "soon"'],
      ['-1s', 'invalid --drain "-1s"'],
      ['11m', '--drain must be from 0 to 10m; got "11m"'],
      ['', 'invalid --drain ""'],
    ] as const) {
      const result = await sb.run(['serve', '--port', '0', '--no-grpc', '--store', 'memory', '--drain', value]);
      expect(result.code, value).toBe(2);
      expect(result.stderr, value).toContain(message);
    }
    const help = await sb.run(['serve', '--help']);
    const text = help.stdout.replace(/\s+/g, ' ');
    expect(text).toMatch(/--drain <duration> .*\(default: "5s"\)/);
    expect(text).toContain("Ctrl-C (SIGINT), or a second signal, skips the drain's wait");
  });
});

describe('a watch across a stop of serve, before it has seen any change', () => {
  it('resumes where the server said it started: the change made while it was away arrives, once', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'miniapp-drain-watch-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const first = await startTestServe({ store: { kind: 'sqlite', dataDir }, grpc: { host: '127.0.0.1', port: 0 }, shutdownDeadlineMs: 2_000 });
    let firstClosed = false;
    cleanups.push(() => (firstClosed ? undefined : first.close()));
    let address = first.grpc!.address;
    const requests: WatchUserRequest[] = [];
    const positions: number[] = [];
    const events: UserEvent[] = [];
    const retries: string[] = [];
    const controller = new AbortController();
    const watching = watchUserChanges({
      connect: () => {
        const client = connectUserService({ address, token: first.adminToken });
        const watch = client.watch.bind(client);
        client.watch = (request, handlers) => {
          requests.push(request);
          return watch(request, {
            ...handlers,
            onPosition: (after) => {
              positions.push(after);
              handlers.onPosition?.(after);
            },
          });
        };
        return client;
      },
      request: { user_id: '0', types: [] },
      signal: controller.signal,
      onEvent: (event) => events.push(event),
      onRetry: ({ reason }) => retries.push(reason),
      baseDelayMs: 10,
      maxDelayMs: 50,
      connectTimeoutMs: 5_000,
    });
    cleanups.push(() => controller.abort());
    await until(() => positions.length === 1, 'the watch to learn where it starts');

    await drainAndClose(first, { drainMs: 0 });
    firstClosed = true;
    await until(() => retries.length > 0, 'the watch to lose its stream');
    // serve again on the same data, at another address the watch learns of only after a change is made there.
    const second = await startTestServe({ store: { kind: 'sqlite', dataDir }, grpc: { host: '127.0.0.1', port: 0 }, shutdownDeadlineMs: 2_000 });
    cleanups.push(() => second.close());
    expect(await clientsOf(second).create('whileaway')).toBe('OK');
    address = second.grpc!.address;
    await until(() => events.length === 1, 'the change made while away');
    expect(await clientsOf(second).create('after')).toBe('OK');
    await until(() => events.length === 2, 'the next change');
    controller.abort();
    await watching;

    expect(retries[0]).toContain('shutting down');
    expect(requests[0]!.resume_after).toBeUndefined();
    expect(requests.at(-1)!.resume_after).toBe(String(positions[0]));
    expect(events.map((event) => event.user?.username)).toEqual(['userwhileaway', 'userafter']);
    expect(events.map((event) => Number(event.sequence))).toEqual([positions[0]! + 1, positions[0]! + 2]);
  });
});

describe('miniapp monitor across a restart of serve', () => {
  it('metrics: reconnects on UNAVAILABLE, says so on stderr, and shows --count snapshots in all', async () => {
    const { createServer } = await import('node:net');
    const { spawn } = await import('node:child_process');
    const { BIN } = await import('../helpers/launcher.js');
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const dataDir = mkdtempSync(join(tmpdir(), 'miniapp-drain-monitor-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const start = () => startTestServe({ store: { kind: 'sqlite', dataDir }, grpc: { host: '127.0.0.1', port }, shutdownDeadlineMs: 2_000 });
    const first = await start();
    let firstClosed = false;
    cleanups.push(() => (firstClosed ? undefined : first.close()));

    const home = mkdtempSync(join(tmpdir(), 'miniapp-drain-monitor-home-'));
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));
    const child = spawn(process.execPath, [BIN, 'monitor', 'metrics', '--json', '--interval', '100ms', '--count', '4', '--name', 'miniapp_grpc'], {
      env: { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: home, MINIAPP_GRPC_ADDR: first.grpc!.address, MINIAPP_GRPC_TOKEN: first.adminToken },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(() => void child.kill('SIGKILL'));
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const lines = () => stdout.split('\n').filter(Boolean);
    await until(() => lines().length >= 1, 'the first snapshot');

    await drainAndClose(first, { drainMs: 0 });
    firstClosed = true;
    await until(() => stderr.includes('reconnecting'), 'the monitor to notice');
    const shownBefore = lines().length;
    expect(shownBefore).toBeLessThan(4);
    const second = await start();
    cleanups.push(() => second.close());
    expect(await exited).toBe(0);
    expect(stderr).toMatch(/stream lost \([^)]*shutting down[^)]*\); reconnecting in \d+ ms/);
    expect(stderr).toContain(`reconnected to ${first.grpc!.address}`);
    expect(lines()).toHaveLength(4);
    for (const line of lines()) expect(JSON.parse(line)).toMatchObject({ service: expect.stringContaining('miniapp'), metrics: expect.any(Object) });
  });
});

describe('miniapp monitor logs -f across a restart of serve', () => {
  it("reconnects and shows the new instance's lines written after the last one shown, none twice", async () => {
    const { createServer } = await import('node:net');
    const { spawn } = await import('node:child_process');
    const { BIN } = await import('../helpers/launcher.js');
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const dataDir = mkdtempSync(join(tmpdir(), 'miniapp-drain-logs-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const start = () =>
      startTestServe({
        store: { kind: 'sqlite', dataDir },
        grpc: { host: '127.0.0.1', port },
        shutdownDeadlineMs: 2_000,
        logger: { level: 'info', stream: { write: () => true } },
      });
    const first = await start();
    let firstClosed = false;
    cleanups.push(() => (firstClosed ? undefined : first.close()));
    await (await request(`${first.url}/api/v2/blog/posts?search=before-restart`)).body.dump();

    const home = mkdtempSync(join(tmpdir(), 'miniapp-drain-logs-home-'));
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));
    const child = spawn(process.execPath, [BIN, 'monitor', 'logs', '-f', '--json', '--component', 'http'], {
      env: { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: home, MINIAPP_GRPC_ADDR: first.grpc!.address, MINIAPP_GRPC_TOKEN: first.adminToken },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(() => void child.kill('SIGKILL'));
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const lines = () =>
      stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { time: string; message: string; fields: { req?: { url?: string } } });
    const urls = () => lines().map((line) => line.fields.req?.url ?? '');
    await until(() => urls().some((url) => url.includes('before-restart')), 'the kept line of the first instance');

    await drainAndClose(first, { drainMs: 0 });
    firstClosed = true;
    await until(() => stderr.includes('reconnecting'), 'the monitor to notice');
    const second = await start();
    cleanups.push(() => second.close());
    await until(() => stderr.includes('reconnected'), 'the monitor to reconnect');
    await (await request(`${second.url}/api/v2/blog/posts?search=after-restart`)).body.dump();
    await until(() => urls().some((url) => url.includes('after-restart')), "the new instance's line");
    child.kill('SIGINT');
    expect(await exited).toBe(0);

    const shown = stdout.split('\n').filter(Boolean);
    expect(new Set(shown).size).toBe(shown.length);
    expect(urls().filter((url) => url.includes('before-restart')).length).toBeGreaterThan(0);
    expect(lines().map((line) => line.time)).toEqual(
      lines()
        .map((line) => line.time)
        .sort(),
    );
  });
});
