/**
 * The compiled schema's codec (src/grpc/proto-wire.ts) against the one
 * loader's own serializers (src/grpc/protos.ts, held to proto-loader by protos.test.ts),
 * for every method of every service of serve, both ways: what the loader
 * encodes decodes to the loader's very objects, and what the codec encodes
 * the loader reads as it reads its own encoding. Values are drawn from the
 * schema itself, so a field added to a .proto is covered as it comes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeMessage, encodeMessage, methodOf } from '../../src/grpc/proto-wire.js';
import { SERVE_SERVICES, serviceDefinition } from '../../src/grpc/protos.js';
import { message } from '../helpers/wire-arbitraries.js';

const methods = SERVE_SERVICES.flatMap((service) =>
  Object.entries(serviceDefinition(service).service).map(([name, definition]) => ({ path: `/${service}/${name}`, definition })),
);

describe('the compiled message schema and its codec', () => {
  it('knows every method of every service of serve', () => {
    expect(methods.length).toBeGreaterThan(20);
    for (const { path, definition } of methods) {
      const method = methodOf(path);
      expect(definition.path).toBe(path);
      const kind = definition.requestStream
        ? definition.responseStream
          ? 'bidi_streaming'
          : 'client_streaming'
        : definition.responseStream
          ? 'server_streaming'
          : 'unary';
      expect(method.kind, path).toBe(kind);
    }
  });

  describe.each(methods)('$path', ({ path, definition }) => {
    const { input, output } = methodOf(path);

    it("decodes what the loader encodes into the loader's own objects", () => {
      fc.assert(
        fc.property(message(input, 0), message(output, 0), (request, response) => {
          const requestBytes = definition.requestSerialize(request);
          expect(decodeMessage(input, requestBytes)).toEqual(definition.requestDeserialize(requestBytes));
          const responseBytes = definition.responseSerialize(response);
          expect(decodeMessage(output, responseBytes)).toEqual(definition.responseDeserialize(responseBytes));
        }),
        { numRuns: 40 },
      );
    });

    it('encodes so that the loader reads what it reads of its own encoding', () => {
      fc.assert(
        fc.property(message(input, 0), (request) => {
          expect(definition.requestDeserialize(encodeMessage(input, request))).toEqual(definition.requestDeserialize(definition.requestSerialize(request)));
        }),
        { numRuns: 40 },
      );
    });
  });

  it('skips fields it does not know, as the loader does', () => {
    const method = serviceDefinition('user.v1.UserService').service.GetUser!;
    const known = method.responseSerialize({ id: '7', username: 'ann' });
    // field 15, varint 1; field 16, length-delimited "x"; field 17, fixed32; field 18, fixed64
    const unknown = Buffer.from([0x78, 0x01, 0x82, 0x01, 0x01, 0x78, 0x8d, 0x01, 1, 2, 3, 4, 0x91, 0x01, 1, 2, 3, 4, 5, 6, 7, 8]);
    const bytes = Buffer.concat([known, unknown]);
    expect(decodeMessage('user.v1.User', bytes)).toEqual(method.responseDeserialize(bytes));
  });

  it('refuses a truncated message, and an enum name the enum does not have', () => {
    const bytes = serviceDefinition('user.v1.UserService').service.GetUser!.responseSerialize({ id: '7', username: 'ann' });
    expect(() => decodeMessage('user.v1.User', bytes.subarray(0, bytes.length - 1))).toThrow(/truncated/);
    expect(() => encodeMessage('order.v1.ListOrdersRequest', { status: 'SHIPPED' })).toThrow(/"SHIPPED" is not a value of order\.v1\.OrderStatus/);
  });
});
