/**
 * The protobuf wire form of the two user.v1 messages that `miniapp users
 * get` exchanges, GetUserRequest and User, by hand: the one-shot command
 * answers without loading proto-loader and protobufjs to parse user.proto.
 * The shapes are those of the one loader (src/grpc/protos.ts): snake_case,
 * int64 as decimal strings, defaults filled, an absent message null.
 * test/users/user-wire.test.ts holds both directions to the loader's own
 * serializers, so a change to user.proto that this file misses fails there.
 */
import type { Timestamp, UserMessage } from './proto.js';

const VARINT = 0;
const FIXED64 = 1;
const LENGTH_DELIMITED = 2;
const FIXED32 = 5;

function varint(value: bigint): number[] {
  let rest = BigInt.asUintN(64, value);
  const bytes: number[] = [];
  while (rest >= 0x80n) {
    bytes.push(Number(rest & 0x7fn) | 0x80);
    rest >>= 7n;
  }
  bytes.push(Number(rest));
  return bytes;
}

/** GetUserRequest { int64 user_id = 1 }; `userId` a decimal string, as the loader takes it (which writes a 0 too). */
export function encodeGetUserRequest(userId: string): Buffer {
  return Buffer.from([(1 << 3) | VARINT, ...varint(BigInt(userId))]);
}

class Reader {
  #at = 0;
  constructor(readonly bytes: Uint8Array) {}

  get done(): boolean {
    return this.#at >= this.bytes.length;
  }

  varint(): bigint {
    let result = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.#at >= this.bytes.length) throw new Error('truncated varint');
      const byte = this.bytes[this.#at++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return BigInt.asUintN(64, result);
    }
    throw new Error('varint too long');
  }

  bytesField(): Uint8Array {
    const length = Number(this.varint());
    const end = this.#at + length;
    if (end > this.bytes.length) throw new Error('truncated field');
    const slice = this.bytes.subarray(this.#at, end);
    this.#at = end;
    return slice;
  }

  string(): string {
    return Buffer.from(this.bytesField()).toString('utf8');
  }

  skip(wireType: number): void {
    if (wireType === VARINT) this.varint();
    else if (wireType === LENGTH_DELIMITED) this.bytesField();
    else if (wireType === FIXED64) this.#advance(8);
    else if (wireType === FIXED32) this.#advance(4);
    else throw new Error(`unsupported wire type ${wireType}`);
  }

  #advance(count: number): void {
    if (this.#at + count > this.bytes.length) throw new Error('truncated field');
    this.#at += count;
  }
}

function int64(value: bigint): string {
  return BigInt.asIntN(64, value).toString();
}

function decodeTimestamp(bytes: Uint8Array): Timestamp {
  const reader = new Reader(bytes);
  const ts: Timestamp = { seconds: '0', nanos: 0 };
  while (!reader.done) {
    const tag = Number(reader.varint());
    const field = tag >>> 3;
    if (field === 1 && (tag & 7) === VARINT) ts.seconds = int64(reader.varint());
    else if (field === 2 && (tag & 7) === VARINT) ts.nanos = Number(BigInt.asIntN(32, reader.varint()));
    else reader.skip(tag & 7);
  }
  return ts;
}

/** User, with every field present (defaults filled) and created_at null when absent. */
export function decodeUser(bytes: Uint8Array): UserMessage {
  const reader = new Reader(bytes);
  const user: UserMessage = { id: '0', username: '', email: '', full_name: '', is_active: false, roles: [], created_at: null };
  while (!reader.done) {
    const tag = Number(reader.varint());
    const wireType = tag & 7;
    switch (wireType === LENGTH_DELIMITED || wireType === VARINT ? tag >>> 3 : 0) {
      case 1:
        if (wireType !== VARINT) reader.skip(wireType);
        else user.id = int64(reader.varint());
        break;
      case 2:
        if (wireType !== LENGTH_DELIMITED) reader.skip(wireType);
        else user.username = reader.string();
        break;
      case 3:
        if (wireType !== LENGTH_DELIMITED) reader.skip(wireType);
        else user.email = reader.string();
        break;
      case 4:
        if (wireType !== LENGTH_DELIMITED) reader.skip(wireType);
        else user.full_name = reader.string();
        break;
      case 5:
        if (wireType !== VARINT) reader.skip(wireType);
        else user.is_active = reader.varint() !== 0n;
        break;
      case 6:
        if (wireType !== LENGTH_DELIMITED) reader.skip(wireType);
        else user.roles.push(reader.string());
        break;
      case 7:
        if (wireType !== LENGTH_DELIMITED) reader.skip(wireType);
        else user.created_at = decodeTimestamp(reader.bytesField());
        break;
      default:
        reader.skip(wireType);
    }
  }
  return user;
}
