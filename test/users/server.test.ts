/**
 * The gRPC user service through a real server (startServe, port 0) and
 * real grpc-js clients built from the same proto, on either backend: SQLite
 * in a data dir, and PostgreSQL.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { ADMIN_TOKEN_FILE } from '../../src/auth/tokens.js';
import { makePki, type Pki } from '../helpers/certs.js';
import { login } from '../helpers/user-client.js';
import { BACKENDS } from '../helpers/postgres.js';
import { useBackendStore } from '../helpers/backend-store.js';
import { waitFor } from './cli/harness.js';

describe.each(BACKENDS)('user service on %s', (backend) => {
  let dataDir: string;
  let running: RunningServe;
  let clients: grpc.Client[] = [];
  const store = useBackendStore(backend, () => ({ kind: 'sqlite', dataDir }));

  async function start(grpcOptions: { port?: number; tls?: { cert: string; key: string } } = {}, location = store.location()) {
    return startTestServe({
      store: location,
      grpc: { host: '127.0.0.1', port: grpcOptions.port ?? 0, tls: grpcOptions.tls },
      shutdownDeadlineMs: 500,
    });
  }

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'miniapp-users-'));
    running = await start();
  });
  afterEach(async () => {
    for (const client of clients) client.close();
    clients = [];
    await running.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  type AnyClient = grpc.Client & Record<string, any>;

  function client(address = running.grpc!.address, credentials = grpc.credentials.createInsecure(), options: grpc.ChannelOptions = {}): AnyClient {
    const { Client } = userServiceDefinition();
    const c = new Client(address, credentials, options) as AnyClient;
    clients.push(c);
    return c;
  }

  function auth(token = running.adminToken!): grpc.Metadata {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    return metadata;
  }

  function unary(c: AnyClient, method: string, req: unknown, metadata?: grpc.Metadata): Promise<any> {
    return new Promise((resolve, reject) => {
      const done = (error: grpc.ServiceError | null, response: unknown) => (error ? reject(error) : resolve(response));
      if (metadata) c[method](req, metadata, done);
      else c[method](req, done);
    });
  }

  async function status(promise: Promise<unknown>): Promise<string> {
    try {
      await promise;
      return 'OK';
    } catch (error) {
      return grpc.status[(error as grpc.ServiceError).code]!;
    }
  }

  function collect(call: grpc.ClientReadableStream<any>): Promise<any[]> {
    return new Promise((resolve, reject) => {
      const items: any[] = [];
      call.on('data', (item) => items.push(item));
      call.on('end', () => resolve(items));
      call.on('error', reject);
    });
  }

  const newUser = (n: number | string, extra: Record<string, string> = {}) => ({
    username: `user${n}`,
    email: `user${n}@example.com`,
    password: 'correct horse',
    full_name: `User ${n}`,
    ...extra,
  });

  async function create(c: AnyClient, n: number | string, extra: Record<string, string> = {}) {
    return (await unary(c, 'CreateUser', newUser(n, extra))).user;
  }

  describe('CreateUser', () => {
    it('creates users with sequential ids from 1, active, with a message, and no password in the answer', async () => {
      const c = client();
      const first = await unary(c, 'CreateUser', newUser(1));
      expect(first.user).toMatchObject({ id: '1', username: 'user1', email: 'user1@example.com', full_name: 'User 1', is_active: true, roles: [] });
      expect(first.user.created_at.seconds).toMatch(/^\d+$/);
      expect(first.message).toContain('created');
      expect(JSON.stringify(first)).not.toContain('correct horse');
      expect((await create(c, 2)).id).toBe('2');
    });

    it('is public, and validates each field by name', async () => {
      const c = client();
      const error = await unary(c, 'CreateUser', { username: '', email: '', password: '' }).catch((e: grpc.ServiceError) => e);
      expect(error.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(error.details).toContain('username is required');
      expect(error.details).toContain('email is required');
      for (const [fields, text] of [
        [{ username: 'ab' }, 'username must be 3 to 20 characters'],
        [{ username: 'a'.repeat(21) }, 'username must be 3 to 20 characters'],
        [{ email: 'not-an-email' }, 'email is not a valid e-mail address'],
        [{ password: 'short' }, 'password must be at least 8 characters'],
      ] as const) {
        const e = await unary(c, 'CreateUser', newUser(9, fields as Record<string, string>)).catch((x: grpc.ServiceError) => x);
        expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
        expect(e.details).toContain(text);
      }
    });

    it('answers ALREADY_EXISTS for a duplicate username or e-mail, in any case', async () => {
      const c = client();
      await create(c, 1);
      expect(await status(unary(c, 'CreateUser', newUser(1, { email: 'other@example.com' })))).toBe('ALREADY_EXISTS');
      expect(await status(unary(c, 'CreateUser', newUser(2, { email: 'USER1@example.com' })))).toBe('ALREADY_EXISTS');
      expect(await status(unary(c, 'CreateUser', newUser(3, { username: 'USER1' })))).toBe('ALREADY_EXISTS');
    });

    it('gives exactly 20 users for 200 concurrent creates over 20 usernames', async () => {
      const c = client();
      const results = await Promise.all(Array.from({ length: 200 }, (_, i) => status(unary(c, 'CreateUser', newUser(i % 20, { email: `u${i}@example.com` })))));
      expect(results.filter((r) => r === 'OK')).toHaveLength(20);
      expect(results.filter((r) => r === 'ALREADY_EXISTS')).toHaveLength(180);
      const listed = await collect(c.ListUsers({ page: 0, page_size: 0, filter: '' }, auth()));
      expect(listed).toHaveLength(20);
      expect(new Set(listed.map((u) => u.username)).size).toBe(20);
      const ids = listed.map((u) => Number(u.id)).sort((a, b) => a - b);
      expect(new Set(ids).size).toBe(20);
      // SQLite hands out the ids of refused rows again; a PostgreSQL sequence never does (refused rows leave gaps).
      if (backend === 'sqlite') expect(ids).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    });
  });

  describe('authentication', () => {
    it('answers UNAUTHENTICATED for missing metadata, a malformed header and a bad token, on every method but CreateUser', async () => {
      const c = client();
      await create(c, 1);
      const bad = new grpc.Metadata();
      bad.set('authorization', 'Bearer nope');
      const malformed = new grpc.Metadata();
      malformed.set('authorization', 'Token x');
      for (const metadata of [new grpc.Metadata(), bad, malformed]) {
        expect(await status(unary(c, 'GetUser', { user_id: '1' }, metadata))).toBe('UNAUTHENTICATED');
        expect(await status(unary(c, 'UpdateUser', { user_id: '1', user: { full_name: 'x' } }, metadata))).toBe('UNAUTHENTICATED');
        expect(await status(unary(c, 'DeleteUser', { user_id: '1' }, metadata))).toBe('UNAUTHENTICATED');
        expect(await status(collect(c.ListUsers({}, metadata)))).toBe('UNAUTHENTICATED');
        expect(await status(collect(c.WatchUserChanges({}, metadata)))).toBe('UNAUTHENTICATED');
      }
    });

    it('lets a user change themselves but not others, nor their own roles or activity', async () => {
      const c = client();
      const alice = await create(c, 'alice');
      const bob = await create(c, 'bob');
      // A user token, as the blog's login issues it.
      const aliceToken = await login(running, 'useralice');

      expect((await unary(c, 'UpdateUser', { user_id: alice.id, user: { full_name: 'Alice A.' } }, auth(aliceToken))).full_name).toBe('Alice A.');
      expect(await status(unary(c, 'UpdateUser', { user_id: bob.id, user: { full_name: 'x' } }, auth(aliceToken)))).toBe('PERMISSION_DENIED');
      expect(await status(unary(c, 'UpdateUser', { user_id: alice.id, user: { roles: ['admin'] }, update_mask: { paths: ['roles'] } }, auth(aliceToken)))).toBe(
        'PERMISSION_DENIED',
      );
      expect(await status(unary(c, 'DeleteUser', { user_id: bob.id }, auth(aliceToken)))).toBe('PERMISSION_DENIED');
      expect(await status(unary(c, 'GetUser', { user_id: bob.id }, auth(aliceToken)))).toBe('OK');
      expect(await status(unary(c, 'DeleteUser', { user_id: alice.id }, auth(aliceToken)))).toBe('OK');
      // Her token went with her.
      expect(await status(unary(c, 'GetUser', { user_id: bob.id }, auth(aliceToken)))).toBe('UNAUTHENTICATED');
    });
  });

  describe('GetUser, UpdateUser, DeleteUser', () => {
    it('answers NOT_FOUND for an unknown user_id and INVALID_ARGUMENT for none', async () => {
      const c = client();
      expect(await status(unary(c, 'GetUser', { user_id: '99' }, auth()))).toBe('NOT_FOUND');
      expect(await status(unary(c, 'UpdateUser', { user_id: '99', user: { full_name: 'x' } }, auth()))).toBe('NOT_FOUND');
      expect(await status(unary(c, 'DeleteUser', { user_id: '99' }, auth()))).toBe('NOT_FOUND');
      expect(await status(unary(c, 'GetUser', { user_id: '0' }, auth()))).toBe('INVALID_ARGUMENT');
    });

    it('answers each of many calls sent at once with its own user, under its own token, and reads a change at once', async () => {
      // On PostgreSQL the calls of one turn share a statement for their tokens and one for their users (BatchedRead):
      // every answer must still be its own question's, whatever else was in the batch.
      const c = client();
      const created = [];
      for (const name of ['ann', 'ben', 'cat', 'dan']) created.push(await create(c, name));
      const annToken = await login(running, 'userann');
      const calls = [];
      for (let i = 0; i < 60; i++) {
        const user = created[i % created.length]!;
        const token = i % 3 === 0 ? annToken : i % 7 === 0 ? 'mat_not-a-token' : running.adminToken!;
        const id = i % 11 === 0 ? '999' : user.id;
        calls.push(
          status(unary(c, 'GetUser', { user_id: id }, auth(token)).then((got) => expect(got.username).toBe(user.username))).then((outcome) => ({
            outcome,
            expected: token === 'mat_not-a-token' ? 'UNAUTHENTICATED' : id === '999' ? 'NOT_FOUND' : 'OK',
          })),
        );
      }
      for (const { outcome, expected } of await Promise.all(calls)) expect(outcome).toBe(expected);

      // A change committed before a call is sent is what that call reads, even among calls sent with it.
      await unary(c, 'UpdateUser', { user_id: created[1]!.id, user: { full_name: 'Ben Changed' } }, auth());
      const after = await Promise.all(created.map((user) => unary(c, 'GetUser', { user_id: user.id }, auth())));
      expect(after.map((user) => user.full_name)).toEqual(['User ann', 'Ben Changed', 'User cat', 'User dan']);
    });

    it('applies update_mask as AIP-134 says', async () => {
      const c = client();
      const user = await create(c, 1);
      // absent mask: non-empty fields replace, empty ones are left alone
      let updated = await unary(c, 'UpdateUser', { user_id: user.id, user: { full_name: 'New Name', email: '' } }, auth());
      expect(updated).toMatchObject({ full_name: 'New Name', email: 'user1@example.com', is_active: true });
      // named paths: exactly those, including false and empty values
      updated = await unary(
        c,
        'UpdateUser',
        { user_id: user.id, user: { is_active: false, roles: ['editor', 'viewer'], full_name: 'ignored' }, update_mask: { paths: ['is_active', 'roles'] } },
        auth(),
      );
      expect(updated).toMatchObject({ is_active: false, roles: ['editor', 'viewer'], full_name: 'New Name' });
      updated = await unary(c, 'UpdateUser', { user_id: user.id, user: { roles: [] }, update_mask: { paths: ['roles'] } }, auth());
      expect(updated.roles).toEqual([]);
      // "*": full replacement
      updated = await unary(
        c,
        'UpdateUser',
        { user_id: user.id, user: { username: 'renamed', email: 'r@example.com', is_active: true }, update_mask: { paths: ['*'] } },
        auth(),
      );
      expect(updated).toMatchObject({ username: 'renamed', email: 'r@example.com', full_name: '', is_active: true, roles: [] });
      // unknown path and invalid values
      const unknown = await unary(c, 'UpdateUser', { user_id: user.id, user: {}, update_mask: { paths: ['password'] } }, auth()).catch((e) => e);
      expect(unknown.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(unknown.details).toContain('"password"');
      expect(await status(unary(c, 'UpdateUser', { user_id: user.id, user: { username: 'x' }, update_mask: { paths: ['username'] } }, auth()))).toBe(
        'INVALID_ARGUMENT',
      );
      await create(c, 2);
      expect(await status(unary(c, 'UpdateUser', { user_id: user.id, user: { username: 'user2' } }, auth()))).toBe('ALREADY_EXISTS');
    });

    it('deletes and answers Empty', async () => {
      const c = client();
      const user = await create(c, 1);
      expect(await unary(c, 'DeleteUser', { user_id: user.id }, auth())).toEqual({});
      expect(await status(unary(c, 'GetUser', { user_id: user.id }, auth()))).toBe('NOT_FOUND');
    });
  });

  describe('ListUsers', () => {
    it('pages, filters case-insensitively, clamps page_size at 100 and reports no more than asked', async () => {
      const c = client();
      for (let i = 1; i <= 25; i++) await create(c, i, { full_name: i % 5 === 0 ? `Kim Special ${i}` : `User ${i}` });
      expect(await collect(c.ListUsers({ page: 0, page_size: 0 }, auth()))).toHaveLength(25);
      const page2 = await collect(c.ListUsers({ page: 2, page_size: 10 }, auth()));
      expect(page2.map((u) => u.id)).toEqual(['11', '12', '13', '14', '15', '16', '17', '18', '19', '20']);
      expect(await collect(c.ListUsers({ page: 3, page_size: 10 }, auth()))).toHaveLength(5);
      expect(await collect(c.ListUsers({ page: 4, page_size: 10 }, auth()))).toHaveLength(0);
      expect(await collect(c.ListUsers({ page: 1, page_size: 1000 }, auth()))).toHaveLength(25);
      const filtered = await collect(c.ListUsers({ filter: 'kim SPECIAL' }, auth()));
      expect(filtered.map((u) => u.username)).toEqual(['user5', 'user10', 'user15', 'user20', 'user25']);
      expect((await collect(c.ListUsers({ filter: 'USER1@EXAMPLE' }, auth()))).map((u) => u.username)).toEqual(['user1']);
      expect(await collect(c.ListUsers({ filter: '%' }, auth()))).toHaveLength(0);
      expect(await status(collect(c.ListUsers({ page_size: -1 }, auth())))).toBe('INVALID_ARGUMENT');
    });
  });

  describe('WatchUserChanges', () => {
    function watch(c: AnyClient, request: object) {
      const call = c.WatchUserChanges(request, auth());
      const events: any[] = [];
      call.on('data', (e: any) => events.push(e));
      call.on('error', () => {});
      return { call, events };
    }
    const until = async (check: () => boolean) => {
      for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
      expect(check()).toBe(true);
    };

    it('streams CREATED, UPDATED and DELETED after the call starts, filtered by user and type', async () => {
      const c = client();
      await create(c, 0); // before the watch: not seen
      const all = watch(c, {});
      const onlyTwo = watch(c, { user_id: '2' });
      const onlyDeletes = watch(c, { types: ['DELETED'] });
      await until(() => running.users!.watcherCount() === 3);
      const u2 = await create(c, 2);
      const u3 = await create(c, 3);
      await unary(c, 'UpdateUser', { user_id: u2.id, user: { full_name: 'Two' } }, auth());
      await unary(c, 'DeleteUser', { user_id: u3.id }, auth());
      await until(() => all.events.length === 4);
      expect(all.events.map((e) => [e.type, e.user.username])).toEqual([
        ['CREATED', 'user2'],
        ['CREATED', 'user3'],
        ['UPDATED', 'user2'],
        ['DELETED', 'user3'],
      ]);
      expect(all.events[0].timestamp.seconds).toMatch(/^\d+$/);
      await until(() => onlyTwo.events.length === 2 && onlyDeletes.events.length === 1);
      expect(onlyTwo.events.map((e) => e.type)).toEqual(['CREATED', 'UPDATED']);
      expect(onlyDeletes.events.map((e) => e.user.username)).toEqual(['user3']);
      for (const w of [all, onlyTwo, onlyDeletes]) w.call.cancel();
      await until(() => running.users!.watcherCount() === 0);
    });

    it('leaves no listener behind after 1,000 streams opened and cancelled', async () => {
      const c = client();
      const watches = Array.from({ length: 1000 }, () => watch(c, {}));
      await until(() => running.users!.watcherCount() === 1000);
      for (const w of watches) w.call.cancel();
      await until(() => running.users!.watcherCount() === 0);
      expect(running.users!.events.listenerCount('event')).toBe(0);
    });
  });

  describe('BulkCreateUsers', () => {
    it('creates the good rows in order and reports each bad one by index', async () => {
      const c = client();
      await create(c, 'taken');
      const response = await new Promise<any>((resolve, reject) => {
        const call = c.BulkCreateUsers(auth(), (error: grpc.ServiceError | null, res: unknown) => (error ? reject(error) : resolve(res)));
        call.write(newUser(1));
        call.write(newUser(2, { password: 'short' }));
        call.write(newUser('taken', { email: 'fresh@example.com' }));
        call.write(newUser(3));
        call.write(newUser(1, { email: 'again@example.com' }));
        call.write({ username: '', email: '', password: '' });
        call.end();
      });
      expect(response.created_count).toBe(2);
      expect(response.failures).toEqual([
        { index: 1, status: 'INVALID_ARGUMENT', message: expect.stringContaining('password') },
        { index: 2, status: 'ALREADY_EXISTS', message: expect.stringContaining('username') },
        { index: 4, status: 'ALREADY_EXISTS', message: expect.stringContaining('username') },
        { index: 5, status: 'INVALID_ARGUMENT', message: expect.stringContaining('username is required') },
      ]);
      const listed = await collect(c.ListUsers({}, auth()));
      expect(listed.map((u) => u.username)).toEqual(['usertaken', 'user1', 'user3']);
    });

    it('writes 2,000 rows in transactions', async () => {
      const c = client();
      const response = await new Promise<any>((resolve, reject) => {
        const call = c.BulkCreateUsers(auth(), (error: grpc.ServiceError | null, res: unknown) => (error ? reject(error) : resolve(res)));
        for (let i = 0; i < 2000; i++) call.write(newUser(i));
        call.end();
      });
      expect(response).toEqual({ created_count: 2000, failures: [] });
      expect(await collect(c.ListUsers({ page: 20, page_size: 100 }, auth()))).toHaveLength(100);
    });
  });

  describe('UserChat', () => {
    it('broadcasts each message to every other participant of the same room', async () => {
      const c = client();
      const open = (room: string) => {
        const call = c.UserChat(auth());
        const heard: any[] = [];
        call.on('data', (m: any) => heard.push(m));
        call.write({ room, sender: '', text: '' });
        return { call, heard };
      };
      const a = open('lobby');
      const b = open('lobby');
      const other = open('elsewhere');
      await waitFor(() => running.users.chatParticipantCount() === 3, 'the three to join');
      a.call.write({ room: 'lobby', sender: 'ann', text: 'hello' });
      b.call.write({ room: 'lobby', sender: 'ben', text: 'hi ann' });
      // The room "elsewhere" hears of a third message, sent after the others: when it has, the lobby's would have come.
      const c2 = open('elsewhere');
      await waitFor(() => running.users.chatParticipantCount() === 4, 'the fourth to join');
      c2.call.write({ room: 'elsewhere', sender: 'cy', text: 'anyone?' });
      await waitFor(() => a.heard.length === 1 && b.heard.length === 1 && other.heard.length === 1, 'the messages');
      expect(a.heard.map((m) => [m.sender, m.text])).toEqual([['ben', 'hi ann']]);
      expect(b.heard.map((m) => [m.sender, m.text, m.room])).toEqual([['ann', 'hello', 'lobby']]);
      expect(b.heard[0].sent_at.seconds).toMatch(/^\d+$/);
      expect(other.heard.map((m) => [m.sender, m.text])).toEqual([['cy', 'anyone?']]);
      expect(c2.heard).toEqual([]);
      for (const p of [a, b, other, c2]) p.call.end();
      await waitFor(() => running.users.chatParticipantCount() === 0, 'everyone to leave');
    });
  });

  describe('SyncUsers', () => {
    it('answers each upsert and delete in order, with failures in place', async () => {
      const c = client();
      const existing = await create(c, 'old');
      const call = c.SyncUsers(auth());
      const answers = collect(call);
      call.write({ client_ref: 'a', upsert: { user: { username: 'synced', email: 's@example.com' }, password: 'long enough' } });
      call.write({
        client_ref: 'b',
        upsert: { user: { id: existing.id, username: 'userold', email: 'new@example.com', full_name: 'Replaced', is_active: false, roles: ['x'] } },
      });
      call.write({ client_ref: 'c', delete_user_id: '999' });
      call.write({ client_ref: 'd', upsert: { user: { username: 'nopass', email: 'n@example.com' }, password: '' } });
      call.write({ client_ref: 'e', delete_user_id: existing.id });
      call.write({ client_ref: 'f' });
      call.end();
      const results = await answers;
      expect(results.map((r) => [r.client_ref, r.result === 'user' ? 'ok' : r.failure.status])).toEqual([
        ['a', 'ok'],
        ['b', 'ok'],
        ['c', 'NOT_FOUND'],
        ['d', 'INVALID_ARGUMENT'],
        ['e', 'ok'],
        ['f', 'INVALID_ARGUMENT'],
      ]);
      expect(results[0].user).toMatchObject({ username: 'synced', is_active: true });
      expect(results[1].user).toMatchObject({ email: 'new@example.com', full_name: 'Replaced', is_active: false, roles: ['x'] });
      expect(results[4].user.username).toBe('userold');
    });
  });

  describe('operations', () => {
    it('serves grpc.health.v1 and reflection', async () => {
      const health = protoLoader.loadSync(require.resolve('grpc-health-check/proto/health/v1/health.proto'), { keepCase: true, enums: String });
      const HealthClient = (grpc.loadPackageDefinition(health) as any).grpc.health.v1.Health;
      const hc = new HealthClient(running.grpc!.address, grpc.credentials.createInsecure());
      clients.push(hc);
      for (const service of ['user.v1.UserService', 'inventory.v1.InventoryService', 'payment.v1.PaymentService', 'order.v1.OrderService']) {
        const answer = await new Promise<any>((resolve, reject) => hc.Check({ service }, (e: unknown, r: unknown) => (e ? reject(e) : resolve(r))));
        expect(answer.status, service).toBe('SERVING');
      }

      const reflection = protoLoader.loadSync(require.resolve('@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto'), { keepCase: true });
      const ReflectionClient = (grpc.loadPackageDefinition(reflection) as any).grpc.reflection.v1.ServerReflection;
      const rc = new ReflectionClient(running.grpc!.address, grpc.credentials.createInsecure());
      clients.push(rc);
      const services = await new Promise<string[]>((resolve, reject) => {
        const call = rc.ServerReflectionInfo();
        call.on('data', (r: any) => {
          resolve(r.list_services_response.service.map((s: { name: string }) => s.name));
          call.end();
        });
        call.on('error', reject);
        call.write({ list_services: '' });
      });
      expect(services).toEqual(
        expect.arrayContaining([
          'user.v1.UserService',
          'monitoring.v1.MonitoringService',
          'inventory.v1.InventoryService',
          'payment.v1.PaymentService',
          'order.v1.OrderService',
          'grpc.health.v1.Health',
        ]),
      );
    });

    it("shows the spec's two metric families, and go-grpc-prometheus's, with real counts at GET /metrics", async () => {
      const c = client();
      await create(c, 1);
      await status(unary(c, 'GetUser', { user_id: '42' }, auth()));
      await status(unary(c, 'GetUser', { user_id: '1' }));
      const text = await (await request(`${running.url}/metrics`)).body.text();
      expect(text).toContain('\nminiapp_grpc_requests_total{method="user.v1.UserService/CreateUser",status="OK"} 1\n');
      expect(text).toContain('\nminiapp_grpc_requests_total{method="user.v1.UserService/GetUser",status="NOT_FOUND"} 1\n');
      expect(text).toContain('\nminiapp_grpc_requests_total{method="user.v1.UserService/GetUser",status="UNAUTHENTICATED"} 1\n');
      expect(text).toContain('\nminiapp_grpc_request_duration_seconds_count{method="user.v1.UserService/CreateUser"} 1\n');
      expect(text).toContain('\nminiapp_grpc_request_duration_seconds_bucket{le="+Inf",method="user.v1.UserService/GetUser"} 2\n');
      const getUser = 'grpc_type="unary",grpc_service="user.v1.UserService",grpc_method="GetUser"';
      expect(text).toContain(`\nminiapp_grpc_server_started_total{${getUser}} 2\n`);
      expect(text).toContain(`\nminiapp_grpc_server_handled_total{${getUser},grpc_code="NotFound"} 1\n`);
      expect(text).toContain(`\nminiapp_grpc_server_handled_total{${getUser},grpc_code="Unauthenticated"} 1\n`);
      expect(text).toContain(`\nminiapp_grpc_server_handling_seconds_count{${getUser}} 2\n`);
    });

    it('keeps users and the admin token across a restart', async () => {
      await create(client(), 1);
      const token = running.adminToken!;
      expect(token).toMatch(/^mat_[\w-]{43}$/);
      await running.close();
      running = await start();
      expect(running.adminToken).toBe(token);
      expect((await unary(client(), 'GetUser', { user_id: '1' }, auth(token))).username).toBe('user1');
    });

    if (backend === 'sqlite') {
      it('keeps the admin token of a SQLite store in a 0600 file of the data dir', async () => {
        const file = join(dataDir, ADMIN_TOKEN_FILE);
        expect(readFileSync(file, 'utf8').trim()).toBe(running.adminToken);
        expect(statSync(file).mode & 0o777).toBe(0o600);
      });
    }

    it('serves over TLS when given a certificate', async () => {
      const pki: Pki = makePki();
      try {
        // On PostgreSQL a second instance of the same database; on SQLite a store of its own beside the data dir's.
        const tlsServer = await start(
          { tls: { cert: pki.read(pki.serverCert), key: pki.read(pki.serverKey) } },
          backend === 'sqlite' ? { kind: 'memory' } : store.location(),
        );
        try {
          // The certificate names localhost too: a host name rather than 127.0.0.1 as the TLS server name keeps Node's DEP0123 warning out of the test output.
          const c = client(tlsServer.grpc!.address, grpc.credentials.createSsl(Buffer.from(pki.read(pki.caCert))), {
            'grpc.ssl_target_name_override': 'localhost',
          });
          expect((await unary(c, 'CreateUser', newUser(1))).user.id).toBe('1');
          const plain = client(tlsServer.grpc!.address);
          expect(await status(unary(plain, 'CreateUser', newUser(2)))).toBe('UNAVAILABLE');
        } finally {
          await tlsServer.close();
        }
      } finally {
        pki.dispose();
      }
    });

    it('rejects a message over the receive limit', async () => {
      const c = client();
      expect(await status(unary(c, 'CreateUser', newUser(1, { full_name: 'x'.repeat(5 * 1024 * 1024) })))).toBe('RESOURCE_EXHAUSTED');
    });
  });
});
