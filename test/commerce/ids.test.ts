/**
 * The commerce ids (kernel/common.ts newId): a prefix and 128 random bits,
 * drawn from a pool of the CSPRNG's bytes, none used twice.
 */
import { describe, expect, it } from 'vitest';
import { newId } from '../../src/commerce/kernel/common.js';

describe('newId', () => {
  it('gives a prefix and 22 base64url characters (128 bits), none repeated across many refills of its pool', () => {
    const ids = Array.from({ length: 5000 }, (_, i) => newId(i % 2 === 0 ? 'ord' : 'pay'));
    for (const id of ids) expect(id).toMatch(/^(ord|pay)_[A-Za-z0-9_-]{22}$/);
    expect(new Set(ids.map((id) => id.slice(4))).size).toBe(ids.length);
    // Not a counter: consecutive ids share no long run of characters.
    expect(ids.slice(1).filter((id, i) => id.slice(4, 12) === ids[i]!.slice(4, 12))).toEqual([]);
  });
});
