/**
 * What the user service's handlers share: the bounds of request fields that
 * are not user fields, errors as gRPC statuses, and user ids from requests.
 */
import * as grpc from '@grpc/grpc-js';
import { RpcError, unavailableStatus } from '../grpc/status.js';
import { resourceExhausted, withRetryInfo } from '../grpc/retry-info.js';
import { HashingBusy } from '../auth/passwords.js';
import { SignupLimited } from '../auth/signup-limits.js';
import { UPDATE_PATHS } from './proto.js';
import { DuplicateUserError, UserValidationError } from './user-store.js';

const { status: Status } = grpc;

/** Bounds of the request fields that are not user fields (those are USER_LIMITS in user-store.ts). */
export const REQUEST_LIMITS = {
  chatRoom: 64,
  chatSender: 64,
  chatText: 4096,
  clientRef: 128,
  watchTypes: 3,
  updatePaths: UPDATE_PATHS.length,
} as const;

/** Any error as a gRPC status; unknown errors become INTERNAL without their details. */
export function toStatus(error: unknown): { code: grpc.status; details: string; metadata?: grpc.Metadata } {
  if (error instanceof RpcError) return { code: error.code, details: error.message };
  if (error instanceof UserValidationError) return { code: Status.INVALID_ARGUMENT, details: error.message };
  if (error instanceof DuplicateUserError) return { code: Status.ALREADY_EXISTS, details: error.message };
  if (error instanceof SignupLimited) return resourceExhausted(error.message, error.retryAfterSeconds * 1000);
  if (error instanceof HashingBusy) return withRetryInfo(Status.UNAVAILABLE, error.message, error.retryAfterSeconds * 1000);
  return unavailableStatus(error) ?? { code: Status.INTERNAL, details: 'internal error' };
}

export function userIdOf(value: string | number | undefined, field = 'user_id'): number {
  const id = Number(value ?? 0);
  if (id > Number.MAX_SAFE_INTEGER)
    throw new RpcError(Status.INVALID_ARGUMENT, `${field} must be at most ${Number.MAX_SAFE_INTEGER} (ids are never larger); got ${value}`);
  if (!Number.isSafeInteger(id) || id <= 0) throw new RpcError(Status.INVALID_ARGUMENT, `${field} must be a positive integer`);
  return id;
}
