/**
 * One unary gRPC call over node:http2, for the one-shot client commands
 * (`miniapp users get`): the whole of such a command is one request and one
 * answer, and loading grpc-js (and a proto loader) costs several times what
 * starting Node does. Plain-text channels only; what grpc-js adds for a
 * long-lived channel (keepalive pings, round_robin across addresses,
 * reconnection) does not apply to one call.
 *
 * The result says which of three things happened: an answer, a gRPC status
 * from the server, or that the call never reached a server that answered
 * (connection refused, reset, anything unexpected on the wire). The caller
 * retries the last kind through grpc-js, whose messages for an unreachable
 * server are the ones users know; so only idempotent calls come here.
 */
import { connect, constants } from 'node:http2';
import { Status, type StatusError } from './errors.js';

export type UnaryOutcome = { kind: 'answer'; message: Buffer } | { kind: 'status'; error: StatusError } | { kind: 'unreached'; reason: string };

export interface UnaryCallOptions {
  /** HOST:PORT, as grpc-js takes it ([::1]:50051 for IPv6). */
  address: string;
  /** /package.Service/Method */
  path: string;
  message: Uint8Array;
  /** Sent as `authorization: Bearer <token>` when given. */
  token?: string | undefined;
  deadlineMs: number;
}

function statusError(code: number, details: string): StatusError {
  return Object.assign(new Error(`${code} ${details}`), { code, details });
}

function grpcTimeout(ms: number): string {
  // At most 8 digits (gRPC over HTTP/2): milliseconds, else whole seconds.
  return ms < 1e8 ? `${Math.max(1, Math.ceil(ms))}m` : `${Math.ceil(ms / 1000)}S`;
}

function decodeMessage(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

export function unaryCall(options: UnaryCallOptions): Promise<UnaryOutcome> {
  return new Promise((resolve) => {
    let settled = false;
    const session = connect(`http://${options.address}`);
    const finish = (outcome: UnaryOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      session.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ kind: 'status', error: statusError(Status.DEADLINE_EXCEEDED, 'Deadline exceeded') }), options.deadlineMs);
    session.on('error', (error: Error) => finish({ kind: 'unreached', reason: error.message }));
    session.on('goaway', () => finish({ kind: 'unreached', reason: 'the server went away' }));

    const frame = Buffer.alloc(5 + options.message.length);
    frame.writeUInt32BE(options.message.length, 1);
    frame.set(options.message, 5);
    const stream = session.request({
      [constants.HTTP2_HEADER_METHOD]: 'POST',
      [constants.HTTP2_HEADER_PATH]: options.path,
      [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
      te: 'trailers',
      'grpc-timeout': grpcTimeout(options.deadlineMs),
      'grpc-accept-encoding': 'identity',
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
    });
    let answered = false;
    const chunks: Buffer[] = [];
    let status: { code: number; details: string } | undefined;
    const readStatus = (headers: Record<string, unknown>) => {
      const code = headers['grpc-status'];
      if (code === undefined) return;
      status = { code: Number(code), details: decodeMessage(String(headers['grpc-message'] ?? '')) };
    };
    stream.on('response', (headers) => {
      const type = String(headers[constants.HTTP2_HEADER_CONTENT_TYPE] ?? '');
      if (Number(headers[constants.HTTP2_HEADER_STATUS]) !== 200 || !type.startsWith('application/grpc')) {
        finish({ kind: 'unreached', reason: `HTTP ${headers[constants.HTTP2_HEADER_STATUS]} ${type}` });
        return;
      }
      answered = true;
      readStatus(headers);
    });
    stream.on('trailers', (trailers) => readStatus(trailers));
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('error', (error: Error) => finish({ kind: 'unreached', reason: error.message }));
    stream.on('close', () => {
      if (!answered) return finish({ kind: 'unreached', reason: 'the stream closed without an answer' });
      if (!status) return finish({ kind: 'unreached', reason: 'no grpc-status' });
      if (status.code !== 0) return finish({ kind: 'status', error: statusError(status.code, status.details) });
      const body = Buffer.concat(chunks);
      const length = body.length >= 5 ? body.readUInt32BE(1) : -1;
      if (length < 0 || body[0] !== 0 || body.length !== 5 + length) {
        return finish({ kind: 'unreached', reason: 'an answer that is not one uncompressed message' });
      }
      finish({ kind: 'answer', message: body.subarray(5) });
    });
    stream.end(frame);
  });
}
