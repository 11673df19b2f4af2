/**
 * The one place the protos of `miniapp serve` are loaded, with one set of
 * proto-loader options for every service, server and client alike: field
 * names as in the .proto (snake_case), int64 as strings, enums as names,
 * defaults filled, oneofs named.
 *
 * Each file is loaded on first use only, so `miniapp users ...` parses
 * user.proto and nothing else. Server reflection does not use these
 * definitions: it serves the descriptor set that `npm run build` compiles
 * from the same files (see reflection.ts), because proto-loader's own
 * descriptors merge files by package and lose their dependencies.
 */
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export const PROTO_ROOT = fileURLToPath(new URL('../../proto', import.meta.url));
/** Compiled by `npm run build` (buf) from every .proto under PROTO_ROOT, imports and comments included. */
export const DESCRIPTOR_SET = join(PROTO_ROOT, 'descriptor-set.binpb');

const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_ROOT],
};

/** Every service `serve` offers, by full name, and the file that declares it. */
const SERVICE_FILES = {
  'user.v1.UserService': 'user/v1/user.proto',
  'monitoring.v1.MonitoringService': 'monitoring/v1/monitoring.proto',
  'inventory.v1.InventoryService': 'inventory/v1/inventory.proto',
  'payment.v1.PaymentService': 'payment/v1/payment.proto',
  'order.v1.OrderService': 'order/v1/order.proto',
  'grpc.health.v1.Health': 'grpc/health/v1/health.proto',
} as const;
export type ServiceName = keyof typeof SERVICE_FILES;

interface Loaded {
  definition: protoLoader.PackageDefinition;
  grpcObject: grpc.GrpcObject;
}

const loaded = new Map<string, Loaded>();

/**
 * .proto files (paths under PROTO_ROOT) and what they import, loaded once: those not loaded yet in one go, so that
 * the files they share (google/protobuf/*, common messages) are parsed once for all of them.
 */
function loadProtoFiles(files: readonly string[]): void {
  const missing = [...new Set(files)].filter((file) => !loaded.has(file));
  if (missing.length === 0) return;
  const definition = protoLoader.loadSync(missing, LOADER_OPTIONS);
  const entry = { definition, grpcObject: grpc.loadPackageDefinition(definition) };
  for (const file of missing) loaded.set(file, entry);
}

function lookUp(name: ServiceName): { service: grpc.ServiceDefinition; Client: grpc.ServiceClientConstructor } {
  let node: unknown = loaded.get(SERVICE_FILES[name])!.grpcObject;
  for (const part of name.split('.')) node = (node as Record<string, unknown>)[part];
  const Client = node as grpc.ServiceClientConstructor;
  return { service: Client.service, Client };
}

/** The grpc-js service definition of a service, and its generic client constructor. */
export function serviceDefinition(name: ServiceName): { service: grpc.ServiceDefinition; Client: grpc.ServiceClientConstructor } {
  loadProtoFiles([SERVICE_FILES[name]]);
  return lookUp(name);
}

/** The definitions of several services (a server's), their files loaded together. */
export function serviceDefinitions(names: readonly ServiceName[]): { service: grpc.ServiceDefinition; Client: grpc.ServiceClientConstructor }[] {
  loadProtoFiles(names.map((name) => SERVICE_FILES[name]));
  return names.map(lookUp);
}

export interface Timestamp {
  seconds: string;
  nanos: number;
}

export function toTimestamp(date: Date): Timestamp {
  const ms = date.getTime();
  return { seconds: String(Math.floor(ms / 1000)), nanos: (((ms % 1000) + 1000) % 1000) * 1_000_000 };
}
