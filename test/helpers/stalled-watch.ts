/** A raw node:http2 WatchUserChanges stream that never reads until told to (test/users/watch-*.test.ts). */
import http2 from 'node:http2';
import { grpcFrame, rawGrpcStream } from './raw-grpc.js';

/**
 * A watch stream of a peer that never reads: its own connection, a 1 KiB window, the stream paused. `resume` reads
 * again, counting gRPC messages, and gives the count and the grpc-status once the stream ends (or undefined when it
 * is still open after `ms`).
 */
export function stalledWatch(cleanups: (() => void)[], address: string, token: string, request: Buffer) {
  const session = http2.connect(`http://${address}`, { settings: { initialWindowSize: 1024 } });
  session.on('error', () => undefined);
  cleanups.push(() => session.destroy());
  const stream = rawGrpcStream(session, '/user.v1.UserService/WatchUserChanges', token);
  stream.end(grpcFrame(request));
  stream.pause();
  const answered = new Promise<void>((resolve) => stream.once('response', () => resolve()));
  let trailers: http2.IncomingHttpHeaders | undefined;
  stream.on('trailers', (headers) => (trailers = headers));
  const resume = (ms: number) =>
    new Promise<{ messages: number; status: string | undefined; details: string | undefined }>((resolve) => {
      let buffered = Buffer.alloc(0);
      let messages = 0;
      const done = () =>
        resolve({
          messages,
          status: trailers?.['grpc-status'] as string | undefined,
          details: trailers?.['grpc-message'] === undefined ? undefined : decodeURIComponent(String(trailers['grpc-message'])),
        });
      const timer = setTimeout(done, ms);
      stream.on('data', (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        while (buffered.length >= 5 && buffered.length >= 5 + buffered.readUInt32BE(1)) {
          buffered = buffered.subarray(5 + buffered.readUInt32BE(1));
          messages++;
        }
      });
      stream.on('end', () => {
        clearTimeout(timer);
        done();
      });
      stream.resume();
    });
  return { answered, resume };
}
