/**
 * The one interceptor layer of every call (request-check.ts): the checks
 * and the observation of the call (metrics, logs) share it, so what the
 * checks refuse reaches the observer with its status, as any other call
 * does. A RequestCheckingServer with a small UserService on 127.0.0.1:0 and
 * a real grpc-js client.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { metadataBytes, RequestCheckingServer, type CallObserver } from '../../src/grpc/request-check.js';
import { userServiceDefinition } from '../../src/users/proto.js';

type Event = [method: string, event: 'received' | 'sent' | 'finished', code?: string];

describe('RequestCheckingServer with an observer', () => {
  let server: RequestCheckingServer;
  let client: grpc.Client;
  let events: Event[];
  let started: string[];
  let releaseSlow: () => void;
  /** What the BulkCreateUsers handler got: each request's username, and 'end' when the stream ended. */
  let bulkSeen: string[];

  beforeEach(async () => {
    events = [];
    started = [];
    bulkSeen = [];
    server = new RequestCheckingServer({
      observe: (method): CallObserver => {
        const name = method.path.slice(method.path.lastIndexOf('/') + 1);
        started.push(name);
        return {
          received: () => events.push([name, 'received']),
          sent: () => events.push([name, 'sent']),
          finished: (code) => events.push([name, 'finished', grpc.status[code]]),
        };
      },
    });
    const slow = new Promise<void>((resolve) => (releaseSlow = resolve));
    server.addService(userServiceDefinition().service, {
      GetUser: (call: grpc.ServerUnaryCall<{ user_id: string }, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        if (call.request.user_id === '404') return callback({ code: grpc.status.NOT_FOUND, details: 'no such user' });
        if (call.request.user_id === '7') return void slow.then(() => callback(null, { id: '7' }));
        callback(null, { id: call.request.user_id, username: 'user1' });
      },
      CreateUser: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(null, {}),
      BulkCreateUsers: (call: grpc.ServerReadableStream<{ username: string }, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        call.on('data', (request: { username: string }) => bulkSeen.push(request.username));
        call.on('end', () => {
          bulkSeen.push('end');
          callback(null, { created_count: bulkSeen.length - 1 });
        });
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
    );
    const { Client } = userServiceDefinition();
    client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  });
  afterEach(async () => {
    releaseSlow();
    client.close();
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
  });

  const asIs = (bytes: Buffer) => bytes;
  const call = (path: string, body: Buffer, metadata = new grpc.Metadata(), options: grpc.CallOptions = {}) =>
    new Promise<{ code: string; details?: string }>((resolve) =>
      client.makeUnaryRequest(path, asIs, asIs, body, metadata, options, (error) =>
        resolve(error ? { code: grpc.status[error.code]!, details: error.details } : { code: 'OK' }),
      ),
    );
  /** GetUserRequest { user_id = id } on the wire. */
  const getUser = (id: number) => Buffer.from([0x08, id]);

  it('observes an answered call and a failed one: the message each way, then the status', async () => {
    expect(await call('/user.v1.UserService/GetUser', getUser(1))).toEqual({ code: 'OK' });
    expect(await call('/user.v1.UserService/GetUser', Buffer.from([0x08, 0x94, 0x03]))).toEqual({ code: 'NOT_FOUND', details: 'no such user' });
    expect(started).toEqual(['GetUser', 'GetUser']);
    expect(events).toEqual([
      ['GetUser', 'received'],
      ['GetUser', 'sent'],
      ['GetUser', 'finished', 'OK'],
      ['GetUser', 'received'],
      ['GetUser', 'finished', 'NOT_FOUND'],
    ]);
  });

  it('observes the statuses of what the checks refuse: metadata over the limit, a string that is not UTF-8', async () => {
    const big = new grpc.Metadata();
    big.set('x-padding', 'a'.repeat(20 * 1024));
    expect((await call('/user.v1.UserService/GetUser', getUser(1), big)).code).toBe('RESOURCE_EXHAUSTED');
    // CreateUserRequest { email = "u\xffx" }: refused before the handler, still a message received.
    const notUtf8 = Buffer.from([0x12, 0x03, 0x75, 0xff, 0x78]);
    expect(await call('/user.v1.UserService/CreateUser', notUtf8)).toEqual({ code: 'INVALID_ARGUMENT', details: 'email is not valid UTF-8' });
    expect(events.filter(([, event]) => event === 'finished')).toEqual([
      ['GetUser', 'finished', 'RESOURCE_EXHAUSTED'],
      ['CreateUser', 'finished', 'INVALID_ARGUMENT'],
    ]);
    expect(events).toContainEqual(['CreateUser', 'received']);
    expect(events).not.toContainEqual(['CreateUser', 'sent']);
  });

  it('observes a call that runs out its deadline as DEADLINE_EXCEEDED, not CANCELLED', async () => {
    const ended = await call('/user.v1.UserService/GetUser', getUser(7), new grpc.Metadata(), { deadline: Date.now() + 200 });
    expect(ended.code).toBe('DEADLINE_EXCEEDED');
    for (let i = 0; i < 200 && !events.some(([, event]) => event === 'finished'); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(events).toEqual([
      ['GetUser', 'received'],
      ['GetUser', 'finished', 'DEADLINE_EXCEEDED'],
    ]);
  });

  it('lets nothing of a stream reach its handler after a message it refused: neither later messages nor the end', async () => {
    const done = new Promise<{ code: string; details?: string }>((resolve) => {
      const stream = client.makeClientStreamRequest('/user.v1.UserService/BulkCreateUsers', asIs, asIs, new grpc.Metadata(), (error) =>
        resolve(error ? { code: grpc.status[error.code]!, details: error.details } : { code: 'OK' }),
      );
      // CreateUserRequest { username = "a" }, then { email = "u\xffx" }, then { username = "c" }, then the end.
      stream.write(Buffer.from([0x0a, 0x01, 0x61]));
      stream.write(Buffer.from([0x12, 0x03, 0x75, 0xff, 0x78]));
      stream.write(Buffer.from([0x0a, 0x01, 0x63]));
      stream.end();
    });
    expect(await done).toEqual({ code: 'INVALID_ARGUMENT', details: 'email is not valid UTF-8' });
    // The client's later message and its end arrive after the status; give them every chance to be passed on.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(bulkSeen).toEqual(['a']);
    expect(events.filter(([method]) => method === 'BulkCreateUsers')).toEqual([
      ['BulkCreateUsers', 'received'],
      ['BulkCreateUsers', 'received'],
      ['BulkCreateUsers', 'finished', 'INVALID_ARGUMENT'],
    ]);
  });

  it('observes a call the client cancels as CANCELLED, once, whatever the handler does after', async () => {
    const until = async (condition: () => boolean) => {
      for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    };
    const ended = new Promise<string>((resolve) => {
      const pending = client.makeUnaryRequest('/user.v1.UserService/GetUser', asIs, asIs, getUser(7), new grpc.Metadata(), (error) =>
        resolve(error ? grpc.status[error.code]! : 'OK'),
      );
      void until(() => events.length > 0).then(() => pending.cancel());
    });
    expect(await ended).toBe('CANCELLED');
    await until(() => events.some(([, event]) => event === 'finished'));
    // The handler answers after the client has gone: the call has ended already.
    releaseSlow();
    expect((await call('/user.v1.UserService/GetUser', getUser(1))).code).toBe('OK');
    expect(events.filter(([, event]) => event === 'finished')).toEqual([
      ['GetUser', 'finished', 'CANCELLED'],
      ['GetUser', 'finished', 'OK'],
    ]);
  });
});

describe('metadataBytes', () => {
  /** The count as HTTP/2 counts a header list, from the headers grpc-js would write. */
  const reference = (metadata: grpc.Metadata) => {
    let bytes = 0;
    for (const [name, value] of Object.entries(metadata.toHttp2Headers())) {
      for (const one of Array.isArray(value) ? value : [value]) bytes += name.length + Buffer.byteLength(String(one)) + 32;
    }
    return bytes;
  };

  it('counts every value of every key as written on the wire: repeated values, text, binary values as base64', () => {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', 'Bearer mat_abc');
    metadata.add('x-repeated', 'one');
    metadata.add('x-repeated', 'two');
    metadata.set('x-text', 'plain text, with spaces');
    for (const length of [0, 1, 2, 3, 4, 5, 1000]) metadata.add('x-blob-bin', Buffer.alloc(length, 7));
    expect(metadataBytes(metadata)).toBe(reference(metadata));
    expect(metadataBytes(new grpc.Metadata())).toBe(0);
  });
});
