import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { userServiceDefinition, type UserMessage } from '../../src/users/proto.js';
import { decodeUser, encodeGetUserRequest } from '../../src/users/user-wire.js';

/** The loader's own (de)serializers of GetUser: the hand-written wire form must agree with them. */
const method = userServiceDefinition().service.GetUser!;

const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String);
const user = fc.record({
  id: int64,
  username: fc.string(),
  email: fc.string(),
  full_name: fc.string({ unit: 'grapheme' }),
  is_active: fc.boolean(),
  roles: fc.array(fc.string(), { maxLength: 4 }),
  created_at: fc.option(fc.record({ seconds: int64, nanos: fc.integer({ min: 0, max: 999_999_999 }) }), { nil: null }),
});

describe('user.v1 wire form by hand', () => {
  it('encodes GetUserRequest as the loader does', () => {
    fc.assert(
      fc.property(int64, (id) => {
        expect(encodeGetUserRequest(id)).toEqual(method.requestSerialize({ user_id: id }));
      }),
    );
  });

  it("decodes every User the loader encodes into the loader's own shape", () => {
    fc.assert(
      fc.property(user, (value: UserMessage) => {
        const bytes = method.responseSerialize(value);
        expect(decodeUser(bytes)).toEqual(method.responseDeserialize(bytes));
      }),
    );
  });

  it('skips fields it does not know, as the loader does', () => {
    const known = method.responseSerialize({ id: '7', username: 'ann' });
    // field 15, varint 1; field 16, length-delimited "x"; field 17, fixed32; field 18, fixed64
    const unknown = Buffer.from([0x78, 0x01, 0x82, 0x01, 0x01, 0x78, 0x8d, 0x01, 1, 2, 3, 4, 0x91, 0x01, 1, 2, 3, 4, 5, 6, 7, 8]);
    const bytes = Buffer.concat([known, unknown]);
    expect(decodeUser(bytes)).toEqual(method.responseDeserialize(bytes));
  });

  it('refuses a truncated message', () => {
    const bytes = method.responseSerialize({ id: '7', username: 'ann' });
    expect(() => decodeUser(bytes.subarray(0, bytes.length - 1))).toThrow(/truncated/);
  });
});
