/**
 * serve's service definitions (src/grpc/protos.ts: protobufjs/light over the
 * compiled proto/loader.json) against @grpc/proto-loader's own, loaded from
 * the .proto files with the same options: the same methods, paths,
 * streaming and names, and for every method both ways the same bytes from
 * the same object and the same object from the same bytes. The objects are
 * drawn from the compiled schema, so a field added to a .proto is covered
 * as it comes.
 */
import type * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { methodOf } from '../../src/grpc/proto-wire.js';
import { PROTO_ROOT, serviceDefinition, type ServiceName } from '../../src/grpc/protos.js';
import { message } from '../helpers/wire-arbitraries.js';

const SERVICES: Record<ServiceName, string> = {
  'user.v1.UserService': 'user/v1/user.proto',
  'monitoring.v1.MonitoringService': 'monitoring/v1/monitoring.proto',
  'inventory.v1.InventoryService': 'inventory/v1/inventory.proto',
  'payment.v1.PaymentService': 'payment/v1/payment.proto',
  'order.v1.OrderService': 'order/v1/order.proto',
  'grpc.health.v1.Health': 'grpc/health/v1/health.proto',
};

const OPTIONS: protoLoader.Options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_ROOT] };

function loaderDefinition(name: ServiceName): grpc.ServiceDefinition {
  const definition = protoLoader.loadSync(SERVICES[name], OPTIONS);
  return definition[name] as grpc.ServiceDefinition;
}

const pairs = (Object.keys(SERVICES) as ServiceName[]).flatMap((name) => {
  const ours = serviceDefinition(name).service as Record<string, grpc.MethodDefinition<object, object>>;
  const theirs = loaderDefinition(name) as Record<string, grpc.MethodDefinition<object, object>>;
  return Object.keys(theirs).map((method) => ({ path: `/${name}/${method}`, ours: ours[method]!, theirs: theirs[method]! }));
});

describe("serve's service definitions, against proto-loader's", () => {
  it('have the same services and methods, each with its path, streaming and name', () => {
    expect(pairs.length).toBeGreaterThan(20);
    for (const name of Object.keys(SERVICES) as ServiceName[]) {
      expect(Object.keys(serviceDefinition(name).service), name).toEqual(Object.keys(loaderDefinition(name)));
    }
    for (const { path, ours, theirs } of pairs) {
      expect({ path: ours.path, requestStream: ours.requestStream, responseStream: ours.responseStream, originalName: ours.originalName }, path).toEqual({
        path: theirs.path,
        requestStream: theirs.requestStream,
        responseStream: theirs.responseStream,
        originalName: theirs.originalName,
      });
    }
  });

  it('make clients with the methods under both names', () => {
    const { Client } = serviceDefinition('user.v1.UserService');
    expect(typeof Client.prototype.GetUser).toBe('function');
    expect(typeof Client.prototype.getUser).toBe('function');
    expect(Client.service).toBe(serviceDefinition('user.v1.UserService').service);
  });

  describe.each(pairs)('$path', ({ path, ours, theirs }) => {
    const { input, output } = methodOf(path);

    it('encode an object to the same bytes and decode bytes to the same object', () => {
      fc.assert(
        fc.property(message(input, 0), message(output, 0), (request, response) => {
          const requestBytes = theirs.requestSerialize(request);
          expect(ours.requestSerialize(request)).toEqual(requestBytes);
          expect(ours.requestDeserialize(requestBytes)).toEqual(theirs.requestDeserialize(requestBytes));
          const responseBytes = theirs.responseSerialize(response);
          expect(ours.responseSerialize(response)).toEqual(responseBytes);
          expect(ours.responseDeserialize(responseBytes)).toEqual(theirs.responseDeserialize(responseBytes));
        }),
        { numRuns: 30 },
      );
    });
  });

  it('refuse what proto-loader refuses, with its message', () => {
    const ours = serviceDefinition('user.v1.UserService').service.GetUser!;
    const theirs = loaderDefinition('user.v1.UserService').GetUser!;
    expect(() => ours.requestSerialize([] as never)).toThrow(/expected object with GetUserRequest structure, got array instead/);
    expect(() => theirs.requestSerialize([] as never)).toThrow(/expected object with GetUserRequest structure, got array instead/);
    const truncated = Buffer.from([0x0a, 0x05, 0x61]);
    expect(() => ours.requestDeserialize(truncated)).toThrow();
    expect(() => theirs.requestDeserialize(truncated)).toThrow();
  });
});
