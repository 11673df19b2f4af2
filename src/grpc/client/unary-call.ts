/**
 * One gRPC call over node:http2, for the one-shot client commands
 * (`miniapp users get`, `users list`, `orders list`, `inventory stock`,
 * `monitor metrics --count N`): the whole of such a command is one request
 * and its answer (one message, or the messages of a server stream), and
 * loading grpc-js (and a proto loader) costs several times what starting
 * Node does. Plain-text channels only; what grpc-js adds for a long-lived
 * channel (round_robin across addresses, reconnection) does not apply to
 * one call, and its keepalive is done here for calls that may last.
 *
 * The result says which of three things happened: an answer, a gRPC status
 * from the server, or that the call never reached a server that answered
 * (connection refused, reset, anything unexpected on the wire). The caller
 * retries the last kind through grpc-js, whose messages for an unreachable
 * server are the ones users know; so only idempotent calls come here.
 */
import { connect, constants, type IncomingHttpHeaders } from 'node:http2';
import { Status, type StatusError } from './errors.js';

export type UnaryOutcome =
  | { kind: 'answer'; messages: Buffer[]; headers: IncomingHttpHeaders }
  | { kind: 'status'; error: StatusError; received: number }
  | { kind: 'unreached'; reason: string; received: number }
  /** `onMessage` threw: what it threw. */
  | { kind: 'failed'; error: unknown }
  /** `signal` aborted the call. */
  | { kind: 'aborted' };

export interface UnaryCallOptions {
  /** HOST:PORT, as grpc-js takes it ([::1]:50051 for IPv6). */
  address: string;
  /** /package.Service/Method */
  path: string;
  message: Uint8Array;
  /** Sent as `authorization: Bearer <token>` when given. */
  token?: string | undefined;
  /** Time limit of the whole call (sent as grpc-timeout); none when undefined. */
  deadlineMs?: number | undefined;
  /** For a call without a deadline: time limit of the server's first answer (its response headers). */
  connectMs?: number | undefined;
  /** Each message as it comes (a server stream shown as it goes); without it, the answer holds them all. */
  onMessage?: ((message: Buffer) => void) | undefined;
  /** Pings the server every so often and gives up on it when a ping goes unanswered, as grpc-js's keepalive does. */
  keepaliveMs?: number | undefined;
  /** Cancels the call (Ctrl-C). */
  signal?: AbortSignal | undefined;
}

/** The largest message taken, as grpc-js's default (grpc.max_receive_message_length). */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/** How long a keepalive ping may go unanswered (grpc-js's time-out of the channel's keepalive). */
const KEEPALIVE_TIMEOUT_MS = 3_000;

function statusError(code: number, details: string): StatusError {
  return Object.assign(new Error(`${code} ${details}`), { code, details });
}

function grpcTimeout(ms: number): string {
  // At most 8 digits (gRPC over HTTP/2): milliseconds, else whole seconds.
  return ms < 1e8 ? `${Math.max(1, Math.ceil(ms))}m` : `${Math.ceil(ms / 1000)}S`;
}

/** A gRPC message as it goes on the wire: uncompressed (0), its length (4 bytes, big-endian), its bytes. */
export function grpcFrame(message: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
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
    let received = 0;
    let answered = false;
    const session = connect(`http://${options.address}`);
    const timers: { clear(): void }[] = [];
    const after = (ms: number, then: () => void) => {
      const timer = setTimeout(then, ms);
      timers.push({ clear: () => clearTimeout(timer) });
      return timer;
    };
    const abort = () => finish({ kind: 'aborted' });
    const finish = (outcome: UnaryOutcome) => {
      if (settled) return;
      settled = true;
      for (const timer of timers) timer.clear();
      options.signal?.removeEventListener('abort', abort);
      session.destroy();
      resolve(outcome);
    };
    if (options.signal?.aborted) return finish({ kind: 'aborted' });
    options.signal?.addEventListener('abort', abort, { once: true });
    if (options.deadlineMs !== undefined) {
      after(options.deadlineMs, () => finish({ kind: 'status', error: statusError(Status.DEADLINE_EXCEEDED, 'Deadline exceeded'), received }));
    }
    session.on('error', (error: Error) => finish({ kind: 'unreached', reason: error.message, received }));
    // A GOAWAY lets the streams it names run to their end (a draining serve ends its streams with their status
    // after it): an answered call waits for its own end; one not yet answered was not taken.
    session.on('goaway', () => {
      if (!answered) finish({ kind: 'unreached', reason: 'the server went away', received });
    });
    if (options.keepaliveMs !== undefined) {
      const every = options.keepaliveMs;
      // One timer at a time: the next ping's, or the wait for this one's answer.
      let keepalive: NodeJS.Timeout | undefined;
      timers.push({ clear: () => clearTimeout(keepalive) });
      const ping = () => {
        if (settled || session.destroyed) return;
        keepalive = setTimeout(() => finish({ kind: 'unreached', reason: 'keepalive ping unanswered', received }), KEEPALIVE_TIMEOUT_MS);
        session.ping((error) => {
          clearTimeout(keepalive);
          if (error) finish({ kind: 'unreached', reason: error.message, received });
          else if (!settled) keepalive = setTimeout(ping, every);
        });
      };
      // Node emits 'connect' even for a session destroyed while it connected (a call that ended first).
      session.once('connect', () => {
        if (!settled) keepalive = setTimeout(ping, every);
      });
    }

    const frame = grpcFrame(options.message);
    const stream = session.request({
      [constants.HTTP2_HEADER_METHOD]: 'POST',
      [constants.HTTP2_HEADER_PATH]: options.path,
      [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
      te: 'trailers',
      ...(options.deadlineMs !== undefined ? { 'grpc-timeout': grpcTimeout(options.deadlineMs) } : {}),
      'grpc-accept-encoding': 'identity',
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
    });
    if (options.deadlineMs === undefined && options.connectMs !== undefined) {
      const waiting = after(options.connectMs, () =>
        finish({ kind: 'status', error: statusError(Status.DEADLINE_EXCEEDED, 'could not connect in time'), received }),
      );
      stream.once('response', () => clearTimeout(waiting));
    }
    let responseHeaders: IncomingHttpHeaders = {};
    const messages: Buffer[] = [];
    // What has come of the next message: its chunks, their size, and the size that completes it (its prefix first).
    let parts: Buffer[] = [];
    let buffered = 0;
    let needed = 5;
    /** Whether the prefix of the next message has been read (`needed` is then the whole message's size). */
    let prefixed = false;
    let broken: string | undefined;
    let status: { code: number; details: string } | undefined;
    const readStatus = (headers: IncomingHttpHeaders) => {
      const code = headers['grpc-status'];
      if (code === undefined) return;
      status = { code: Number(code), details: decodeMessage(String(headers['grpc-message'] ?? '')) };
    };
    stream.on('response', (headers) => {
      const type = String(headers[constants.HTTP2_HEADER_CONTENT_TYPE] ?? '');
      if (Number(headers[constants.HTTP2_HEADER_STATUS]) !== 200 || !type.startsWith('application/grpc')) {
        finish({ kind: 'unreached', reason: `HTTP ${headers[constants.HTTP2_HEADER_STATUS]} ${type}`, received });
        return;
      }
      answered = true;
      responseHeaders = headers;
      readStatus(headers);
    });
    stream.on('trailers', (trailers) => readStatus(trailers));
    // Length-prefixed messages, split across DATA frames as the server pleases; the chunks of one are joined once it
    // is whole, and one past grpc-js's default limit ends the call as grpc-js ends it.
    stream.on('data', (chunk: Buffer) => {
      if (broken || settled) return;
      parts.push(chunk);
      buffered += chunk.length;
      while (buffered >= needed) {
        const data = parts.length === 1 ? parts[0]! : Buffer.concat(parts, buffered);
        if (!prefixed) {
          if (data[0] !== 0) {
            broken = 'a compressed message, which was not asked for';
            return;
          }
          const length = data.readUInt32BE(1);
          if (length > MAX_MESSAGE_BYTES) {
            finish({
              kind: 'status',
              error: statusError(Status.RESOURCE_EXHAUSTED, `Received message larger than max (${length} vs ${MAX_MESSAGE_BYTES})`),
              received,
            });
            return;
          }
          parts = [data];
          needed = 5 + length;
          prefixed = true;
          continue;
        }
        const message = data.subarray(5, needed);
        const rest = data.subarray(needed);
        parts = rest.length > 0 ? [rest] : [];
        buffered = rest.length;
        needed = 5;
        prefixed = false;
        received++;
        if (!options.onMessage) messages.push(message);
        else {
          try {
            options.onMessage(message);
          } catch (error) {
            finish({ kind: 'failed', error });
            return;
          }
        }
      }
    });
    stream.on('error', (error: Error) => finish({ kind: 'unreached', reason: error.message, received }));
    stream.on('close', () => {
      if (!answered) return finish({ kind: 'unreached', reason: 'the stream closed without an answer', received });
      if (broken || buffered > 0) return finish({ kind: 'unreached', reason: broken ?? 'a message cut short', received });
      if (!status) return finish({ kind: 'unreached', reason: 'no grpc-status', received });
      if (status.code !== 0) return finish({ kind: 'status', error: statusError(status.code, status.details), received });
      finish({ kind: 'answer', messages, headers: responseHeaders });
    });
    stream.end(frame);
  });
}
