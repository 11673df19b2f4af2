/**
 * Finds string fields that are not valid UTF-8 in an encoded protobuf
 * message, by walking its wire bytes against the message type.
 *
 * proto3 says a string field holds UTF-8; protobuf.js (protos.ts)
 * decodes invalid bytes to U+FFFD instead of refusing them, so by the time
 * a handler sees the message the evidence is gone and `u\xffx@example.com`
 * would be stored as `u\uFFFDx@example.com`. The check therefore reads the
 * bytes before they are decoded. Nested messages, repeated fields, map keys
 * and values, and oneof members are all covered; unknown fields are skipped.
 * Message types are read from the compiled schema (proto/wire-schema.json,
 * see proto-wire.ts), by their full names.
 */
import { isUtf8 } from 'node:buffer';
import { fieldByNumber, STRING, type WireField } from './proto-wire.js';

/** The bytes are not a well-formed encoding of any message. */
export class MalformedMessageError extends Error {}

// Deeper than any message of ours; protobuf.js refuses deeper nesting too.
const MAX_DEPTH = 100;

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_LENGTH_DELIMITED = 2;
const WIRE_START_GROUP = 3;
const WIRE_END_GROUP = 4;
const WIRE_FIXED32 = 5;

class WireReader {
  constructor(
    readonly bytes: Uint8Array,
    public pos: number,
    readonly end: number,
  ) {}

  /** A varint as a number; exact up to 2^53, which covers tags and lengths. */
  varint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new MalformedMessageError('truncated varint');
      const byte = this.bytes[this.pos++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
    throw new MalformedMessageError('varint longer than 10 bytes');
  }

  skip(count: number): void {
    if (count > this.end - this.pos) throw new MalformedMessageError('truncated field');
    this.pos += count;
  }

  /** The start and end of a length-delimited value, leaving the reader after it. */
  delimited(): [number, number] {
    const length = this.varint();
    const start = this.pos;
    this.skip(length);
    return [start, this.pos];
  }
}

/**
 * The path of the first string field of `bytes` (an encoded `message`) that
 * is not valid UTF-8, such as `email`, `user.roles[1]` or
 * `upsert.user.full_name`; undefined when every string is valid. Throws
 * MalformedMessageError when the bytes are not a message at all.
 */
export function invalidUtf8Field(bytes: Uint8Array, message: string): string | undefined {
  return walkMessage(new WireReader(bytes, 0, bytes.length), message, '', 0);
}

function walkMessage(reader: WireReader, message: string, prefix: string, depth: number): string | undefined {
  if (depth > MAX_DEPTH) throw new MalformedMessageError('nested too deeply');
  const fields = fieldByNumber(message);
  const occurrences = new Map<number, number>();
  while (reader.pos < reader.end) {
    const tag = reader.varint();
    const number = Math.floor(tag / 8);
    const wireType = tag % 8;
    if (number === 0) throw new MalformedMessageError('field number 0');
    if (wireType !== WIRE_LENGTH_DELIMITED) {
      skipValue(reader, wireType, number, depth);
      continue;
    }
    const [start, end] = reader.delimited();
    const field = fields.get(number);
    if (!field) continue;
    const index = occurrences.get(number) ?? 0;
    occurrences.set(number, index + 1);
    const path = `${prefix}${field.name}${field.list ? `[${index}]` : ''}`;
    const found = checkValue(new WireReader(reader.bytes, start, end), field, path, depth);
    if (found) return found;
  }
  return undefined;
}

/** Checks one length-delimited value of `field`. */
function checkValue(value: WireReader, field: WireField, path: string, depth: number): string | undefined {
  if (field.map !== undefined) return checkMapEntry(value, field, path, depth);
  if (field.m !== undefined) return walkMessage(value, field.m, `${path}.`, depth + 1);
  // A string, one element of a list of strings (never packed), or packed numbers and enums, which hold no strings.
  return field.t === STRING ? checkString(value, path) : undefined;
}

function checkString(value: WireReader, path: string): string | undefined {
  return isUtf8(value.bytes.subarray(value.pos, value.end)) ? undefined : path;
}

/** A map entry is a message of key (1) and value (2). */
function checkMapEntry(entry: WireReader, field: WireField, path: string, depth: number): string | undefined {
  while (entry.pos < entry.end) {
    const tag = entry.varint();
    const number = Math.floor(tag / 8);
    const wireType = tag % 8;
    if (wireType !== WIRE_LENGTH_DELIMITED) {
      skipValue(entry, wireType, number, depth);
      continue;
    }
    const [start, end] = entry.delimited();
    const part = new WireReader(entry.bytes, start, end);
    let found: string | undefined;
    if (number === 1 && field.map === STRING) found = checkString(part, `${path} (a key)`);
    if (number === 2 && field.t === STRING) found = checkString(part, `${path} (a value)`);
    if (number === 2 && field.m !== undefined) found = walkMessage(part, field.m, `${path}.`, depth + 1);
    if (found) return found;
  }
  return undefined;
}

function skipValue(reader: WireReader, wireType: number, number: number, depth: number): void {
  switch (wireType) {
    case WIRE_VARINT:
      reader.varint();
      return;
    case WIRE_FIXED64:
      reader.skip(8);
      return;
    case WIRE_FIXED32:
      reader.skip(4);
      return;
    case WIRE_START_GROUP:
      skipGroup(reader, number, depth + 1);
      return;
    default:
      throw new MalformedMessageError(wireType === WIRE_END_GROUP ? 'unexpected end of group' : `wire type ${wireType}`);
  }
}

/** Groups (proto2) have no place in our messages; they are skipped as unknown fields. */
function skipGroup(reader: WireReader, number: number, depth: number): void {
  if (depth > MAX_DEPTH) throw new MalformedMessageError('nested too deeply');
  for (;;) {
    const tag = reader.varint();
    const wireType = tag % 8;
    if (wireType === WIRE_END_GROUP) {
      if (Math.floor(tag / 8) !== number) throw new MalformedMessageError('mismatched end of group');
      return;
    }
    if (wireType === WIRE_LENGTH_DELIMITED) reader.delimited();
    else skipValue(reader, wireType, Math.floor(tag / 8), depth);
  }
}
