/**
 * fast-check arbitraries of the messages of serve's services, drawn from the
 * compiled schema (proto/wire-schema.json), in the one loader's shape: a
 * field added to a .proto is covered as it comes.
 */
import fc from 'fast-check';
import { loadSchema, type WireField } from '../../src/grpc/proto-wire.js';

const schema = loadSchema();

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

export function message(type: string, depth: number): fc.Arbitrary<Record<string, unknown>> {
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
