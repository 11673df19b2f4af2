/**
 * WatchUserChanges resumes after a sequence number (issue 19, finding 6):
 * each UserEvent carries its number in the change log, and a watch with
 * resume_after gets every change after it once, in order, filters applied,
 * before the live ones; a position that cannot be resumed is OUT_OF_RANGE.
 * `miniapp users watch` resumes by itself when its server is killed with
 * SIGKILL: restarted on the same SQLite data dir, or, on PostgreSQL, when a
 * load balancer (the fault proxy) moves it to another instance. Checked
 * against the log in the database: 0 changes missing, 0 printed twice.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { BACKENDS, createTestDatabase, type Backend, type TestDatabase } from '../helpers/postgres.js';
import { UserClients, type AnyClient } from '../helpers/user-client.js';
import { adminSql } from '../helpers/pg-admin.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { startServeProcess, type ServeProcess } from '../helpers/chaos.js';
import { BIN } from '../helpers/launcher.js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { databasePath } from '../../src/store/database.js';

interface Event {
  type: string;
  sequence: string;
  user: { id: string; username: string } | null;
}

const newUser = (name: string) => ({ username: name, email: `${name}@example.com`, password: 'password-1', full_name: '' });

function unary(client: AnyClient, method: string, request: unknown, metadata: grpc.Metadata): Promise<any> {
  return new Promise((resolve, reject) =>
    client[method](request, metadata, (error: grpc.ServiceError | null, response: unknown) => (error ? reject(error) : resolve(response))),
  );
}

/** A watch call: its events as they come, and how it ended. */
function watchCall(client: AnyClient, request: Record<string, unknown>, metadata: grpc.Metadata) {
  const events: Event[] = [];
  const call = client.WatchUserChanges(request, metadata) as grpc.ClientReadableStream<Event>;
  // Live once the server says where the watch starts (its first metadata: the position, or with the first change).
  const live = new Promise<void>((resolve) => call.once('metadata', () => resolve()));
  const ended = new Promise<grpc.ServiceError | undefined>((resolve) => {
    call.on('data', (event: Event) => events.push(event));
    call.on('error', (error: grpc.ServiceError) => resolve(error));
    call.on('end', () => resolve(undefined));
  });
  return { events, ended, live, cancel: () => call.cancel() };
}

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(BACKENDS)('WatchUserChanges with resume_after, on %s', (backend) => {
  let clients: UserClients;
  let client: AnyClient;
  let database: TestDatabase | undefined;
  let dataDir: string | undefined;
  const calls: { cancel: () => void }[] = [];

  beforeAll(async () => {
    if (backend === 'postgres') {
      database = await createTestDatabase();
      clients = await UserClients.start({ kind: 'postgres', url: database.url, poolSize: 4 });
    } else {
      dataDir = mkdtempSync(join(tmpdir(), 'miniapp-resume-'));
      clients = await UserClients.start({ kind: 'sqlite', dataDir });
    }
    client = clients.client();
    // Five changes: users one to four, then an update of user two.
    for (const name of ['ann', 'bob', 'cyd', 'dan']) await unary(client, 'CreateUser', newUser(name), clients.auth());
    await unary(client, 'UpdateUser', { user_id: '2', user: { full_name: 'Bob B' }, update_mask: { paths: ['full_name'] } }, clients.auth());
  });
  afterAll(async () => {
    for (const call of calls) call.cancel();
    await clients?.close();
    await database?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('numbers each event, and sends every change after resume_after once, in order, before the live ones', async () => {
    const watch = watchCall(client, { resume_after: '2' }, clients.auth());
    calls.push(watch);
    await until(() => watch.events.length === 3, 'the three changes after 2');
    await unary(client, 'CreateUser', newUser('eve'), clients.auth());
    await until(() => watch.events.length === 4, 'the live change');
    expect(watch.events.map((e) => [e.sequence, e.type, e.user?.username])).toEqual([
      ['3', 'CREATED', 'cyd'],
      ['4', 'CREATED', 'dan'],
      ['5', 'UPDATED', 'bob'],
      ['6', 'CREATED', 'eve'],
    ]);
    watch.cancel();
  });

  it('applies the filters to the changes it catches up on', async () => {
    const watch = watchCall(client, { resume_after: '0', types: ['UPDATED'] }, clients.auth());
    calls.push(watch);
    const byUser = watchCall(client, { resume_after: '0', user_id: '3' }, clients.auth());
    calls.push(byUser);
    await until(() => watch.events.length === 1 && byUser.events.length === 1, 'the matching changes');
    expect(watch.events.map((e) => [e.sequence, e.user?.username])).toEqual([['5', 'bob']]);
    expect(byUser.events.map((e) => [e.sequence, e.user?.username])).toEqual([['3', 'cyd']]);
    watch.cancel();
    byUser.cancel();
  });

  it('resumes at the head with nothing to catch up, and an old client without resume_after starts from now', async () => {
    const head = watchCall(client, { resume_after: '6' }, clients.auth());
    const now = watchCall(client, {}, clients.auth());
    calls.push(head, now);
    // Both live as their client sees it (the server said where each starts), not only counted by the server: a watch
    // from now is placed when its join reads the log, which may be after a change made as soon as it was counted.
    await Promise.all([head.live, now.live]);
    await until(() => clients.running.users.watcherCount() >= 2, 'both watchers');
    await unary(client, 'CreateUser', newUser('fay'), clients.auth());
    await until(() => head.events.length === 1 && now.events.length === 1, 'the new change on both');
    expect(head.events.map((e) => e.sequence)).toEqual(['7']);
    expect(now.events.map((e) => e.sequence)).toEqual(['7']);
    head.cancel();
    now.cancel();
  });

  it('refuses a position past the last change, a negative one, and one whose changes were trimmed, with OUT_OF_RANGE or INVALID_ARGUMENT', async () => {
    const past = watchCall(client, { resume_after: '1000' }, clients.auth());
    expect((await past.ended)?.code).toBe(grpc.status.OUT_OF_RANGE);
    expect((await past.ended)?.details).toContain('past the last change');
    const negative = watchCall(client, { resume_after: '-1' }, clients.auth());
    expect((await negative.ended)?.code).toBe(grpc.status.INVALID_ARGUMENT);

    // What the hourly trim does to old changes, done now: changes 1 to 4 are gone from the log.
    if (backend === 'postgres') {
      const admin = adminSql(database!.url);
      await admin.unsafe('DELETE FROM user_events WHERE seq <= 4');
      await admin.end();
    } else {
      const db = new Database(databasePath(dataDir!));
      db.pragma('busy_timeout = 5000');
      db.prepare('DELETE FROM user_events WHERE seq <= 4').run();
      db.close();
    }
    const trimmed = watchCall(client, { resume_after: '2' }, clients.auth());
    const error = await trimmed.ended;
    expect(error?.code).toBe(grpc.status.OUT_OF_RANGE);
    expect(error?.details).toContain('no longer kept');
    expect(trimmed.events).toEqual([]);
    // Resuming after the last change that is gone still works: 5 on is all there.
    const fine = watchCall(client, { resume_after: '4' }, clients.auth());
    calls.push(fine);
    await until(() => fine.events.length === 3, 'changes 5 to 7');
    expect(fine.events.map((e) => e.sequence)).toEqual(['5', '6', '7']);
    fine.cancel();
  });
});

/**
 * `miniapp users watch --json` as a process, pointed at a serve process that
 * the test kills with SIGKILL while a writer keeps creating users.
 */
describe.each(BACKENDS)('miniapp users watch when its server is killed, on %s', (backend: Backend) => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  function grpcClient(address: string): AnyClient {
    const { Client } = userServiceDefinition();
    const made = new Client(address, grpc.credentials.createInsecure()) as AnyClient;
    cleanups.push(() => made.close());
    return made;
  }

  function startWatcher(address: string, token: string) {
    const config = mkdtempSync(join(tmpdir(), 'miniapp-watcher-'));
    cleanups.push(() => rmSync(config, { recursive: true, force: true }));
    // From the first change on (--resume-after 0): what it prints is comparable with the whole log.
    const child: ChildProcess = spawn(process.execPath, [BIN, 'users', 'watch', '--json', '--resume-after', '0'], {
      env: {
        PATH: process.env.PATH,
        HOME: config,
        MINIAPP_CONFIG_DIR: config,
        MINIAPP_GRPC_ADDR: address,
        MINIAPP_GRPC_TOKEN: token,
        MINIAPP_GRPC_RECONNECT_MS: '50',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(() => void child.kill('SIGKILL'));
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    return {
      lines: () =>
        stdout
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as { sequence: number; type: string; user: { username: string } }),
      stderr: () => stderr,
      stop: async () => {
        child.kill('SIGINT');
        return exited;
      },
    };
  }

  /** Creates users through `client()` until `total` are acknowledged, retrying what the dead server refused. */
  function writer(client: () => AnyClient, token: string, total: number) {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    let acknowledged = 0;
    let next = 0;
    const done = (async () => {
      const workers = Array.from({ length: 6 }, async () => {
        while (acknowledged < total) {
          const name = `w${next++}`;
          try {
            await unary(client(), 'CreateUser', newUser(name), metadata);
            acknowledged++;
          } catch {
            await new Promise((resolve) => setTimeout(resolve, 30));
          }
        }
      });
      await Promise.all(workers);
    })();
    return { done, acknowledged: () => acknowledged };
  }

  it('resumes after the last change it printed: none missing, none twice', async () => {
    const total = 1_200;
    let readLog: () => Promise<{ seq: number; username: string }[]>;
    let watcher: ReturnType<typeof startWatcher>;
    let write: ReturnType<typeof writer>;
    if (backend === 'postgres') {
      const database = await createTestDatabase();
      cleanups.push(() => database.drop());
      const a = await startServeProcess({ databaseUrl: database.url, poolSize: 4 });
      cleanups.push(() => a.dispose());
      const b = await startServeProcess({ databaseUrl: database.url, poolSize: 4 });
      cleanups.push(() => b.dispose());
      // The load balancer in front of A: the watcher's way in.
      const [host, port] = a.info.grpc.address.split(':');
      const balancer: TcpProxy = await startTcpProxy({ host: host!, port: Number(port) });
      cleanups.push(() => balancer.stop());
      watcher = startWatcher(`127.0.0.1:${balancer.port}`, a.info.adminToken);
      const toB = grpcClient(b.info.grpc.address);
      write = writer(() => toB, a.info.adminToken, total);
      await until(() => watcher.lines().length >= total / 3, 'a third of the changes');
      const [bHost, bPort] = b.info.grpc.address.split(':');
      balancer.retarget({ host: bHost!, port: Number(bPort) });
      a.child.kill('SIGKILL');
      await a.exited;
      readLog = async () => {
        const admin = adminSql(database.url);
        const rows = await admin<{ seq: number; payload: string }>`SELECT seq, payload FROM user_events ORDER BY seq`;
        await admin.end();
        return rows.map((row) => ({ seq: Number(row.seq), username: JSON.parse(row.payload).username }));
      };
    } else {
      const home = mkdtempSync(join(tmpdir(), 'miniapp-resume-home-'));
      cleanups.push(() => rmSync(home, { recursive: true, force: true }));
      let serve: ServeProcess = await startServeProcess({ home });
      cleanups.push(() => serve.dispose());
      const address = serve.info.grpc.address;
      const [, grpcPort] = address.split(':');
      const httpPort = new URL(serve.info.url).port;
      watcher = startWatcher(address, serve.info.adminToken);
      let current = grpcClient(address);
      write = writer(() => current, serve.info.adminToken, total);
      await until(() => watcher.lines().length >= total / 3, 'a third of the changes');
      serve.child.kill('SIGKILL');
      await serve.exited;
      // The same data dir and ports: the watcher and the writer find it where it was.
      serve = await startServeProcess({ home, port: Number(httpPort), grpcPort: Number(grpcPort) });
      current = grpcClient(address);
      readLog = async () => {
        const db = new Database(databasePath(join(home, 'data')), { readonly: true });
        const rows = db.prepare('SELECT seq, payload FROM user_events ORDER BY seq').all() as { seq: number; payload: string }[];
        db.close();
        return rows.map((row) => ({ seq: row.seq, username: JSON.parse(row.payload).username }));
      };
    }
    await write.done;
    const log = await readLog();
    expect(log.length).toBeGreaterThanOrEqual(total);
    await until(() => watcher.lines().length >= log.length, `the watcher to print all ${log.length} changes`, 30_000);
    expect(await watcher.stop()).toBe(0);
    const printed = watcher.lines();
    expect(printed.map((event) => event.sequence)).toEqual(log.map((row) => row.seq));
    expect(printed.map((event) => event.user.username)).toEqual(log.map((row) => row.username));
    expect(watcher.stderr()).toMatch(/reconnected to \S+; resuming after change \d+/);
  }, 120_000);
});
