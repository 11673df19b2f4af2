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

/** The one method of the protocol's two versions, v1 and v1alpha. */
const REFLECTION_METHODS = ['/grpc.reflection.v1.ServerReflection/ServerReflectionInfo', '/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo'];

/** grpc.status.INVALID_ARGUMENT, as the reflection protocol's error_code carries it. */
const INVALID_ARGUMENT = 3;
const REQUEST_KINDS = 'list_services, file_by_filename, file_containing_symbol, file_containing_extension or all_extension_numbers_of_type';

/**
 * The stream with its requests that set no message_request answered here: INVALID_ARGUMENT naming the field, in the
 * protocol's own error_response (the stream goes on), where @grpc/reflection answered UNIMPLEMENTED "Unimplemented
 * method for request: undefined". Every other request goes to the library's handler.
 */
function unsetRequestsAnswered(stream: grpc.ServerDuplexStream<unknown, unknown>): grpc.ServerDuplexStream<unknown, unknown> {
  const on = stream.on.bind(stream);
  const answer = (message: { host?: string; messageRequest?: string } | undefined) =>
    stream.write({
      validHost: message?.host ?? '',
      originalRequest: message,
      errorResponse: { errorCode: INVALID_ARGUMENT, errorMessage: `message_request is not set: ask for one of ${REQUEST_KINDS}` },
    });
  stream.on = ((event: string, listener: (...args: unknown[]) => void) =>
    event === 'data'
      ? on('data', (message: { messageRequest?: string } | undefined) => (message?.messageRequest ? listener(message) : answer(message)))
      : on(event, listener)) as typeof stream.on;
  return stream;
}

/** Every file of the compiled descriptor set, by name, as encoded FileDescriptorProto bytes. */
function descriptorFiles(path = DESCRIPTOR_SET): Map<string, Uint8Array> {
  const files = new Map<string, Uint8Array>();
  for (const file of readDescriptorSet(path).file) files.set(file.name, toBinary(FileDescriptorProtoSchema, file));
  return files;
}

/** The services (v1 and v1alpha) a ReflectionService adds to a server, by the path of their one method. */
function servicesOf(reflection: ReflectionService): Map<string, { definition: grpc.ServiceDefinition; implementation: grpc.UntypedServiceImplementation }> {
  const added = new Map<string, { definition: grpc.ServiceDefinition; implementation: grpc.UntypedServiceImplementation }>();
  reflection.addToServer({
    addService: (definition, implementation) => void added.set(Object.values(definition)[0]!.path, { definition, implementation }),
  });
  return added;
}

/**
 * Adds reflection for `services` (full names) to the server. Every file of
 * the descriptor set is available by name and by symbol; list_services
 * answers exactly the given services.
 *
 * The index of every file and symbol is built at the first reflection call,
 * not at start-up (about 150 ms of CPU that most runs of serve never need):
 * the server is given the protocol's services at once, each handing its
 * streams to the indexed service once there is one. The protocol's own
 * messages are loaded at the first call too.
 */
export function addReflection(server: grpc.Server, services: readonly string[], path = DESCRIPTOR_SET): void {
  let indexed: ReturnType<typeof servicesOf> | undefined;
  const index = () => {
    // The shape @grpc/reflection reads from a package definition: entries carrying fileDescriptorProtos.
    const definition = Object.fromEntries([...descriptorFiles(path)].map(([name, bytes]) => [name, { fileDescriptorProtos: [bytes] }]));
    return servicesOf(new ReflectionService(definition as never, { services: [...services] }));
  };
  // The protocol's own messages are loaded (by @grpc/reflection, from its .proto files) at the first call too: the
  // server is given each method's path and kind now, and its (de)serializers, which need them, read them when called.
  // An empty package gives the protocol's service definitions without indexing anything.
  let protocol: ReturnType<typeof servicesOf> | undefined;
  const codec = (method: string) => {
    protocol ??= servicesOf(new ReflectionService({}, { services: [] }));
    return protocol.get(method)!.definition.ServerReflectionInfo!;
  };
  for (const method of REFLECTION_METHODS) {
    const definition: grpc.ServiceDefinition = {
      ServerReflectionInfo: {
        path: method,
        requestStream: true,
        responseStream: true,
        originalName: 'serverReflectionInfo',
        requestSerialize: (value: unknown) => codec(method).requestSerialize(value),
        requestDeserialize: (bytes: Buffer) => codec(method).requestDeserialize(bytes),
        responseSerialize: (value: unknown) => codec(method).responseSerialize(value),
        responseDeserialize: (bytes: Buffer) => codec(method).responseDeserialize(bytes),
      },
    };
    server.addService(definition, {
      ServerReflectionInfo: (stream: grpc.ServerDuplexStream<unknown, unknown>) => {
        indexed ??= index();
        const handler = indexed.get(method)!.implementation.ServerReflectionInfo as (stream: grpc.ServerDuplexStream<unknown, unknown>) => void;
        handler(unsetRequestsAnswered(stream));
      },
    });
  }
}
