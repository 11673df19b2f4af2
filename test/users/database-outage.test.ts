/**
 * The user service while its PostgreSQL cannot be reached: instance C
 * reaches the database through a TCP proxy the test cuts and restores (the
 * server itself runs on for the test's other connections, and for instance
 * A, connected directly). Calls fail fast with UNAVAILABLE and say why,
 * never INTERNAL; a transaction cut off in the middle is UNAVAILABLE and
 * leaves nothing behind; once the database is back, C serves again without
 * a restart, and its watchers get what A changed meanwhile.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createServer, connect, type Server, type Socket } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { adminSql } from '../helpers/pg-admin.js';
import { useFileDatabase } from '../helpers/postgres.js';
import { Sandbox } from '../helpers/cli.js';
import { emptyDatabase } from '../helpers/backend-store.js';
import { bearer, rawClient, rawUnary, startUserServer, waitFor, type RawClient, type UserServer } from './cli/harness.js';
import { failure } from '../helpers/user-client.js';

/** A TCP proxy to the database that the test can cut (refusing and dropping every connection) and restore, on the same port. */
class CuttableProxy {
  readonly #sockets = new Set<Socket>();
  #server: Server | undefined;
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async open(): Promise<void> {
    const server = createServer((socket) => {
      const upstream = connect(this.target.port, this.target.host);
      for (const end of [socket, upstream]) {
        this.#sockets.add(end);
        end.on('close', () => this.#sockets.delete(end));
        end.on('error', () => {
          socket.destroy();
          upstream.destroy();
        });
      }
      socket.pipe(upstream).pipe(socket);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
    this.#server = server;
  }

  async cut(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}

const database = useFileDatabase();
let proxy: CuttableProxy;
let a: UserServer;
let c: UserServer;
const clients: RawClient[] = [];

beforeEach(async () => {
  await emptyDatabase(database.url);
  const url = new URL(database.url);
  proxy = new CuttableProxy({ host: url.hostname, port: Number(url.port) });
  await proxy.open();
  url.port = String(proxy.port);
  a = await startUserServer({ store: { kind: 'postgres', url: database.url, poolSize: 3 } });
  // A time-out longer than the tests wait on a lock, so that what fails is the connection, not the statement.
  c = await startUserServer({ store: { kind: 'postgres', url: url.href, poolSize: 3, timeoutMs: 10_000 } });
});
afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  // Closed while the database is reachable: a pool closing with the database away waits out its time-out.
  await Promise.all([a.close(), c.close()]);
  await proxy.cut();
});

function client(server: UserServer): RawClient {
  const made = rawClient(server.address);
  clients.push(made);
  return made;
}

const newUser = (name: string) => ({ username: name, email: `${name}@example.com`, password: 'correct-horse', full_name: '' });

function watch(raw: RawClient, token: string) {
  const call = (raw.WatchUserChanges as (request: unknown, metadata: grpc.Metadata) => grpc.ClientReadableStream<{ type: string; user: { username: string } }>)(
    {},
    bearer(token),
  );
  const events: { type: string; user: { username: string } }[] = [];
  let ended: { code: string; details: string } | undefined;
  call.on('data', (event) => events.push(event));
  call.on('error', (error: grpc.ServiceError) => {
    ended = { code: grpc.status[error.code] ?? String(error.code), details: error.details };
  });
  return { call, events, ended: () => ended };
}

describe('a database that cannot be reached', () => {
  it('answers UNAVAILABLE saying so, for reads, writes, lists and new watches, and serves again once it is back', async () => {
    const raw = client(c);
    const user = (await rawUnary<{ user: { id: string } }>(raw, 'CreateUser', newUser('olga'))).user;
    await proxy.cut();

    const unavailable = { code: 'UNAVAILABLE', details: expect.stringContaining('the database is unavailable, try again shortly') };
    expect(await failure(rawUnary(raw, 'GetUser', { user_id: user.id }, c.token))).toEqual(unavailable);
    expect(await failure(rawUnary(raw, 'CreateUser', newUser('petra')))).toEqual(unavailable);
    expect(await failure(rawUnary(raw, 'UpdateUser', { user_id: user.id, user: { full_name: 'O' } }, c.token))).toEqual(unavailable);
    const list = (raw.ListUsers as (request: unknown, metadata: grpc.Metadata) => grpc.ClientReadableStream<unknown>)({}, bearer(c.token));
    expect(
      await failure(
        new Promise((resolve, reject) =>
          list
            .on('error', reject)
            .on('end', resolve)
            .on('data', () => undefined),
        ),
      ),
    ).toEqual(unavailable);
    const refused = watch(raw, c.token);
    await waitFor(() => refused.ended() !== undefined, 'the watch to be refused');
    expect(refused.ended()).toEqual(unavailable);
    // The CLI says that serve answered and its database did not, not that serve cannot be reached.
    const sb = new Sandbox();
    try {
      const get = await sb.run(['users', 'get', user.id, '--addr', c.address, '--token', c.token]);
      expect(get.code).toBe(5);
      expect(get.stderr).toContain(`UNAVAILABLE: the user service at ${c.address} answers, but the database is unavailable, try again shortly`);
      expect(get.stderr).toContain('/health/ready');
      expect(get.stderr).not.toContain('is `miniapp serve` running?');
    } finally {
      sb.dispose();
    }

    await proxy.open();
    expect((await rawUnary<{ username: string }>(raw, 'GetUser', { user_id: user.id }, c.token)).username).toBe('olga');
    expect((await rawUnary<{ user: { username: string } }>(raw, 'CreateUser', newUser('petra'))).user.username).toBe('petra');
  });

  it('answers UNAVAILABLE for a transaction cut off in the middle, which leaves nothing behind', async () => {
    // The admin holds the counter of the change log: C's create inserts its user, then waits for the counter.
    const lock = adminSql(database.url);
    await lock`BEGIN`;
    await lock`SELECT value FROM counters WHERE name = 'user_events' FOR UPDATE`;
    const creating = failure(rawUnary(client(c), 'CreateUser', newUser('quinn')));
    await until(
      async () => (await database.admin`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE counters%'`).length === 1,
    );
    await proxy.cut();
    expect(await creating).toEqual({ code: 'UNAVAILABLE', details: expect.stringContaining('the database is unavailable') });
    await lock`ROLLBACK`;
    await lock.end();
    expect(await database.admin`SELECT username FROM users`).toEqual([]);
    await proxy.open();
    expect((await rawUnary<{ user: { username: string } }>(client(c), 'CreateUser', newUser('quinn'))).user.username).toBe('quinn');
  });

  it('gives a watcher on C, once the database is back, the changes made through A meanwhile', async () => {
    const watcher = watch(client(c), c.token);
    await waitFor(() => c.running.users.watcherCount() === 1, 'the watcher on C');
    await proxy.cut();
    const raw = client(a);
    for (const name of ['rosa', 'sven']) await rawUnary(raw, 'CreateUser', newUser(name));
    await proxy.open();
    await waitFor(() => watcher.events.length === 2, 'the changes made meanwhile', 30_000);
    expect(watcher.events.map((e) => [e.type, e.user.username])).toEqual([
      ['CREATED', 'rosa'],
      ['CREATED', 'sven'],
    ]);
    expect(watcher.ended()).toBeUndefined();
  });
});

async function until(condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
