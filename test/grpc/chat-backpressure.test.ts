/**
 * Issue 10, defect 11: a chat participant that never reads cannot make the
 * server buffer without limit. The participant here is a raw HTTP/2 peer
 * that pauses its stream, so it sends no WINDOW_UPDATE (a grpc-js client
 * that calls pause() keeps reading from the connection into its own memory,
 * so it would not test the server). It is dropped with RESOURCE_EXHAUSTED
 * after at most what HTTP/2 flow control let through plus grpc-js's own
 * queue, while the sender and a reader that reads go on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { serviceDefinition } from '../../src/grpc/protos.js';
import { useUserClients } from '../helpers/user-client.js';
import { BACKENDS } from '../helpers/postgres.js';
import { grpcFrame, rawGrpcStream } from '../helpers/raw-grpc.js';

describe.each(BACKENDS)('on %s', (backend) => {
  const sessions: http2.ClientHttp2Session[] = [];
  const fixture = useUserClients(backend);

  afterEach(async () => {
    for (const session of sessions) session.destroy();
    sessions.length = 0;
  });

  const MESSAGES = 1500;
  const TEXT = 'x'.repeat(1024);

  /** A stream of one chat method from a peer that stops reading after its first message. */
  function stalledPeer(path: string, joinMessage: Buffer) {
    const session = http2.connect(`http://${fixture.serve.address}`);
    session.on('error', () => {});
    sessions.push(session);
    const stream = rawGrpcStream(session, path, fixture.serve.running.adminToken);
    stream.write(grpcFrame(joinMessage));
    stream.pause();
    /** Reads again, counting gRPC messages until the stream ends; gives the count and the trailers. */
    const resume = () =>
      new Promise<{ messages: number; status: string; details: string }>((resolve) => {
        let buffered = Buffer.alloc(0);
        let messages = 0;
        let trailers: http2.IncomingHttpHeaders = {};
        stream.on('data', (chunk: Buffer) => {
          buffered = Buffer.concat([buffered, chunk]);
          while (buffered.length >= 5 && buffered.length >= 5 + buffered.readUInt32BE(1)) {
            buffered = buffered.subarray(5 + buffered.readUInt32BE(1));
            messages++;
          }
        });
        stream.on('trailers', (headers) => (trailers = headers));
        // 'end' comes after the last data and the trailers; 'close' would wait for our side too.
        stream.on('end', () =>
          resolve({ messages, status: String(trailers['grpc-status']), details: decodeURIComponent(String(trailers['grpc-message'] ?? '')) }),
        );
        stream.resume();
      });
    return { resume };
  }

  const until = async (check: () => boolean) => {
    for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
    expect(check()).toBe(true);
  };

  const rooms = [
    {
      service: 'user.v1.UserService',
      method: 'UserChat',
      // ChatMessage { room: "flood" }
      join: Buffer.concat([Buffer.from([0x0a, 5]), Buffer.from('flood')]),
      message: (text: string) => ({ room: 'flood', text }),
      participants: () => fixture.serve.running.users.chatParticipantCount(),
    },
    {
      service: 'monitoring.v1.MonitoringService',
      method: 'Chat',
      // ChatMessage { sender: "stalled" }: joining is opening the call
      join: Buffer.concat([Buffer.from([0x0a, 7]), Buffer.from('stalled')]),
      message: (text: string) => ({ sender: 'op', text }),
      participants: () => fixture.serve.running.monitoring.chatParticipants(),
    },
  ] as const;

  describe.each(rooms)('$service $method', ({ service, method, join, message, participants }) => {
    it(`drops a participant that never reads with RESOURCE_EXHAUSTED while the sender and a reader go on through ${MESSAGES} messages of 1 KB`, async () => {
      const { Client } = serviceDefinition(service);
      const open = () => {
        const client = new Client(fixture.serve.address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }) as grpc.Client &
          Record<string, any>;
        const call: grpc.ClientDuplexStream<any, any> = client[method](fixture.serve.auth());
        call.on('error', () => {});
        return { client, call };
      };

      const stalled = stalledPeer(`/${service}/${method}`, join);
      await until(() => participants() === 1);
      const reader = open();
      let heard = 0;
      reader.call.on('data', () => heard++);
      reader.call.write(message(''));
      await until(() => participants() === 2);
      const sender = open();
      sender.call.on('data', () => {});

      // In steps of 100, each heard by the reader before the next: the reader keeps up, the peer does not read at all.
      for (let sent = 0; sent < MESSAGES; ) {
        for (let i = 0; i < 100; i++, sent++) sender.call.write(message(TEXT));
        await until(() => heard === sent);
      }
      // The peer is out of the room; the others still talk.
      expect(participants()).toBe(2);
      sender.call.write(message('still here'));
      await until(() => heard === MESSAGES + 1);

      // What the peer gets once it reads again: what was already on its way, then the status.
      const { messages, status, details } = await stalled.resume();
      expect(status).toBe(String(grpc.status.RESOURCE_EXHAUSTED));
      expect(details).toContain('a participant that does not read is disconnected');
      // 64 KiB of HTTP/2 window holds about 60 of these messages, grpc-js's queue 16 more; nothing like the 1000 that waited.
      expect(messages).toBeLessThan(100);

      for (const { client, call } of [reader, sender]) {
        call.end();
        client.close();
      }
    });
  });
});
