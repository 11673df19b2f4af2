/**
 * The light path of the one-shot client commands: one call of a service of
 * serve over node:http2 (unary-call.ts), its messages encoded and decoded
 * from the compiled schema (grpc/proto-wire.ts) into the very objects the
 * grpc-js client gives, and a failed call mapped to the same typed errors
 * (errors.ts). Neither grpc-js nor a proto loader is loaded.
 *
 * It answers undefined where grpc-js must do the call: a TLS or traced
 * connection (grpc-js's credentials, its tracing interceptor), or a call
 * that never reached a server that answered, which the grpc-js client then
 * makes again and words as users know it. Only calls that change nothing
 * come here, so making one twice is safe.
 */
import type { IncomingHttpHeaders } from 'node:http2';
import type { ConnectOptions } from './channel.js';
import { DEFAULT_DEADLINE_MS, serviceCallError, Status, type ErrorContext } from './errors.js';
import { decodeMessage, encodeMessage, methodOf } from '../proto-wire.js';
import { unaryCall } from './unary-call.js';

/** What grpc-js's channel pings at (channel.ts), for a stream that may last. */
const KEEPALIVE_MS = 10_000;

export interface LightAnswer<T> {
  messages: T[];
  /** The response headers (grpc-js's initial metadata), names in lower case. */
  headers: IncomingHttpHeaders;
}

/** Whether the light path can make calls on this connection at all. */
export function lightPathServes(connection: ConnectOptions): boolean {
  return !connection.tls && !connection.telemetry;
}

/** A message decoded, or what grpc-js says of one it cannot parse (INTERNAL), as the typed error. */
function decodeAnswer<T>(type: string, bytes: Buffer, context: ErrorContext): T {
  try {
    return decodeMessage<T>(type, bytes);
  } catch (error) {
    throw serviceCallError(
      Object.assign(new Error(), { code: Status.INTERNAL, details: `Response message parsing error: ${(error as Error).message}` }),
      context,
    );
  }
}

function contextOf(connection: ConnectOptions, service: string | undefined): ErrorContext {
  return { address: connection.address, deadlineMs: connection.deadlineMs ?? DEFAULT_DEADLINE_MS, tls: false, ...(service ? { service } : {}) };
}

/**
 * One unary or server-streaming call of `path` (/package.Service/Method)
 * within the connection's deadline: its answer (every message, decoded),
 * or the server's status thrown as the typed error grpc-js's client would
 * throw; undefined when grpc-js must make the call (see above).
 * `service` names what the address serves in errors, as the grpc-js
 * client of the same service does (default: the user service).
 */
export async function lightCall<T>(connection: ConnectOptions, path: string, request: object, service?: string): Promise<LightAnswer<T> | undefined> {
  if (!lightPathServes(connection)) return undefined;
  const method = methodOf(path);
  const outcome = await unaryCall({
    address: connection.address,
    path,
    message: encodeMessage(method.input, request as Record<string, unknown>),
    token: connection.token,
    deadlineMs: connection.deadlineMs ?? DEFAULT_DEADLINE_MS,
  });
  if (outcome.kind === 'answer') {
    // A unary answer without its one message is grpc-js's to word.
    if (method.kind === 'unary' && outcome.messages.length !== 1) return undefined;
    const context = contextOf(connection, service);
    return { messages: outcome.messages.map((bytes) => decodeAnswer<T>(method.output, bytes, context)), headers: outcome.headers };
  }
  if (outcome.kind === 'status') throw serviceCallError(outcome.error, contextOf(connection, service));
  if (outcome.kind === 'failed') throw outcome.error;
  // Unreached (no signal is given, so never aborted).
  return undefined;
}

/** How a followed stream on the light path ended (see lightStream). */
export type LightStreamEnd = { kind: 'ended' | 'unreached' | 'aborted' } | { kind: 'lost'; reason: string };

/**
 * A server stream shown as it comes (`monitor metrics --count N`): each
 * message decoded and handed to `onMessage`, with no deadline on the call,
 * but `connectMs` for the server's first answer and grpc-js's keepalive.
 * Resolves 'ended' when the server ended the stream, 'aborted' on `signal`, 'lost' when it broke
 * after it was answered (a status grpc-js's followers reconnect on, or the
 * connection lost; with the reason, as grpc-js's error would say it) and 'unreached' when it never was answered, so that the
 * caller follows the stream on with grpc-js; throws any other status as
 * the typed error, and a connection that did not answer within
 * `connectMs` as grpc-js's client says it.
 */
export async function lightStream<T>(
  connection: ConnectOptions,
  path: string,
  request: object,
  options: { service: string; connectMs: number; onMessage: (message: T) => void; signal?: AbortSignal | undefined },
): Promise<LightStreamEnd> {
  const method = methodOf(path);
  const context = contextOf(connection, options.service);
  const outcome = await unaryCall({
    address: connection.address,
    path,
    message: encodeMessage(method.input, request as Record<string, unknown>),
    token: connection.token,
    connectMs: options.connectMs,
    keepaliveMs: KEEPALIVE_MS,
    signal: options.signal,
    onMessage: (bytes) => options.onMessage(decodeAnswer<T>(method.output, bytes, context)),
  });
  if (outcome.kind === 'answer') return { kind: 'ended' };
  if (outcome.kind === 'aborted') return { kind: 'aborted' };
  if (outcome.kind === 'failed') throw outcome.error;
  if (outcome.kind === 'unreached') {
    if (outcome.received === 0) return { kind: 'unreached' };
    // Worded as grpc-js's stream says a connection dropped under it.
    const dropped = Object.assign(new Error(), { code: Status.UNAVAILABLE, details: outcome.reason });
    return { kind: 'lost', reason: (serviceCallError(dropped, context) as Error).message };
  }
  const error = serviceCallError(outcome.error, context);
  // What grpc-js's followers reconnect on (reconnect.ts), once the server has answered.
  const again = (error as { code?: unknown }).code;
  const connected = outcome.received > 0 || outcome.error.details !== 'could not connect in time';
  if (connected && (again === 'UNAVAILABLE' || again === 'DEADLINE_EXCEEDED' || again === 'CANCELLED'))
    return { kind: 'lost', reason: error instanceof Error ? error.message : String(error) };
  throw error;
}
