/**
 * gRPC server reflection (v1 and v1alpha) that serves the real files: each
 * .proto under its own name (`user/v1/user.proto`,
 * `google/protobuf/empty.proto`, ...) with its real dependency list, as buf
 * compiled them into the descriptor set. Strict clients (grpcurl, Postman,
 * evans, protobuf's DescriptorPool) link those without guessing.
 *
 * @grpc/reflection does the protocol; what it is given here differs from its
 * usual input. Built from a proto-loader package definition it would serve
 * the descriptors proto-loader synthesises, one file per package with no
 * dependencies (grpc/grpc-node#2595, #2958, #3018). Handed the descriptor
 * set's own FileDescriptorProtos instead, it indexes and serves those.
 */
import type * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { toBinary } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { DESCRIPTOR_SET } from './protos.js';
import { readDescriptorSet } from './descriptor-set.js';

/** Every file of the compiled descriptor set, by name, as encoded FileDescriptorProto bytes. */
export function descriptorFiles(path = DESCRIPTOR_SET): Map<string, Uint8Array> {
  const files = new Map<string, Uint8Array>();
  for (const file of readDescriptorSet(path).file) files.set(file.name, toBinary(FileDescriptorProtoSchema, file));
  return files;
}

/**
 * Adds reflection for `services` (full names) to the server. Every file of
 * the descriptor set is available by name and by symbol; list_services
 * answers exactly the given services.
 */
export function addReflection(server: grpc.Server, services: readonly string[], path = DESCRIPTOR_SET): void {
  // The shape @grpc/reflection reads from a package definition: entries carrying fileDescriptorProtos.
  const definition = Object.fromEntries([...descriptorFiles(path)].map(([name, bytes]) => [name, { fileDescriptorProtos: [bytes] }]));
  new ReflectionService(definition as never, { services: [...services] }).addToServer(server);
}
