/**
 * The compiled schema's codec (src/grpc/proto-wire.ts) against the one
 * loader's own serializers (proto-loader through grpc-js, src/grpc/protos.ts),
 * for every method of every service of serve, both ways: what the loader
 * encodes decodes to the loader's very objects, and what the codec encodes
 * the loader reads as it reads its own encoding. Values are drawn from the
 * schema itself, so a field added to a .proto is covered as it comes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeMessage, encodeMessage, loadSchema, methodOf, type WireField } from '../../src/grpc/proto-wire.js';
import { serviceDefinition, type ServiceName } from '../../src/grpc/protos.js';

const schema = loadSchema();

const SERVICES: readonly ServiceName[] = [
  'user.v1.UserService',
  'monitoring.v1.MonitoringService',
  'inventory.v1.InventoryService',
  'payment.v1.PaymentService',
  'order.v1.OrderService',
  'grpc.health.v1.Health',
];

const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String);
const uint64 = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String);

function scalar(type: number): fc.Arbitrary<unknown> {
  switch (type) {
    case 1:
      return fc.double();
    case 2:
      return fc.float();
    case 3:
    case 16:
    case 18:
      return int64;
    case 4:
    case 6:
      return uint64;
    case 5:
    case 15:
    case 17:
      return fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
    case 7:
    case 13:
      return fc.integer({ min: 0, max: 2 ** 32 - 1 });
    case 8:
      return fc.boolean();
    case 9:
      return fc.string({ unit: 'grapheme', maxLength: 12 });
    case 12:
      return fc.uint8Array({ maxLength: 8 }).map((bytes) => Buffer.from(bytes));
    default:
      throw new Error(`no arbitrary for scalar type ${type}`);
  }
}

function value(field: WireField, depth: number): fc.Arbitrary<unknown> {
  if (field.t !== undefined) return scalar(field.t);
  if (field.e !== undefined) {
    // A name of the enum, or now and then a number it does not know (kept as a number, as the loader keeps it).
    return fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(...Object.values(schema.enums[field.e]!)) },
      { weight: 1, arbitrary: fc.integer({ min: 100, max: 999 }) },
    );
  }
  return message(field.m!, depth + 1);
}

function message(type: string, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const fields = schema.messages[type]!;
  const plain: Record<string, fc.Arbitrary<unknown>> = {};
  const oneofs = new Map<string, WireField[]>();
  for (const field of fields) {
    if (field.oneof !== undefined) oneofs.set(field.oneof, [...(oneofs.get(field.oneof) ?? []), field]);
    else if (field.m !== undefined && field.list === undefined && field.map === undefined) {
      plain[field.name] = depth > 3 ? fc.constant(null) : fc.option(value(field, depth), { nil: null });
    } else if (field.list) plain[field.name] = depth > 3 && field.m ? fc.constant([]) : fc.array(value(field, depth), { maxLength: 3 });
    else if (field.map !== undefined) {
      if (field.map !== 9) throw new Error(`no arbitrary for map keys of scalar type ${field.map}`);
      const key = fc.string({ maxLength: 6 }).filter((text) => text !== '__proto__');
      plain[field.name] = depth > 3 && field.m ? fc.constant({}) : fc.dictionary(key, value(field, depth), { maxKeys: 3 });
    } else plain[field.name] = value(field, depth);
  }
  const chosen = [...oneofs.values()].map((members) =>
    fc.oneof(fc.constant({}), ...members.map((member) => value(member, depth).map((v) => ({ [member.name]: v })))),
  );
  return fc.tuple(fc.record(plain), ...chosen).map(([base, ...members]) => Object.assign({}, base, ...members));
}

const methods = SERVICES.flatMap((service) =>
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
