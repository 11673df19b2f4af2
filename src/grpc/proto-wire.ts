/**
 * The protobuf wire form of every message of serve's services, for the
 * one-shot client commands (grpc/client/light-call.ts): encoded and decoded
 * from the compact schema that `npm run build` writes from the descriptor
 * set (scripts/wire-schema.mjs, proto/wire-schema.json), without grpc-js
 * and proto-loader, whose loading costs a one-shot command more than Node's
 * own start-up.
 *
 * Decoded messages have exactly the shape the one loader gives
 * (grpc/protos.ts: keepCase, longs String, enums String, defaults true,
 * oneofs true): field names as in the .proto, 64-bit integers as decimal
 * strings, enums by name (an unknown number stays a number), every field
 * present (an absent message null, a list [], a map {}), the set member of
 * a oneof named by a field of the oneof's name, bytes as a Buffer.
 * Encoding takes what the loader's serializer takes (enum names, 64-bit
 * integers as strings or numbers). test/grpc/proto-wire.test.ts holds both
 * directions to the loader's own serializers for every method of serve.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** A field of the schema: see scripts/wire-schema.mjs. */
export interface WireField {
  no: number;
  name: string;
  /** Scalar type, by its number in descriptor.proto. */
  t?: number;
  /** Enum type name. */
  e?: string;
  /** Message type name. */
  m?: string;
  list?: 1;
  /** A map field: the key's scalar type. */
  map?: number;
  oneof?: string;
}

export interface WireSchema {
  messages: Record<string, WireField[]>;
  enums: Record<string, Record<string, string>>;
  /** By path (/package.Service/Method): input type, output type, kind ("unary", "server_streaming", ...). */
  methods: Record<string, [input: string, output: string, kind: string]>;
}

/** Beside the descriptor set, in the package's proto/ (this module is two levels below the package root, as compiled). */
const SCHEMA_FILE = fileURLToPath(new URL('../../proto/wire-schema.json', import.meta.url));

let schema: WireSchema | undefined;
const enumNumbers = new Map<string, Map<string, number>>();
const byNumber = new Map<string, Map<number, WireField>>();

/** The compiled schema, read once. */
export function loadSchema(): WireSchema {
  if (!schema) {
    try {
      schema = JSON.parse(readFileSync(SCHEMA_FILE, 'utf8')) as WireSchema;
    } catch (error) {
      throw new Error(`cannot read the compiled message schema at ${SCHEMA_FILE} (run \`npm run build\`): ${(error as Error).message}`, { cause: error });
    }
  }
  return schema;
}

function fieldsOf(type: string): WireField[] {
  const fields = loadSchema().messages[type];
  if (!fields) throw new Error(`no message ${type} in ${SCHEMA_FILE}`);
  return fields;
}

/** The fields of a message type (full name), by number, read once from the schema. */
export function fieldByNumber(type: string): Map<number, WireField> {
  let map = byNumber.get(type);
  if (!map) {
    map = new Map(fieldsOf(type).map((field) => [field.no, field]));
    byNumber.set(type, map);
  }
  return map;
}

/** The method at `path` (/package.Service/Method): its message types and kind. */
export function methodOf(path: string): { input: string; output: string; kind: string } {
  const method = loadSchema().methods[path];
  if (!method) throw new Error(`no method ${path} in ${SCHEMA_FILE}`);
  return { input: method[0], output: method[1], kind: method[2] };
}

// Scalar types (descriptor.proto's FieldDescriptorProto.Type).
const DOUBLE = 1;
const FLOAT = 2;
const INT64 = 3;
const UINT64 = 4;
const INT32 = 5;
const FIXED64 = 6;
const FIXED32 = 7;
const BOOL = 8;
/** descriptor.proto's TYPE_STRING (the schema's `t`). */
export const STRING = 9;
const BYTES = 12;
const UINT32 = 13;
const SFIXED32 = 15;
const SFIXED64 = 16;
const SINT32 = 17;
const SINT64 = 18;

// Wire types.
const W_VARINT = 0;
const W_I64 = 1;
const W_LEN = 2;
const W_I32 = 5;

function wireTypeOf(field: WireField): number {
  if (field.t === undefined) return field.e === undefined ? W_LEN : W_VARINT;
  switch (field.t) {
    case DOUBLE:
    case FIXED64:
    case SFIXED64:
      return W_I64;
    case FLOAT:
    case FIXED32:
    case SFIXED32:
      return W_I32;
    case STRING:
    case BYTES:
      return W_LEN;
    default:
      return W_VARINT;
  }
}

// ------------------------------------------------------------------ decoding

class Reader {
  at = 0;
  constructor(
    readonly bytes: Buffer,
    readonly end: number,
  ) {}

  varint(): bigint {
    let result = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.at >= this.end) throw new Error('truncated message');
      const byte = this.bytes[this.at++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return BigInt.asUintN(64, result);
    }
    throw new Error('varint too long');
  }

  /** A varint read as a 32-bit number (the low 32 bits, as protobuf's int32 does), without BigInt for the common case. */
  uint32(): number {
    let result = 0;
    for (let shift = 0; shift < 28; shift += 7) {
      if (this.at >= this.end) throw new Error('truncated message');
      const byte = this.bytes[this.at++]!;
      result |= (byte & 0x7f) << shift;
      if (byte < 0x80) return result >>> 0;
    }
    // Past 28 bits: the fifth byte gives the top 4 bits, any further bytes only higher ones.
    const rest = this.varint();
    return (result | (Number(rest & 0xfn) << 28)) >>> 0;
  }

  take(count: number): number {
    const start = this.at;
    if (count < 0 || start + count > this.end) throw new Error('truncated message');
    this.at += count;
    return start;
  }

  length(): number {
    return this.uint32();
  }

  skip(wireType: number): void {
    if (wireType === W_VARINT) this.varint();
    else if (wireType === W_LEN) this.take(this.length());
    else if (wireType === W_I64) this.take(8);
    else if (wireType === W_I32) this.take(4);
    else throw new Error(`unsupported wire type ${wireType}`);
  }
}

function readScalar(reader: Reader, type: number): unknown {
  const bytes = reader.bytes;
  switch (type) {
    case DOUBLE:
      return bytes.readDoubleLE(reader.take(8));
    case FLOAT:
      return bytes.readFloatLE(reader.take(4));
    case INT64:
      return BigInt.asIntN(64, reader.varint()).toString();
    case UINT64:
      return reader.varint().toString();
    case SINT64: {
      const value = reader.varint();
      return ((value >> 1n) ^ -(value & 1n)).toString();
    }
    case FIXED64:
      return bytes.readBigUInt64LE(reader.take(8)).toString();
    case SFIXED64:
      return bytes.readBigInt64LE(reader.take(8)).toString();
    case INT32:
      return reader.uint32() | 0;
    case UINT32:
      return reader.uint32();
    case SINT32: {
      const value = reader.uint32();
      return (value >>> 1) ^ -(value & 1);
    }
    case FIXED32:
      return bytes.readUInt32LE(reader.take(4));
    case SFIXED32:
      return bytes.readInt32LE(reader.take(4));
    case BOOL:
      return reader.varint() !== 0n;
    case STRING: {
      const length = reader.length();
      const start = reader.take(length);
      return bytes.toString('utf8', start, start + length);
    }
    case BYTES: {
      const length = reader.length();
      const start = reader.take(length);
      return Buffer.from(bytes.subarray(start, start + length));
    }
    default:
      throw new Error(`unsupported scalar type ${type}`);
  }
}

function enumName(type: string, number: number): string | number {
  return loadSchema().enums[type]?.[number] ?? number;
}

/** One value of a field (an element, for a list): scalar, enum or message. */
function readValue(reader: Reader, field: WireField): unknown {
  if (field.t !== undefined) return readScalar(reader, field.t);
  if (field.e !== undefined) return enumName(field.e, reader.uint32() | 0);
  const length = reader.length();
  const start = reader.take(length);
  return decodeRange(field.m!, reader.bytes, start, start + length);
}

/** The default of a field that is not a list, a map or in a oneof, as the loader fills it. */
function defaultOf(field: WireField): unknown {
  if (field.m !== undefined) return null;
  if (field.e !== undefined) return enumName(field.e, 0);
  switch (field.t) {
    case STRING:
      return '';
    case BOOL:
      return false;
    case BYTES:
      return Buffer.alloc(0);
    case INT64:
    case UINT64:
    case SINT64:
    case FIXED64:
    case SFIXED64:
      return '0';
    default:
      return 0;
  }
}

function readMapEntry(reader: Reader, field: WireField, into: Record<string, unknown>): void {
  const length = reader.length();
  const end = reader.take(length) + length;
  const entry = new Reader(reader.bytes, end);
  entry.at = end - length;
  const keyField: WireField = { no: 1, name: 'key', t: field.map! };
  const valueField: WireField = { ...field, no: 2, name: 'value', list: undefined, map: undefined, oneof: undefined } as WireField;
  let key: unknown = defaultOf(keyField);
  let value: unknown = field.m !== undefined ? undefined : defaultOf(valueField);
  while (entry.at < end) {
    const tag = entry.uint32();
    if (tag >>> 3 === 1 && (tag & 7) === wireTypeOf(keyField)) key = readScalar(entry, field.map!);
    else if (tag >>> 3 === 2 && (tag & 7) === wireTypeOf(valueField)) value = readValue(entry, valueField);
    else entry.skip(tag & 7);
  }
  // A message value left out is an empty message, as the loader makes it.
  into[String(key)] = value === undefined ? decodeRange(field.m!, Buffer.alloc(0), 0, 0) : value;
}

function decodeRange(type: string, bytes: Buffer, start: number, end: number): Record<string, unknown> {
  const fields = fieldsOf(type);
  const message: Record<string, unknown> = {};
  // The loader's key order: lists, then maps, then the other fields with their defaults; a oneof's member when set.
  for (const field of fields) if (field.list) message[field.name] = [];
  for (const field of fields) if (field.map !== undefined) message[field.name] = {};
  for (const field of fields) if (!field.list && field.map === undefined && field.oneof === undefined) message[field.name] = defaultOf(field);
  const numbered = fieldByNumber(type);
  const reader = new Reader(bytes, end);
  reader.at = start;
  while (reader.at < end) {
    const tag = reader.uint32();
    const wireType = tag & 7;
    const field = numbered.get(tag >>> 3);
    if (!field) {
      reader.skip(wireType);
      continue;
    }
    const expected = wireTypeOf(field);
    if (field.map !== undefined) {
      if (wireType === W_LEN) readMapEntry(reader, field, message[field.name] as Record<string, unknown>);
      else reader.skip(wireType);
    } else if (field.list) {
      const list = message[field.name] as unknown[];
      if (wireType === expected) list.push(readValue(reader, field));
      else if (wireType === W_LEN && expected !== W_LEN) {
        // A packed list of numbers, enums or booleans.
        const length = reader.length();
        const packedEnd = reader.take(length) + length;
        const packed = new Reader(reader.bytes, packedEnd);
        packed.at = packedEnd - length;
        while (packed.at < packedEnd) list.push(readValue(packed, field));
      } else reader.skip(wireType);
    } else if (wireType === expected) {
      message[field.name] = readValue(reader, field);
      if (field.oneof !== undefined) {
        for (const other of fields) if (other.oneof === field.oneof && other !== field) delete message[other.name];
        message[field.oneof] = field.name;
      }
    } else reader.skip(wireType);
  }
  return message;
}

/** A message of type `type` (full name, e.g. user.v1.User) from its wire form, in the loader's shape. */
export function decodeMessage<T = Record<string, unknown>>(type: string, bytes: Uint8Array): T {
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return decodeRange(type, buffer, 0, buffer.length) as T;
}

// ------------------------------------------------------------------ encoding

class Writer {
  readonly parts: Buffer[] = [];
  length = 0;

  push(part: Buffer): void {
    this.parts.push(part);
    this.length += part.length;
  }

  varint(value: bigint): void {
    let rest = BigInt.asUintN(64, value);
    const bytes: number[] = [];
    while (rest >= 0x80n) {
      bytes.push(Number(rest & 0x7fn) | 0x80);
      rest >>= 7n;
    }
    bytes.push(Number(rest));
    this.push(Buffer.from(bytes));
  }

  tag(no: number, wireType: number): void {
    this.varint(BigInt((no << 3) | wireType) & 0xffffffffn);
  }

  lengthDelimited(part: Buffer): void {
    this.varint(BigInt(part.length));
    this.push(part);
  }

  finish(): Buffer {
    return Buffer.concat(this.parts, this.length);
  }
}

function int64Of(value: unknown, name: string): bigint {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number') return BigInt(Math.trunc(value));
  if (typeof value === 'string' && /^\s*-?\d+\s*$/.test(value)) return BigInt(value.trim());
  throw new TypeError(`${name}: not an integer: ${JSON.stringify(value)}`);
}

function writeScalar(writer: Writer, type: number, value: unknown, name: string): void {
  switch (type) {
    case DOUBLE: {
      const part = Buffer.alloc(8);
      part.writeDoubleLE(Number(value));
      writer.push(part);
      return;
    }
    case FLOAT: {
      const part = Buffer.alloc(4);
      part.writeFloatLE(Number(value));
      writer.push(part);
      return;
    }
    case INT64:
    case UINT64:
      writer.varint(int64Of(value, name));
      return;
    case SINT64: {
      const n = BigInt.asIntN(64, int64Of(value, name));
      writer.varint((n << 1n) ^ (n >> 63n));
      return;
    }
    case FIXED64:
    case SFIXED64: {
      const part = Buffer.alloc(8);
      part.writeBigUInt64LE(BigInt.asUintN(64, int64Of(value, name)));
      writer.push(part);
      return;
    }
    case INT32:
      writer.varint(BigInt(Number(value) | 0));
      return;
    case UINT32:
      writer.varint(BigInt(Number(value) >>> 0));
      return;
    case SINT32: {
      const n = Number(value) | 0;
      writer.varint(BigInt(((n << 1) ^ (n >> 31)) >>> 0));
      return;
    }
    case FIXED32:
    case SFIXED32: {
      const part = Buffer.alloc(4);
      part.writeUInt32LE(Number(value) >>> 0);
      writer.push(part);
      return;
    }
    case BOOL:
      writer.varint(value ? 1n : 0n);
      return;
    case STRING:
      writer.lengthDelimited(Buffer.from(String(value), 'utf8'));
      return;
    case BYTES:
      writer.lengthDelimited(typeof value === 'string' ? Buffer.from(value, 'base64') : Buffer.from(value as Uint8Array));
      return;
    default:
      throw new Error(`unsupported scalar type ${type}`);
  }
}

function enumNumber(type: string, value: unknown, name: string): number {
  if (typeof value === 'number') return value;
  let numbers = enumNumbers.get(type);
  if (!numbers) {
    numbers = new Map(Object.entries(loadSchema().enums[type] ?? {}).map(([number, label]) => [label, Number(number)]));
    enumNumbers.set(type, numbers);
  }
  const number = numbers.get(String(value));
  if (number === undefined) throw new TypeError(`${name}: ${JSON.stringify(value)} is not a value of ${type}`);
  return number;
}

/** Whether a value is the default that proto3 leaves off the wire. */
function isDefault(field: WireField, value: unknown): boolean {
  if (field.m !== undefined) return false;
  if (field.e !== undefined) return value === 0 || enumNumber(field.e, value, field.name) === 0;
  if (field.t === BYTES) return (value as Uint8Array | string).length === 0;
  if (field.t === STRING) return value === '';
  if (field.t === BOOL) return !value;
  return typeof value === 'string' ? /^\s*-?0*\s*$/.test(value) : Object.is(Number(value), 0);
}

function writeValue(writer: Writer, field: WireField, value: unknown): void {
  if (field.t !== undefined) writeScalar(writer, field.t, value, field.name);
  else if (field.e !== undefined) writer.varint(BigInt(enumNumber(field.e, value, field.name)));
  else writer.lengthDelimited(encodeMessage(field.m!, value as Record<string, unknown>));
}

/** A message of type `type` (full name) from an object in the loader's shape; fields left out are their defaults. */
export function encodeMessage(type: string, message: Record<string, unknown>): Buffer {
  const writer = new Writer();
  for (const field of fieldsOf(type)) {
    const value = message[field.name];
    if (value === undefined || value === null) continue;
    const wireType = wireTypeOf(field);
    if (field.map !== undefined) {
      const keyField: WireField = { no: 1, name: 'key', t: field.map };
      const valueField = { ...field, no: 2, name: 'value', list: undefined, map: undefined, oneof: undefined } as WireField;
      for (const [key, entryValue] of Object.entries(value as Record<string, unknown>)) {
        const entry = new Writer();
        entry.tag(1, wireTypeOf(keyField));
        writeScalar(entry, field.map, field.map === BOOL ? key === 'true' : key, field.name);
        entry.tag(2, wireTypeOf(valueField));
        writeValue(entry, valueField, entryValue);
        writer.tag(field.no, W_LEN);
        writer.lengthDelimited(entry.finish());
      }
    } else if (field.list) {
      const values = value as unknown[];
      if (values.length === 0) continue;
      if (wireType === W_LEN) {
        for (const element of values) {
          writer.tag(field.no, W_LEN);
          writeValue(writer, field, element);
        }
      } else {
        // Numbers, enums and booleans packed, as proto3 does by default.
        const packed = new Writer();
        for (const element of values) writeValue(packed, field, element);
        writer.tag(field.no, W_LEN);
        writer.lengthDelimited(packed.finish());
      }
    } else if (field.oneof !== undefined || !isDefault(field, value)) {
      // A oneof's member is sent even at its default: that it is set is what it says.
      writer.tag(field.no, wireType);
      writeValue(writer, field, value);
    }
  }
  return writer.finish();
}
