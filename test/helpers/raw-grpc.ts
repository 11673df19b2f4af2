/**
 * gRPC spoken over a bare node:http2 session, as a hostile or minimal peer speaks it: what grpc-js does not let a
 * test do (never read, reset at once, open streams without a token).
 */
import type http2 from 'node:http2';
import { grpcFrame } from '../../src/grpc/client/unary-call.js';

/** A gRPC call of `path` on `session`, with `token` as its bearer when given; its errors are the test's to read. */
export function rawGrpcStream(session: http2.ClientHttp2Session, path: string, token?: string): http2.ClientHttp2Stream {
  const stream = session.request({
    ':method': 'POST',
    ':path': path,
    'content-type': 'application/grpc',
    te: 'trailers',
    ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
  });
  stream.on('error', () => undefined);
  return stream;
}

export { grpcFrame };

/** The call's grpc-status, from a trailers-only answer's headers or from its trailers; undefined when it closed without one. */
export function grpcStatusOf(stream: http2.ClientHttp2Stream): Promise<string | undefined> {
  return new Promise((resolve) => {
    stream.on('response', (headers) => headers['grpc-status'] !== undefined && resolve(String(headers['grpc-status'])));
    stream.on('trailers', (trailers) => resolve(String(trailers['grpc-status'])));
    stream.on('close', () => resolve(undefined));
  });
}
