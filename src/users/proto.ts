/**
 * The user.v1 protocol: the messages that the server and the client both
 * handle, in proto-loader form (snake_case, int64 as strings), and the
 * service definition from the one loader (src/grpc/protos.ts).
 */
import * as grpc from '@grpc/grpc-js';
import { serviceDefinition, toTimestamp, type Timestamp } from '../grpc/protos.js';
import type { UserRecord } from './user-record.js';

export { toTimestamp, type Timestamp } from '../grpc/protos.js';

export interface UserMessage {
  id: string;
  username: string;
  email: string;
  full_name: string;
  is_active: boolean;
  roles: string[];
  created_at: Timestamp | null;
}

/** A stored user as the User message (never the password hash, which a record does not hold). */
export function userMessage(user: UserRecord): UserMessage {
  return {
    id: String(user.id),
    username: user.username,
    email: user.email,
    full_name: user.fullName,
    is_active: user.isActive,
    roles: user.roles,
    created_at: toTimestamp(new Date(user.createdAt)),
  };
}

export type { EventTypeName } from './user-record.js';

// Messages that the server and the client both handle, in loader form (snake_case, int64 as string).

export interface CreateUserRequest {
  username: string;
  email: string;
  password: string;
  full_name: string;
}

export interface ChatMessage {
  room: string;
  sender: string;
  text: string;
  sent_at: Timestamp | null;
}

/** The answer to one row of ImportUsers (an addition to the spec). */
export interface ImportUsersResponse {
  /** 0-based position in the stream the client sent. */
  index: number;
  result?: 'user' | 'failure';
  user?: UserMessage | null;
  failure?: { status: string; message: string } | null;
}

export interface BulkCreateFailure {
  /** 0-based position in the stream the client sent. */
  index: number;
  status: string;
  message: string;
}

/** ListUsers' initial metadata (in a module without grpc-js, for the light path of `users list`). */
export { LIST_NEXT_PAGE_TOKEN_HEADER, LIST_PAGE_SIZE_HEADER, LIST_TOTAL_HEADER } from './user-wire.js';
/**
 * The response header of WatchUserChanges, sent as the watch goes live:
 * the sequence it delivers changes after, so that a client that sees no
 * change before the stream breaks still resumes without a gap.
 */
export const WATCH_POSITION_HEADER = 'miniapp-watch-after';

export function watchPositionHeaders(after: number): grpc.Metadata {
  const headers = new grpc.Metadata();
  headers.set(WATCH_POSITION_HEADER, String(after));
  return headers;
}

/** The update_mask paths UpdateUser knows (AIP-134); "*" stands for all of them. */
export const UPDATE_PATHS = ['username', 'email', 'full_name', 'is_active', 'roles'] as const;
export type UpdatePath = (typeof UPDATE_PATHS)[number];

export function userServiceDefinition(): { service: grpc.ServiceDefinition; Client: grpc.ServiceClientConstructor } {
  return serviceDefinition('user.v1.UserService');
}
