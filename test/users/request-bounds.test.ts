/**
 * Issue 10, defects 10 and 14: every string and list field of a user.v1
 * request has a bound, and a request over it is INVALID_ARGUMENT naming the
 * field and the bound, never INTERNAL and never stored. Through the real
 * gRPC port with grpc-js clients.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import type * as grpc from '@grpc/grpc-js';
import { collect, failure, newUser, unary, type AnyClient, useUserClients } from '../helpers/user-client.js';
import { BACKENDS } from '../helpers/postgres.js';

describe.each(BACKENDS)('on %s', (backend) => {
  let c: AnyClient;
  const fixture = useUserClients(backend);

  beforeEach(async () => {
    c = fixture.serve.client();
  });

  /** The status a stream ends with, after reading everything it sent. */
  function streamEnd(call: grpc.ClientReadableStream<unknown>): Promise<{ code: string; details: string } | undefined> {
    return failure(collect(call));
  }

  describe('ListUsers filter', () => {
    it('answers INVALID_ARGUMENT naming filter and its bound for a 49,999-character filter, where SQLite would fail', async () => {
      await unary(c, 'CreateUser', newUser(1));
      expect(await streamEnd(c.ListUsers({ filter: 'x'.repeat(49_999) }, fixture.serve.auth()))).toEqual({
        code: 'INVALID_ARGUMENT',
        details: expect.stringMatching(/filter must be at most 200 characters/),
      });
      expect(await streamEnd(c.ListUsers({ filter: '%'.repeat(201) }, fixture.serve.auth()))).toMatchObject({ code: 'INVALID_ARGUMENT' });
      // At the bound it is an ordinary search, escaped wildcards and all.
      expect(await collect(c.ListUsers({ filter: '%'.repeat(200) }, fixture.serve.auth()))).toEqual([]);
      expect((await collect(c.ListUsers({ filter: `user1${' '.repeat(195)}` }, fixture.serve.auth()))).map((u) => u.username)).toEqual(['user1']);
    });
  });

  describe('CreateUser and BulkCreateUsers', () => {
    it('refuses a 3.9 MB full_name without authentication and stores nothing', async () => {
      const error = await failure(unary(c, 'CreateUser', newUser(1, { full_name: 'x'.repeat(3_900_000) })));
      expect(error).toEqual({ code: 'INVALID_ARGUMENT', details: expect.stringContaining('full_name must be at most 200 characters') });
      expect(await collect(c.ListUsers({}, fixture.serve.auth()))).toEqual([]);
    });

    it('names each field over its bound: username, email, password, full_name', async () => {
      for (const [fields, text] of [
        [{ full_name: 'é'.repeat(201) }, 'full_name must be at most 200 characters; it is 201'],
        [{ password: 'p'.repeat(1025) }, 'password must be at most 1024 characters'],
        [{ email: `${'a'.repeat(250)}@example.com` }, 'email must be at most 254 characters'],
        [{ username: 'u'.repeat(21) }, 'username must be 3 to 20 characters'],
      ] as const) {
        expect(await failure(unary(c, 'CreateUser', newUser(9, fields)))).toEqual({ code: 'INVALID_ARGUMENT', details: expect.stringContaining(text) });
      }
      // Characters, not bytes: 200 four-byte characters are a valid name.
      const user = (await unary(c, 'CreateUser', newUser(1, { full_name: '😀'.repeat(200), password: 'p'.repeat(1024) }))).user;
      expect([...user.full_name]).toHaveLength(200);
    });

    it('refuses NUL (U+0000) in stored text and in the filter on both backends (PostgreSQL cannot hold it), never INTERNAL', async () => {
      for (const [fields, field] of [
        [{ full_name: 'Ann\u0000' }, 'full_name'],
        [{ email: 'a\u0000@example.com' }, 'email'],
        [{ username: 'ann\u0000' }, 'username'],
      ] as const) {
        expect(await failure(unary(c, 'CreateUser', newUser(9, fields)))).toEqual({ code: 'INVALID_ARGUMENT', details: expect.stringContaining(field) });
      }
      expect(await streamEnd(c.ListUsers({ filter: 'a\u0000' }, fixture.serve.auth()))).toEqual({
        code: 'INVALID_ARGUMENT',
        details: expect.stringContaining('filter must not contain NUL (U+0000)'),
      });
      expect(await collect(c.ListUsers({}, fixture.serve.auth()))).toEqual([]);
    });

    it('reports a bulk row over a bound by index and creates the others', async () => {
      const response = await new Promise<any>((resolve, reject) => {
        const call = c.BulkCreateUsers(fixture.serve.auth(), (error: grpc.ServiceError | null, res: unknown) => (error ? reject(error) : resolve(res)));
        call.write(newUser(1));
        call.write(newUser(2, { full_name: 'x'.repeat(201) }));
        call.write(newUser(3));
        call.end();
      });
      expect(response).toEqual({
        created_count: 2,
        failures: [{ index: 1, status: 'INVALID_ARGUMENT', message: expect.stringContaining('full_name must be at most 200 characters') }],
      });
    });
  });

  describe('UpdateUser', () => {
    it('refuses 10,000 roles from an admin, and 21, naming roles and the bound; 20 are fine', async () => {
      const user = (await unary(c, 'CreateUser', newUser(1))).user;
      const roles = (n: number) => Array.from({ length: n }, (_, i) => `role${i}`);
      for (const n of [10_000, 21]) {
        const error = await failure(
          unary(c, 'UpdateUser', { user_id: user.id, user: { roles: roles(n) }, update_mask: { paths: ['roles'] } }, fixture.serve.auth()),
        );
        expect(error).toEqual({ code: 'INVALID_ARGUMENT', details: `roles takes at most 20 entries; it has ${n}` });
      }
      expect((await unary(c, 'GetUser', { user_id: user.id }, fixture.serve.auth())).roles).toEqual([]);
      const updated = await unary(c, 'UpdateUser', { user_id: user.id, user: { roles: roles(20) }, update_mask: { paths: ['roles'] } }, fixture.serve.auth());
      expect(updated.roles).toHaveLength(20);
      // Roles are a set: a role twice is refused, naming it, and nothing is stored.
      const twice = await failure(
        unary(c, 'UpdateUser', { user_id: user.id, user: { roles: ['editor', 'viewer', 'editor'] }, update_mask: { paths: ['roles'] } }, fixture.serve.auth()),
      );
      expect(twice).toEqual({ code: 'INVALID_ARGUMENT', details: expect.stringContaining('roles names "editor" twice') });
      expect((await unary(c, 'GetUser', { user_id: user.id }, fixture.serve.auth())).roles).toHaveLength(20);
    });

    it('refuses a long role, a long full_name and more than 5 mask paths', async () => {
      const user = (await unary(c, 'CreateUser', newUser(1))).user;
      const update = (request: object) => failure(unary(c, 'UpdateUser', { user_id: user.id, ...request }, fixture.serve.auth()));
      expect(await update({ user: { roles: ['r'.repeat(33)] }, update_mask: { paths: ['roles'] } })).toEqual({
        code: 'INVALID_ARGUMENT',
        details: expect.stringContaining('(at most 32 characters)'),
      });
      expect(await update({ user: { full_name: 'x'.repeat(201) } })).toEqual({
        code: 'INVALID_ARGUMENT',
        details: 'full_name must be at most 200 characters; it is 201',
      });
      expect(await update({ user: { full_name: 'x' }, update_mask: { paths: Array(6).fill('full_name') } })).toEqual({
        code: 'INVALID_ARGUMENT',
        details: 'update_mask.paths takes at most 5 entries; it has 6',
      });
    });
  });

  describe('streams', () => {
    it('WatchUserChanges refuses more than 3 types', async () => {
      const call = c.WatchUserChanges({ types: ['CREATED', 'UPDATED', 'DELETED', 'CREATED'] }, fixture.serve.auth());
      expect(await streamEnd(call)).toEqual({ code: 'INVALID_ARGUMENT', details: 'types takes at most 3 entries; it has 4' });
    });

    it('WatchUserChanges refuses at once a filter no change could match, instead of waiting in silence', async () => {
      for (const [request, details] of [
        [{ types: [7] }, 'types: 7 is not an event type (CREATED, UPDATED, DELETED)'],
        [{ types: ['CREATED', 3] }, 'types: 3 is not an event type (CREATED, UPDATED, DELETED)'],
        [{ user_id: '-1' }, 'user_id must be a positive integer'],
        [{ user_id: '4611686018427387904' }, 'user_id must be at most 9007199254740991 (ids are never larger); got 4611686018427387904'],
      ] as const) {
        expect(await streamEnd(c.WatchUserChanges(request, fixture.serve.auth())), JSON.stringify(request)).toEqual({ code: 'INVALID_ARGUMENT', details });
      }
      // The filters that can match still watch: user 1's creation reaches a watch of user 1 and CREATED.
      const call = c.WatchUserChanges({ user_id: '1', types: ['CREATED'] }, fixture.serve.auth());
      await new Promise((resolve) => call.once('metadata', resolve));
      await unary(c, 'CreateUser', newUser(1));
      const event = await new Promise<{ type: string; user: { id: string } }>((resolve) => call.once('data', resolve));
      expect([event.type, event.user.id]).toEqual(['CREATED', '1']);
      call.on('error', () => undefined);
      call.cancel();
    });

    it('GetUser names the real bound of an id past 2^53', async () => {
      expect(await failure(unary(c, 'GetUser', { user_id: '9223372036854775807' }, fixture.serve.auth()))).toEqual({
        code: 'INVALID_ARGUMENT',
        details: 'user_id must be at most 9007199254740991 (ids are never larger); got 9223372036854775807',
      });
    });

    it('UserChat ends a stream whose room, sender or text is over its bound', async () => {
      for (const [message, text] of [
        [{ room: 'r'.repeat(65), text: 'hi' }, 'room must be at most 64 characters'],
        [{ room: 'lobby', sender: 's'.repeat(65), text: 'hi' }, 'sender must be at most 64 characters'],
        [{ room: 'lobby', text: 't'.repeat(4097) }, 'text must be at most 4096 characters'],
      ] as const) {
        const call = c.UserChat(fixture.serve.auth());
        const ended = streamEnd(call);
        call.write(message);
        expect(await ended).toEqual({ code: 'INVALID_ARGUMENT', details: expect.stringContaining(text) });
      }
      expect(fixture.serve.running.users.chatParticipantCount()).toBe(0);
    });

    it('SyncUsers answers a client_ref over 128 characters with a failure in place, and a long password too', async () => {
      const call = c.SyncUsers(fixture.serve.auth());
      const answers = collect(call);
      call.write({ client_ref: 'r'.repeat(129), delete_user_id: '1' });
      call.write({ client_ref: 'ok', upsert: { user: newUser(1), password: 'p'.repeat(1025) } });
      call.write({ client_ref: 'roles', upsert: { user: newUser(2, { roles: Array(21).fill('x') }), password: 'long enough' } });
      // 128 characters, 256 UTF-16 units: within the bound, and echoed.
      call.write({ client_ref: '😀'.repeat(128), upsert: { user: newUser(3), password: 'long enough' } });
      call.end();
      const results = await answers;
      expect(results.map((r) => [[...r.client_ref].length, r.result === 'user' ? 'ok' : `${r.failure.status}: ${r.failure.message}`])).toEqual([
        [0, 'INVALID_ARGUMENT: client_ref must be at most 128 characters; it is 129'],
        [2, expect.stringMatching(/^INVALID_ARGUMENT: password must be at most 1024 characters/)],
        [5, 'INVALID_ARGUMENT: roles takes at most 20 entries; it has 21'],
        [128, 'ok'],
      ]);
    });
  });
});
