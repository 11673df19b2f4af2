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
import * as grpc from '@grpc/grpc-js';
import type { ReflectionService } from '@grpc/reflection';
import { toBinary } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { DESCRIPTOR_SET } from './protos.js';
import { readDescriptorSet } from './descriptor-set.js';
import { failStream } from './status.js';
import { methodOf } from './proto-wire.js';
import { lazyOnce } from '../lazy-once.js';

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

/** The library's messages as the library reads and writes them: its own codec of the protocol's one method. */
type Codec = Pick<grpc.MethodDefinition<unknown, unknown>, 'requestDeserialize' | 'responseSerialize'>;

/** Passes raw bytes through: the reflection streams carry bytes, decoded and encoded by the library's codec once it is loaded. */
const bytes = (value: unknown) => value as Buffer;

/**
 * The stream as the library's handler sees it: requests decoded and answers encoded with the library's codec. A
 * request the codec cannot read ends the stream with INVALID_ARGUMENT, as the checked deserializer ends one
 * (request-check.ts). Messages that came before the handler is given the stream wait in the stream, which is not
 * read until a 'data' listener is added.
 */
function decoded(stream: grpc.ServerDuplexStream<unknown, unknown>, codec: Codec, type: string): grpc.ServerDuplexStream<unknown, unknown> {
  const on = stream.on.bind(stream);
  const view = Object.create(stream) as grpc.ServerDuplexStream<unknown, unknown>;
  view.on = ((event: string, listener: (...args: unknown[]) => void) => {
    if (event !== 'data') return on(event, listener);
    return on('data', (raw: Buffer) => {
      let message: unknown;
      try {
        message = codec.requestDeserialize(raw);
      } catch (error) {
        failStream(stream, { code: grpc.status.INVALID_ARGUMENT, details: `the request is not a valid ${type} message: ${(error as Error).message}` });
        return;
      }
      listener(message);
    });
  }) as typeof stream.on;
  view.write = ((message: unknown) => stream.write(codec.responseSerialize(message))) as typeof stream.write;
  view.end = (() => stream.end()) as typeof stream.end;
  return view;
}

/**
 * Adds reflection for `services` (full names) to the server. Every file of
 * the descriptor set is available by name and by symbol; list_services
 * answers exactly the given services.
 *
 * Nothing of it is loaded at start-up: @grpc/reflection (with proto-loader
 * and protobuf.js's descriptor messages, which it loads when imported), the
 * protocol's own messages, and the index of every file and symbol (about
 * 150 ms of CPU) come at the first reflection call, which most runs of
 * serve never see. The server is given the protocol's two methods at once,
 * carrying bytes; each stream is handed, once the library is loaded, to the
 * library's handler through its codec (decoded).
 */
export function addReflection(server: grpc.Server, services: readonly string[], path = DESCRIPTOR_SET): void {
  const loaded = lazyOnce(async () => {
    const { ReflectionService: Reflection } = await import('@grpc/reflection');
    // The shape @grpc/reflection reads from a package definition: entries carrying fileDescriptorProtos.
    const definition = Object.fromEntries([...descriptorFiles(path)].map(([name, file]) => [name, { fileDescriptorProtos: [file] }]));
    return {
      indexed: servicesOf(new Reflection(definition as never, { services: [...services] })),
      // An empty package gives the protocol's service definitions (their codecs) without indexing anything.
      codecs: servicesOf(new Reflection({}, { services: [] })),
    };
  });
  for (const method of REFLECTION_METHODS) {
    const definition: grpc.ServiceDefinition = {
      ServerReflectionInfo: {
        path: method,
        requestStream: true,
        responseStream: true,
        originalName: 'serverReflectionInfo',
        requestSerialize: bytes,
        requestDeserialize: bytes,
        responseSerialize: bytes,
        responseDeserialize: bytes,
      },
    };
    const { input } = methodOf(method);
    server.addService(definition, {
      ServerReflectionInfo: (stream: grpc.ServerDuplexStream<unknown, unknown>) => {
        loaded().then(
          ({ indexed, codecs }) => {
            const handler = indexed.get(method)!.implementation.ServerReflectionInfo as (stream: grpc.ServerDuplexStream<unknown, unknown>) => void;
            handler(unsetRequestsAnswered(decoded(stream, codecs.get(method)!.definition.ServerReflectionInfo!, input)));
          },
          (error: unknown) => {
            failStream(stream, { code: grpc.status.INTERNAL, details: `server reflection could not start: ${(error as Error).message}` });
          },
        );
      },
    });
  }
}
