/**
 * Issue 10, defect 13: a string field that is not valid UTF-8 is
 * INVALID_ARGUMENT naming the field, in every service and every request
 * message, nested and streamed; bytes that are no message at all are
 * INVALID_ARGUMENT too, never INTERNAL. The requests are encoded by hand
 * and sent through grpc-js with a pass-through serializer, as a client
 * with a broken encoder would send them.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { collect, failure, unary, useUserClients } from '../helpers/user-client.js';
import { BACKENDS } from '../helpers/postgres.js';

describe.each(BACKENDS)('on %s', (backend) => {
  let raw: grpc.Client;
  const fixture = useUserClients(backend);

  beforeEach(async () => {
    raw = fixture.serve.raw();
  });

  // ---- protobuf wire encoding, by hand ----
  function varint(value: number): Buffer {
    const out: number[] = [];
    while (value > 127) {
      out.push((value % 128) | 128);
      value = Math.floor(value / 128);
    }
    out.push(value);
    return Buffer.from(out);
  }
  /** A length-delimited field: a string (UTF-8), raw bytes, or an encoded message. */
  const field = (number: number, value: string | Buffer) => {
    const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
    return Buffer.concat([varint(number * 8 + 2), varint(bytes.length), bytes]);
  };
  const numberField = (number: number, value: number) => Buffer.concat([varint(number * 8), varint(value)]);
  const message = (...fields: Buffer[]) => Buffer.concat(fields);
  /** Bytes that are not UTF-8: 0xff never occurs in it, and 0xc3 must be followed by a continuation byte. */
  const invalid = (before: string, after: string, bad = [0xff]) => Buffer.concat([Buffer.from(before), Buffer.from(bad), Buffer.from(after)]);

  const asIs = (bytes: Buffer) => bytes;

  function rawUnary(path: string, body: Buffer, metadata = new grpc.Metadata()): Promise<Buffer> {
    return new Promise((resolve, reject) =>
      raw.makeUnaryRequest(path, asIs, asIs, body, metadata, (error, response) => (error ? reject(error) : resolve(response!))),
    );
  }

  /** Sends `bodies` on a bidi stream, closes it, and gives the answers and the final status. */
  async function rawBidi(path: string, bodies: Buffer[], metadata: grpc.Metadata, options: { close?: boolean } = {}) {
    const call = raw.makeBidiStreamRequest(path, asIs, asIs, metadata);
    const answers: Buffer[] = [];
    call.on('data', (answer: Buffer) => answers.push(answer));
    const status = new Promise<{ code: string; details: string }>((resolve) => {
      call.on('error', (error: grpc.ServiceError) => resolve({ code: grpc.status[error.code]!, details: error.details }));
      call.on('status', (s: grpc.StatusObject) => {
        if (s.code === grpc.status.OK) resolve({ code: 'OK', details: s.details });
      });
    });
    for (const body of bodies) call.write(body);
    if (options.close !== false) call.end();
    return { answers, status: await status };
  }

  const createUser = (email: Buffer | string, username = 'user1') =>
    message(field(1, username), field(2, email), field(3, 'correct horse'), field(4, 'Full Name'));

  describe('user.v1.UserService', () => {
    it('refuses CreateUser with e-mail bytes u\\xffx@example.com, naming email, and stores nothing', async () => {
      const error = await failure(rawUnary('/user.v1.UserService/CreateUser', createUser(invalid('u', 'x@example.com'))));
      expect(error).toEqual({ code: 'INVALID_ARGUMENT', details: 'email is not valid UTF-8' });
      expect(await collect(fixture.serve.client().ListUsers({}, fixture.serve.auth()))).toEqual([]);
    });

    it('accepts and keeps multi-byte UTF-8 exactly', async () => {
      await rawUnary('/user.v1.UserService/CreateUser', createUser('jürgen.😀@example.com', 'jürgen'));
      const [user] = await collect(fixture.serve.client().ListUsers({}, fixture.serve.auth()));
      expect(user).toMatchObject({ username: 'jürgen', email: 'jürgen.😀@example.com' });
    });

    it('names nested and repeated fields: user.roles[1], user.full_name, update_mask.paths[0]', async () => {
      const c = fixture.serve.client();
      await unary(c, 'CreateUser', { username: 'user1', email: 'u1@example.com', password: 'correct horse' });
      const update = (body: Buffer) => failure(rawUnary('/user.v1.UserService/UpdateUser', body, fixture.serve.auth()));
      expect(await update(message(numberField(1, 1), field(2, message(field(6, 'editor'), field(6, invalid('b', '(', [0xc3]))))))).toEqual({
        code: 'INVALID_ARGUMENT',
        details: 'user.roles[1] is not valid UTF-8',
      });
      expect(await update(message(numberField(1, 1), field(2, field(4, invalid('Jo', 'hn')))))).toEqual({
        code: 'INVALID_ARGUMENT',
        details: 'user.full_name is not valid UTF-8',
      });
      expect(await update(message(numberField(1, 1), field(3, field(1, invalid('full', '_name')))))).toEqual({
        code: 'INVALID_ARGUMENT',
        details: 'update_mask.paths[0] is not valid UTF-8',
      });
      expect((await unary(c, 'GetUser', { user_id: '1' }, fixture.serve.auth())).full_name).toBe('');
    });

    it('checks server-, bidi- and client-streamed requests message by message', async () => {
      const listed = raw.makeServerStreamRequest('/user.v1.UserService/ListUsers', asIs, asIs, field(3, invalid('ki', 'm')), fixture.serve.auth());
      expect(await failure(collect(listed))).toEqual({ code: 'INVALID_ARGUMENT', details: 'filter is not valid UTF-8' });

      // SyncUsers: the first request is answered; the second (upsert.user.email) ends the call.
      const good = message(field(1, 'a'), field(2, message(field(1, message(field(2, 'synced'), field(3, 's@example.com'))), field(2, 'long enough'))));
      const bad = message(
        field(1, 'b'),
        field(2, message(field(1, message(field(2, 'other'), field(3, invalid('o', '@example.com')))), field(2, 'long enough'))),
      );
      const sync = raw.makeBidiStreamRequest('/user.v1.UserService/SyncUsers', asIs, asIs, fixture.serve.auth());
      const answers = collect(sync);
      sync.write(good);
      await new Promise((resolve) => sync.once('data', resolve));
      sync.write(bad);
      expect(await failure(answers)).toEqual({ code: 'INVALID_ARGUMENT', details: 'upsert.user.email is not valid UTF-8' });
      expect((await collect(fixture.serve.client().ListUsers({}, fixture.serve.auth()))).map((u) => u.username)).toEqual(['synced']);

      const chat = await rawBidi('/user.v1.UserService/UserChat', [message(field(1, 'lobby'), field(3, invalid('hi ', '!')))], fixture.serve.auth(), {
        close: false,
      });
      expect(chat.status).toEqual({ code: 'INVALID_ARGUMENT', details: 'text is not valid UTF-8' });
      expect(fixture.serve.running.users.chatParticipantCount()).toBe(0);

      const bulk = await new Promise<{ code: string; details: string }>((resolve) => {
        const call = raw.makeClientStreamRequest('/user.v1.UserService/BulkCreateUsers', asIs, asIs, fixture.serve.auth(), (error) =>
          resolve(error ? { code: grpc.status[error.code]!, details: error.details } : { code: 'OK', details: '' }),
        );
        call.write(createUser('ok@example.com', 'first'));
        call.write(message(field(1, 'second'), field(2, 'second@example.com'), field(3, invalid('pass', 'word'))));
        call.end();
      });
      expect(bulk).toEqual({ code: 'INVALID_ARGUMENT', details: 'password is not valid UTF-8' });
    });

    it('answers INVALID_ARGUMENT, not INTERNAL or a partial message, for bytes that are no message', async () => {
      // Field 2 announces 50 bytes and carries 3; then a tag of wire type 7, which does not exist.
      const truncated = Buffer.concat([field(1, 'user1'), varint(2 * 8 + 2), varint(50), Buffer.from('abc')]);
      const badWireType = Buffer.concat([createUser('u1@example.com'), varint(5 * 8 + 7)]);
      for (const body of [truncated, badWireType]) {
        expect(await failure(rawUnary('/user.v1.UserService/CreateUser', body))).toEqual({
          code: 'INVALID_ARGUMENT',
          details: expect.stringContaining('the request is not a valid user.v1.CreateUserRequest message'),
        });
      }
      expect(await collect(fixture.serve.client().ListUsers({}, fixture.serve.auth()))).toEqual([]);
    });
  });

  describe('every other service of the server', () => {
    it('monitoring.v1: a StreamLogs component and a Chat sender', async () => {
      const logs = raw.makeServerStreamRequest('/monitoring.v1.MonitoringService/StreamLogs', asIs, asIs, field(2, invalid('gr', 'pc')), fixture.serve.auth());
      expect(await failure(collect(logs))).toEqual({ code: 'INVALID_ARGUMENT', details: 'components[0] is not valid UTF-8' });
      const chat = await rawBidi('/monitoring.v1.MonitoringService/Chat', [message(field(1, invalid('op', '')), field(2, 'hello'))], fixture.serve.auth(), {
        close: false,
      });
      expect(chat.status).toEqual({ code: 'INVALID_ARGUMENT', details: 'sender is not valid UTF-8' });
    });

    it('grpc.health.v1 Check and the reflection services', async () => {
      expect(await failure(rawUnary('/grpc.health.v1.Health/Check', field(1, invalid('user.v1.', 'UserService'))))).toEqual({
        code: 'INVALID_ARGUMENT',
        details: 'service is not valid UTF-8',
      });
      for (const version of ['v1', 'v1alpha']) {
        const reflection = await rawBidi(
          `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
          [field(3, invalid('user/v1/', '.proto'))],
          new grpc.Metadata(),
        );
        expect(reflection.status).toEqual({ code: 'INVALID_ARGUMENT', details: 'file_by_filename is not valid UTF-8' });
      }
    });
  });
});
