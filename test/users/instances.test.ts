/**
 * Two instances of `miniapp serve`, A and B, on one PostgreSQL database,
 * each with its own gRPC port: what one instance does, the other's clients
 * see (watch, chat, uniqueness, the admin token), and a watcher on B whose
 * LISTEN connection is killed loses nothing made meanwhile.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { Sandbox } from '../helpers/cli.js';
import { useFileDatabase } from '../helpers/postgres.js';
import { emptyDatabase } from '../helpers/backend-store.js';
import { bearer, rawClient, rawUnary, runLive, startUserServer, waitFor, type RawClient, type UserServer } from './cli/harness.js';
import type { StoreLocation } from '../../src/store/store.js';
import { serviceDefinition } from '../../src/grpc/protos.js';

const database = useFileDatabase();
let sb: Sandbox;
let a: UserServer;
let b: UserServer;
let later: { close(): unknown }[] = [];

const on = (url = database.url): StoreLocation => ({ kind: 'postgres', url, poolSize: 5 });

beforeEach(async () => {
  await emptyDatabase(database.url);
  sb = new Sandbox();
  // Together, on an empty database: each migrates or finds it migrated, and one of them creates the admin token.
  [a, b] = await Promise.all([startUserServer({ store: on() }), startUserServer({ store: on() })]);
});
afterEach(async () => {
  for (const item of later.reverse()) await item.close();
  later = [];
  await Promise.all([a.close(), b.close()]);
  sb.dispose();
});

function client(server: UserServer): RawClient {
  const made = rawClient(server.address);
  later.push(made);
  return made;
}

const newUser = (name: string, email = `${name}@example.com`) => ({ username: name, email, password: 'correct-horse', full_name: '' });

async function status(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'OK';
  } catch (error) {
    return grpc.status[(error as grpc.ServiceError).code] ?? String(error);
  }
}

function listAll(raw: RawClient, token: string): Promise<{ id: string; username: string }[]> {
  return new Promise((resolve, reject) => {
    const users: { id: string; username: string }[] = [];
    const call = (raw.ListUsers as (request: unknown, metadata: grpc.Metadata) => grpc.ClientReadableStream<{ id: string; username: string }>)(
      {},
      bearer(token),
    );
    call.on('data', (user) => users.push(user));
    call.on('end', () => resolve(users));
    call.on('error', reject);
  });
}

interface WatchEvent {
  type: string;
  user: { id: string; username: string; full_name: string };
}

function watch(raw: RawClient, token: string): { events: WatchEvent[]; call: grpc.ClientReadableStream<WatchEvent> } {
  const call = (raw.WatchUserChanges as (request: unknown, metadata: grpc.Metadata) => grpc.ClientReadableStream<WatchEvent>)({}, bearer(token));
  const events: WatchEvent[] = [];
  call.on('data', (event: WatchEvent) => events.push(event));
  call.on('error', () => undefined);
  later.push({ close: () => call.cancel() });
  return { events, call };
}

interface Chat {
  heard: { room: string; sender: string; text: string }[];
  call: grpc.ClientDuplexStream<unknown, { room: string; sender: string; text: string }>;
}

function chat(raw: RawClient, token: string, room: string): Chat {
  const call = (raw.UserChat as (metadata: grpc.Metadata) => Chat['call'])(bearer(token));
  const heard: Chat['heard'] = [];
  call.on('data', (message) => heard.push(message));
  call.on('error', () => undefined);
  call.write({ room, sender: '', text: '' });
  later.push({ close: () => call.end() });
  return { heard, call };
}

describe('two instances on one PostgreSQL', () => {
  it('have the same admin token, which either accepts', async () => {
    expect(a.token).toMatch(/^mat_/);
    expect(b.token).toBe(a.token);
    const created = await rawUnary<{ user: { id: string } }>(client(a), 'CreateUser', newUser('tina'));
    expect((await rawUnary<{ username: string }>(client(b), 'GetUser', { user_id: created.user.id }, a.token)).username).toBe('tina');
    const rows = await database.admin`SELECT count(*)::int AS n FROM server_secrets WHERE name = 'admin_token'`;
    expect(rows[0]!.n).toBe(1);
  });

  it('`miniapp users watch` on B prints CREATED, UPDATED and DELETED for changes made through A', async () => {
    const watching = runLive(sb, ['users', 'watch', '--count', '3', '--json'], b.env);
    await waitFor(() => b.running.users.watcherCount() === 1, 'the watcher on B');
    const raw = client(a);
    const user = (await rawUnary<{ user: { id: string } }>(raw, 'CreateUser', newUser('walt'))).user;
    await rawUnary(raw, 'UpdateUser', { user_id: user.id, user: { full_name: 'Walt W' }, update_mask: { paths: ['full_name'] } }, a.token);
    await rawUnary(raw, 'DeleteUser', { user_id: user.id }, a.token);
    expect(await watching.done, watching.stderr.text).toBe(0);
    const events = watching.stdout.text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { type: string; user: { id: number; username: string; full_name: string } });
    expect(events.map((e) => [e.type, e.user.id, e.user.username, e.user.full_name])).toEqual([
      ['CREATED', Number(user.id), 'walt', ''],
      ['UPDATED', Number(user.id), 'walt', 'Walt W'],
      ['DELETED', Number(user.id), 'walt', 'Walt W'],
    ]);
    await waitFor(() => b.running.users.watcherCount() === 0, 'the watcher on B to leave');
  });

  it('streams the changes of both instances to watchers on both, in one order', async () => {
    const onA = watch(client(a), a.token);
    const onB = watch(client(b), b.token);
    await waitFor(() => a.running.users.watcherCount() === 1 && b.running.users.watcherCount() === 1, 'both watchers');
    const [toA, toB] = [client(a), client(b)];
    await Promise.all(Array.from({ length: 20 }, (_, i) => rawUnary(i % 2 ? toA : toB, 'CreateUser', newUser(`both${i}`))));
    await waitFor(() => onA.events.length === 20 && onB.events.length === 20, 'every event on both');
    const names = (events: WatchEvent[]) => events.map((e) => e.user.username);
    expect(new Set(names(onA.events)).size).toBe(20);
    // One order for everyone: the order of the log, which is the order of the commits.
    const log = await database.admin`SELECT payload FROM user_events ORDER BY seq`;
    const logged = log.map((row) => (JSON.parse(row.payload as string) as { username: string }).username);
    expect(names(onA.events)).toEqual(logged);
    expect(names(onB.events)).toEqual(logged);
  });

  it('passes a chat message sent on A to the participants of its room on B (and on A), not to its sender', async () => {
    const ann = chat(client(a), a.token, 'lobby');
    const ada = chat(client(a), a.token, 'lobby');
    const ben = chat(client(b), b.token, 'lobby');
    const bob = chat(client(b), b.token, 'elsewhere');
    await waitFor(() => a.running.users.chatParticipantCount() === 2 && b.running.users.chatParticipantCount() === 2, 'everyone to join');
    ann.call.write({ room: 'lobby', sender: '', text: 'x'.repeat(4096) });
    ben.call.write({ room: 'lobby', sender: '', text: 'hello from B' });
    bob.call.write({ room: 'elsewhere', sender: '', text: 'anyone?' });
    await waitFor(() => ben.heard.length === 1 && ada.heard.length === 2 && ann.heard.length === 1, 'the lobby messages');
    expect(ben.heard.map((m) => [m.room, m.sender, m.text.length])).toEqual([['lobby', 'admin', 4096]]);
    expect(ann.heard.map((m) => m.text)).toEqual(['hello from B']);
    expect(ada.heard.map((m) => m.text).sort()).toEqual(['hello from B', 'x'.repeat(4096)]);
    expect(bob.heard).toEqual([]);
  });

  it("passes an operators' chat message (monitoring.v1 Chat) sent on A to the operators on B", async () => {
    const { Client } = serviceDefinition('monitoring.v1.MonitoringService');
    const operators = (server: UserServer) => {
      const raw = new Client(server.address, grpc.credentials.createInsecure()) as grpc.Client &
        Record<string, (metadata: grpc.Metadata) => grpc.ClientDuplexStream<unknown, { sender: string; text: string }>>;
      later.push(raw);
      const call = raw.Chat!(bearer(server.token));
      const heard: { sender: string; text: string }[] = [];
      call.on('data', (message) => heard.push(message));
      call.on('error', () => undefined);
      later.push({ close: () => call.end() });
      return { call, heard };
    };
    const ann = operators(a);
    const ben = operators(b);
    await waitFor(() => a.running.monitoring.chatParticipants() === 1 && b.running.monitoring.chatParticipants() === 1, 'both operators');
    ann.call.write({ sender: 'ann', text: 'deploying v2 on A' });
    await waitFor(() => ben.heard.length === 1, 'the message on B');
    expect(ben.heard[0]).toMatchObject({ sender: 'ann', text: 'deploying v2 on A' });
    ben.call.write({ sender: 'ben', text: 'seen on B' });
    await waitFor(() => ann.heard.length === 1, 'the answer on A');
    expect(ann.heard[0]).toMatchObject({ sender: 'ben', text: 'seen on B' });
    expect(ben.heard).toHaveLength(1);
  });

  it('give exactly 20 users for 200 concurrent creates over 20 usernames, split across A and B', async () => {
    const [toA, toB] = [client(a), client(b)];
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => status(rawUnary(i % 2 ? toA : toB, 'CreateUser', newUser(`user${i % 20}`, `u${i}@example.com`)))),
    );
    expect(results.filter((r) => r === 'OK')).toHaveLength(20);
    expect(results.filter((r) => r === 'ALREADY_EXISTS')).toHaveLength(180);
    for (const [raw, token] of [
      [toA, a.token],
      [toB, b.token],
    ] as const) {
      const users = await listAll(raw, token);
      expect(users.map((u) => u.username).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `user${i}`).sort());
    }
  });

  it('a watcher on B whose LISTEN connection is killed loses no change made through A meanwhile', async () => {
    // B connects as a role of its own, so that the test can find its LISTEN connection and keep it from coming back for a while.
    const role = `b_${database.url.split('/').pop()}`;
    await database.admin.unsafe(`CREATE ROLE ${role} LOGIN SUPERUSER PASSWORD 'b-secret'`);
    later.push({ close: () => database.admin.unsafe(`DROP ROLE IF EXISTS ${role}`) });
    const url = new URL(database.url);
    url.username = role;
    url.password = 'b-secret';
    const b2 = await startUserServer({ store: on(url.href) });
    later.push(b2);
    const watcher = watch(client(b2), b2.token);
    await waitFor(() => b2.running.users.watcherCount() === 1, 'the watcher on B');
    const raw = client(a);
    await rawUnary(raw, 'CreateUser', newUser('early'));
    await waitFor(() => watcher.events.length === 1, 'the first event');

    await database.admin.unsafe(`ALTER ROLE ${role} NOLOGIN`);
    const killed = await database.admin.unsafe(
      `SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE usename = '${role}' AND application_name LIKE '%(signals)'`,
    );
    expect(killed.map((row) => row.done)).toEqual([true]);
    const made = [];
    for (const name of ['during1', 'during2', 'during3']) made.push((await rawUnary<{ user: { id: string } }>(raw, 'CreateUser', newUser(name))).user);
    await rawUnary(raw, 'UpdateUser', { user_id: made[0]!.id, user: { full_name: 'During One' }, update_mask: { paths: ['full_name'] } }, a.token);
    await rawUnary(raw, 'DeleteUser', { user_id: made[1]!.id }, a.token);
    await database.admin.unsafe(`ALTER ROLE ${role} LOGIN`);

    await waitFor(() => watcher.events.length >= 6, 'the changes made meanwhile', 15_000);
    expect(watcher.events.map((e) => [e.type, e.user.username])).toEqual([
      ['CREATED', 'early'],
      ['CREATED', 'during1'],
      ['CREATED', 'during2'],
      ['CREATED', 'during3'],
      ['UPDATED', 'during1'],
      ['DELETED', 'during2'],
    ]);
    // B listens again, and hears what follows.
    await until(
      async () => (await database.admin.unsafe(`SELECT 1 FROM pg_stat_activity WHERE usename = '${role}' AND application_name LIKE '%(signals)'`)).length === 1,
      'B to listen again',
    );
    await rawUnary(raw, 'CreateUser', newUser('after'));
    await waitFor(() => watcher.events.length === 7, 'the change after');
    expect(watcher.events[6]).toMatchObject({ type: 'CREATED', user: { username: 'after' } });
  });
});

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
