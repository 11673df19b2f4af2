/**
 * Issue 10, defect 3: reflection serves descriptors that strict clients can
 * link. The test builds a strict descriptor pool (@bufbuild/protobuf's
 * createFileRegistry, which throws on any name it cannot resolve) from the
 * server's reflection answers alone, for every service it lists, over
 * reflection v1 and v1alpha, and calls CreateUser and GetUser with messages
 * made from that pool only: no .proto file of the services is read.
 */
import { describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { create, createFileRegistry, fromBinary, toBinary, type DescMessage, type FileRegistry } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema, FileDescriptorSetSchema, type FileDescriptorProto } from '@bufbuild/protobuf/wkt';
import { PROTO_ROOT } from '../../src/grpc/protos.js';
import { useUserClients } from '../helpers/user-client.js';
import { BACKENDS } from '../helpers/postgres.js';

describe.each(BACKENDS)('on %s', (backend) => {
  const fixture = useUserClients(backend);

  type ReflectionVersion = 'v1' | 'v1alpha';

  /** A client of the reflection protocol itself (its own .proto; the services' descriptors come over the wire). */
  function reflectionClient(version: ReflectionVersion): grpc.Client & Record<string, any> {
    const definition = protoLoader.loadSync(`grpc/reflection/${version}/reflection.proto`, { keepCase: true, includeDirs: [PROTO_ROOT] });
    const Client = (grpc.loadPackageDefinition(definition) as any).grpc.reflection[version].ServerReflection as grpc.ServiceClientConstructor;
    return new Client(fixture.serve.address, grpc.credentials.createInsecure()) as grpc.Client & Record<string, any>;
  }

  /** One reflection stream: ask, await the answer, in order. */
  async function withReflection<T>(version: ReflectionVersion, use: (ask: (request: object) => Promise<any>) => Promise<T>): Promise<T> {
    const client = reflectionClient(version);
    const call = client.ServerReflectionInfo();
    const waiting: { resolve: (answer: any) => void; reject: (error: Error) => void }[] = [];
    call.on('data', (answer: any) => waiting.shift()?.resolve(answer));
    call.on('error', (error: Error) => {
      for (const w of waiting.splice(0)) w.reject(error);
    });
    const ask = (request: object) =>
      new Promise<any>((resolve, reject) => {
        waiting.push({ resolve, reject });
        call.write(request);
      });
    try {
      return await use(ask);
    } finally {
      call.end();
      client.close();
    }
  }

  /** Every service the server lists and every file they need, as the server describes them. */
  async function reflect(version: ReflectionVersion): Promise<{ services: string[]; files: Map<string, FileDescriptorProto>; fileOf: Map<string, string> }> {
    return withReflection(version, async (ask) => {
      const listed = await ask({ list_services: '' });
      const services: string[] = listed.list_services_response.service.map((s: { name: string }) => s.name);
      const files = new Map<string, FileDescriptorProto>();
      const fileOf = new Map<string, string>();
      const add = (answer: any, request: object) => {
        if (answer.error_response) throw new Error(`reflection answered ${JSON.stringify(request)} with ${answer.error_response.error_message}`);
        const decoded = answer.file_descriptor_response.file_descriptor_proto.map((bytes: Buffer) => fromBinary(FileDescriptorProtoSchema, bytes));
        for (const file of decoded) files.set(file.name, file);
        return decoded as FileDescriptorProto[];
      };
      for (const service of services) {
        const request = { file_containing_symbol: service };
        const [declaring] = add(await ask(request), request);
        fileOf.set(service, declaring!.name);
      }
      // Every dependency named, by file name, until none is missing.
      for (let missing = [...files.values()].flatMap((f) => f.dependency).filter((d) => !files.has(d)); missing.length > 0; ) {
        for (const name of missing) {
          const request = { file_by_filename: name };
          add(await ask(request), request);
        }
        missing = [...files.values()].flatMap((f) => f.dependency).filter((d) => !files.has(d));
      }
      return { services, files, fileOf };
    });
  }

  /**
   * The strict pool of one file: every import must be among the files reflection gave, or it throws.
   * The files go in dependency order (createFileRegistry's own resolver orders a file's imports
   * breadth-first, which adds payment.proto before the timestamp.proto it imports when order.proto
   * imports both).
   */
  function strictPool(files: Map<string, FileDescriptorProto>, name: string): FileRegistry {
    const ordered: FileDescriptorProto[] = [];
    const visit = (wanted: string, importer: string) => {
      if (ordered.some((file) => file.name === wanted)) return;
      const file = files.get(wanted);
      if (!file) throw new Error(`reflection did not give ${wanted}, imported by ${importer}`);
      for (const dependency of file.dependency) visit(dependency, wanted);
      ordered.push(file);
    };
    visit(name, name);
    return createFileRegistry(create(FileDescriptorSetSchema, { file: ordered }));
  }

  function call<I extends DescMessage, O extends DescMessage>(
    client: grpc.Client,
    path: string,
    input: I,
    output: O,
    request: object,
    metadata = new grpc.Metadata(),
  ) {
    return new Promise<any>((resolve, reject) =>
      client.makeUnaryRequest(
        path,
        (message: object) => Buffer.from(toBinary(input, message as never)),
        (bytes: Buffer) => fromBinary(output, bytes),
        create(input, request as never),
        metadata,
        (error, response) => (error ? reject(error) : resolve(response)),
      ),
    );
  }

  describe.each(['v1', 'v1alpha'] as const)('server reflection %s', (version) => {
    it('describes every listed service in files a strict pool links, and CreateUser and GetUser work from that pool alone', async () => {
      const { services, files, fileOf } = await reflect(version);
      expect(services).toEqual(
        expect.arrayContaining([
          'user.v1.UserService',
          'monitoring.v1.MonitoringService',
          'inventory.v1.InventoryService',
          'payment.v1.PaymentService',
          'order.v1.OrderService',
          'grpc.health.v1.Health',
          'grpc.reflection.v1.ServerReflection',
          'grpc.reflection.v1alpha.ServerReflection',
        ]),
      );
      // The real files under their own names, with their real imports.
      expect(fileOf.get('user.v1.UserService')).toBe('user/v1/user.proto');
      expect(files.get('user/v1/user.proto')!.dependency).toEqual([
        'google/protobuf/empty.proto',
        'google/protobuf/field_mask.proto',
        'google/protobuf/timestamp.proto',
      ]);
      // OrderService's ProcessPayment takes payment.v1's messages: the order file imports the payment file.
      expect(fileOf.get('order.v1.OrderService')).toBe('order/v1/order.proto');
      expect(files.get('order/v1/order.proto')!.dependency).toEqual(['google/protobuf/timestamp.proto', 'payment/v1/payment.proto']);
      const order = strictPool(files, 'order/v1/order.proto').getService('order.v1.OrderService')!;
      expect(order.methods.find((m) => m.name === 'ProcessPayment')!.input.typeName).toBe('payment.v1.PaymentRequest');

      for (const service of services) {
        const described = strictPool(files, fileOf.get(service)!).getService(service);
        expect(described, service).toBeDefined();
        // Every method's messages are linked descriptors, down to their fields' types.
        for (const method of described!.methods) {
          for (const message of [method.input, method.output]) {
            expect(message.typeName).toMatch(/\./);
            for (const field of message.fields) if (field.message) expect(field.message.fields, `${message.typeName}.${field.name}`).toBeDefined();
          }
        }
      }

      const users = strictPool(files, 'user/v1/user.proto');
      const userService = users.getService('user.v1.UserService')!;
      const method = (name: string) => userService.methods.find((m) => m.name === name)!;
      const client = new grpc.Client(fixture.serve.address, grpc.credentials.createInsecure());
      try {
        const createUser = method('CreateUser');
        const created = await call(client, '/user.v1.UserService/CreateUser', createUser.input, createUser.output, {
          username: 'reflected',
          email: 'reflected@example.com',
          password: 'correct horse',
          fullName: 'Found By Reflection',
        });
        expect(created.user).toMatchObject({ id: 1n, username: 'reflected', fullName: 'Found By Reflection', isActive: true });
        expect(created.user.createdAt.seconds).toBeGreaterThan(0n);

        const getUser = method('GetUser');
        const fetched = await call(client, '/user.v1.UserService/GetUser', getUser.input, getUser.output, { userId: created.user.id }, fixture.serve.auth());
        expect(fetched).toMatchObject({ id: 1n, username: 'reflected', email: 'reflected@example.com' });
        expect(fetched.$typeName).toBe('user.v1.User');
      } finally {
        client.close();
      }
    });

    it('answers a request that sets no message_request with INVALID_ARGUMENT naming the field, and goes on answering', async () => {
      await withReflection(version, async (ask) => {
        const empty = await ask({});
        expect(empty.error_response).toEqual({
          error_code: grpc.status.INVALID_ARGUMENT,
          error_message:
            'message_request is not set: ask for one of list_services, file_by_filename, file_containing_symbol, file_containing_extension or all_extension_numbers_of_type',
        });
        const hosted = await ask({ host: 'example' });
        expect(hosted).toMatchObject({ valid_host: 'example', error_response: { error_code: grpc.status.INVALID_ARGUMENT } });
        // The stream is still good for a request that is one.
        const listed = await ask({ list_services: '' });
        expect(listed.list_services_response.service.map((s: { name: string }) => s.name)).toContain('user.v1.UserService');
      });
    });
  });
});
