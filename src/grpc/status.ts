/**
 * gRPC statuses shared by every service: a typed error that carries its
 * status, names of status codes, and the admin check of operator-only
 * services.
 */
import * as grpc from '@grpc/grpc-js';
import { StoreUnavailableError } from '../store/sql.js';
import { STORE_UNAVAILABLE_DETAILS } from './client/errors.js';

/** A failure with its gRPC status. */
export class RpcError extends Error {
  constructor(
    readonly code: grpc.status,
    message: string,
  ) {
    super(message);
  }
}

export function statusName(code: grpc.status): string {
  return grpc.status[code] ?? String(code);
}

/** Ends a streaming call with a status (grpc-js takes it through the 'error' event). */
export function failStream(call: { emit(event: 'error', error: grpc.ServerErrorResponse): boolean }, status: { code: grpc.status; details: string }): void {
  call.emit('error', Object.assign(new Error(status.details), status));
}

/** How serve ends the streams that never end by themselves when it stops: a status clients retry, elsewhere. */
export const SHUTTING_DOWN = { code: grpc.status.UNAVAILABLE, details: 'the server is shutting down; reconnect to resume' } as const;

export type RpcType = 'unary' | 'client_stream' | 'server_stream' | 'bidi_stream';

/** The kind of a method, in go-grpc-prometheus's words. */
export function rpcType(method: { requestStream: boolean; responseStream: boolean }): RpcType {
  if (method.requestStream) return method.responseStream ? 'bidi_stream' : 'client_stream';
  return method.responseStream ? 'server_stream' : 'unary';
}

/**
 * A status code as Go's codes.Code prints it (OK, Canceled, NotFound, ...):
 * go-grpc-prometheus's grpc_code values, which stock dashboards and alerts
 * match on.
 */
const GO_CODE_NAMES: readonly string[] = [
  'OK',
  'Canceled',
  'Unknown',
  'InvalidArgument',
  'DeadlineExceeded',
  'NotFound',
  'AlreadyExists',
  'PermissionDenied',
  'ResourceExhausted',
  'FailedPrecondition',
  'Aborted',
  'OutOfRange',
  'Unimplemented',
  'Internal',
  'Unavailable',
  'DataLoss',
  'Unauthenticated',
];

export function goCodeName(code: grpc.status): string {
  return GO_CODE_NAMES[code] ?? `Code(${code})`;
}

/**
 * The status of a store that cannot answer (the database is down, or went
 * away in the middle of a transaction): UNAVAILABLE, which tells clients to
 * try again, with what failed; never INTERNAL. Undefined for other errors.
 */
export function unavailableStatus(error: unknown): { code: grpc.status; details: string } | undefined {
  if (!(error instanceof StoreUnavailableError)) return undefined;
  return { code: grpc.status.UNAVAILABLE, details: `${STORE_UNAVAILABLE_DETAILS}: ${error.message}` };
}
