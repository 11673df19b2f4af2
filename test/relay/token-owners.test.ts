/** The relay's memory of whose access token is whose: bounded, expiring, and holding no token. */
import { describe, expect, it } from 'vitest';
import { TokenOwners } from '../../src/relay/token-owners.js';

describe('TokenOwners', () => {
  it("remembers a token's userKey for its lifetime, then forgets it", () => {
    let now = 0;
    const owners = new TokenOwners(() => now, 10, 1000);
    owners.set('at_a', 1);
    expect(owners.get('at_a')).toBe(1);
    now = 999;
    expect(owners.get('at_a')).toBe(1);
    now = 1000;
    expect(owners.get('at_a')).toBeUndefined();
    owners.set('at_b', 2, 10);
    now = 1011;
    expect(owners.get('at_b')).toBeUndefined();
  });

  it('holds at most its bound, dropping the oldest first', () => {
    const owners = new TokenOwners(() => 0, 3);
    for (const [i, token] of ['t1', 't2', 't3', 't4'].entries()) owners.set(token, i);
    expect(owners.size).toBe(3);
    expect(owners.get('t1')).toBeUndefined();
    expect(owners.get('t4')).toBe(3);
  });

  it('forgets every token of a user whose connection was removed', () => {
    const owners = new TokenOwners(() => 0);
    owners.set('old', 7);
    owners.set('new', 7);
    owners.set('other', 8);
    owners.forgetUser(7);
    expect([owners.get('old'), owners.get('new'), owners.get('other')]).toEqual([undefined, undefined, 8]);
  });
});
