/**
 * The light path's one call over node:http2 (src/grpc/client/unary-call.ts)
 * against a bare HTTP/2 server on 127.0.0.1:0 that answers as a gRPC server
 * may: messages split across DATA frames at any byte, a status in the
 * trailers or alone in the headers, a compressed message it was not asked
 * for, nothing at all for a while; and a call cancelled from outside.
 */
import { once } from 'node:events';
import { createServer, type Http2Server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { lightCall } from '../../src/grpc/client/light-call.js';
import { unaryCall, type UnaryCallOptions } from '../../src/grpc/client/unary-call.js';

let server: Http2Server | undefined;

afterEach(async () => {
  server?.close();
  server = undefined;
});

/** Serves every request with `answer`; resolves with the address and what the server received. */
async function serve(answer: (stream: ServerHttp2Stream, request: { headers: Record<string, unknown>; body: Buffer }) => void): Promise<string> {
  server = createServer();
  server.on('stream', (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => answer(stream, { headers, body: Buffer.concat(chunks) }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** gRPC's length-prefixed messages, uncompressed. */
function frames(...messages: Buffer[]): Buffer {
  return Buffer.concat(
    messages.map((message) => {
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(message.length, 1);
      return Buffer.concat([prefix, message]);
    }),
  );
}

const call = (address: string, options: Partial<UnaryCallOptions> = {}) =>
  unaryCall({ address, path: '/test.v1.Test/Call', message: Buffer.from('ask'), token: 'secret', deadlineMs: 5_000, ...options });

describe('one gRPC call over node:http2', () => {
  it('sends one framed message with the token and deadline, and reads messages split at any byte', async () => {
    let received: { headers: Record<string, unknown>; body: Buffer } | undefined;
    const address = await serve((stream, request) => {
      received = request;
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'x-total-count': '2' }, { waitForTrailers: true });
      const body = frames(Buffer.from('first'), Buffer.alloc(0), Buffer.from('second, longer'));
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      // Three bytes a DATA frame, each sent on its own turn, so that the prefixes and the messages fall across frames.
      void (async () => {
        for (let at = 0; at < body.length; at += 3) {
          stream.write(body.subarray(at, at + 3));
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
        stream.end();
      })();
    });
    const outcome = await call(address);
    expect(outcome.kind).toBe('answer');
    if (outcome.kind !== 'answer') return;
    expect(outcome.messages.map(String)).toEqual(['first', '', 'second, longer']);
    expect(outcome.headers['x-total-count']).toBe('2');
    expect(received!.body).toEqual(frames(Buffer.from('ask')));
    expect(received!.headers).toMatchObject({ authorization: 'Bearer secret', 'grpc-timeout': '5000m', te: 'trailers', 'content-type': 'application/grpc' });
  });

  it('hands each message over as it comes when asked to, and says how many came before a status', async () => {
    const address = await serve((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.write(frames(Buffer.from('one'), Buffer.from('two')));
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '14', 'grpc-message': 'going%20away' }));
      stream.end();
    });
    const seen: string[] = [];
    const outcome = await call(address, { onMessage: (message) => seen.push(String(message)), deadlineMs: undefined, connectMs: 5_000 });
    expect(seen).toEqual(['one', 'two']);
    expect(outcome).toMatchObject({ kind: 'status', received: 2, error: { code: 14, details: 'going away' } });
  });

  it('reads a status sent alone in the headers (trailers-only)', async () => {
    const address = await serve((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '5', 'grpc-message': 'no user with id 9' }, { endStream: true });
    });
    expect(await call(address)).toMatchObject({ kind: 'status', received: 0, error: { code: 5, details: 'no user with id 9' } });
  });

  it('takes a compressed message, an HTTP error and a cut-short message as not answered, for grpc-js to try', async () => {
    const answers: ((stream: ServerHttp2Stream) => void)[] = [
      (stream) => {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.write(Buffer.from([1, 0, 0, 0, 1, 0x42]));
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end();
      },
      (stream) => stream.respond({ ':status': 404, 'content-type': 'text/plain' }, { endStream: true }),
      (stream) => {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.write(frames(Buffer.from('whole')).subarray(0, 7));
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end();
      },
    ];
    for (const answer of answers) {
      const address = await serve(answer);
      expect((await call(address)).kind).toBe('unreached');
      server!.close();
    }
  });

  it('gives up on a server that does not answer within the time to connect, and stops at once when cancelled', async () => {
    const address = await serve(() => {});
    expect(await call(address, { deadlineMs: undefined, connectMs: 100, onMessage: () => {} })).toMatchObject({
      kind: 'status',
      error: { code: 4, details: 'could not connect in time' },
    });
    const controller = new AbortController();
    const pending = call(address, { deadlineMs: undefined, signal: controller.signal, onMessage: () => {} });
    setTimeout(() => controller.abort(), 50);
    expect(await pending).toEqual({ kind: 'aborted' });
  });

  it("ends a call whose message is past grpc-js's 4 MiB limit as grpc-js does, without reading the rest", async () => {
    const address = await serve((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(0xfffffff0, 1);
      stream.write(prefix);
      stream.write(Buffer.alloc(64 * 1024));
    });
    expect(await call(address, { deadlineMs: undefined, connectMs: 5_000, onMessage: () => {} })).toMatchObject({
      kind: 'status',
      error: { code: 8, details: 'Received message larger than max (4294967280 vs 4194304)' },
    });
  });

  it('keeps no keepalive going for a call that ended before its connection was made', async () => {
    // Node emits 'connect' for a session destroyed while it connected: a ping on it threw, seconds after the call ended.
    const address = await serve(() => {});
    const failures: unknown[] = [];
    const record = (error: unknown) => failures.push(error);
    process.on('uncaughtException', record);
    try {
      const controller = new AbortController();
      const pending = call(address, { deadlineMs: undefined, keepaliveMs: 20, signal: controller.signal, onMessage: () => {} });
      controller.abort();
      expect(await pending).toEqual({ kind: 'aborted' });
      await new Promise((resolve) => setTimeout(resolve, 200));
    } finally {
      process.off('uncaughtException', record);
    }
    expect(failures).toEqual([]);
  });

  it('makes a message it cannot parse the INTERNAL error grpc-js gives, on the light path, not a failure of miniapp', async () => {
    const address = await serve((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      // A User whose field 1 says 16 bytes follow, and none do.
      stream.end(frames(Buffer.from([0x0a, 0x10])));
    });
    await expect(lightCall({ address, deadlineMs: 5_000 }, '/user.v1.UserService/GetUser', { user_id: '1' })).rejects.toThrow(
      /^INTERNAL: Response message parsing error: /,
    );
  });

  it('says a connection refused is not answered', async () => {
    expect(await call('127.0.0.1:1')).toMatchObject({ kind: 'unreached', received: 0 });
  });
});
