/**
 * The one place the user.v1 protocol is loaded, with one set of
 * proto-loader options for server and client alike: field names as in the
 * .proto (snake_case), int64 as strings, enums as names, defaults filled,
 * oneofs named.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export const PROTO_ROOT = fileURLToPath(new URL('../../proto', import.meta.url));
export const USER_PROTO = 'user/v1/user.proto';

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_ROOT],
};

export interface Timestamp {
  seconds: string;
  nanos: number;
}

export interface UserMessage {
  id: string;
  username: string;
  email: string;
  full_name: string;
  is_active: boolean;
  roles: string[];
  created_at: Timestamp | null;
}

export type EventTypeName = 'CREATED' | 'UPDATED' | 'DELETED';

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

export interface BulkCreateFailure {
  /** 0-based position in the stream the client sent. */
  index: number;
  status: string;
  message: string;
}

/** The update_mask paths UpdateUser knows (AIP-134); "*" stands for all of them. */
export const UPDATE_PATHS = ['username', 'email', 'full_name', 'is_active', 'roles'] as const;
export type UpdatePath = (typeof UPDATE_PATHS)[number];

let cached: { definition: protoLoader.PackageDefinition; grpcObject: grpc.GrpcObject } | undefined;

export function loadUserProto(): { definition: protoLoader.PackageDefinition; grpcObject: grpc.GrpcObject } {
  if (!cached) {
    const definition = protoLoader.loadSync(USER_PROTO, LOADER_OPTIONS);
    cached = { definition, grpcObject: grpc.loadPackageDefinition(definition) };
  }
  return cached;
}

type ServiceClientCtor = grpc.ServiceClientConstructor;

export function userServiceDefinition(): { service: grpc.ServiceDefinition; Client: ServiceClientCtor } {
  const pkg = (loadUserProto().grpcObject.user as grpc.GrpcObject).v1 as grpc.GrpcObject;
  const Client = pkg.UserService as ServiceClientCtor;
  return { service: Client.service, Client };
}

export function monitoringServiceDefinition(): { service: grpc.ServiceDefinition; Client: ServiceClientCtor } {
  const pkg = (loadUserProto().grpcObject.user as grpc.GrpcObject).v1 as grpc.GrpcObject;
  const Client = pkg.MonitoringService as ServiceClientCtor;
  return { service: Client.service, Client };
}

export function toTimestamp(date: Date): Timestamp {
  const ms = date.getTime();
  return { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
}

export function fromTimestamp(ts: Timestamp | null | undefined): Date | undefined {
  if (!ts) return undefined;
  return new Date(Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1_000_000));
}
