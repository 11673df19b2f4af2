/**
 * The commerce ids (kernel/common.ts newId): a prefix, the second they were
 * made (8 characters that sort as the times do) and 80 random bits, drawn
 * from a pool of the CSPRNG's bytes, none used twice.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { newId } from '../../src/commerce/kernel/common.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('newId', () => {
  it('gives a prefix, 8 characters of time and 14 base64url characters (80 bits), none repeated across many refills of its pool', () => {
    const ids = Array.from({ length: 5000 }, (_, i) => newId(i % 2 === 0 ? 'ord' : 'pay'));
    for (const id of ids) expect(id).toMatch(/^(ord|pay)_[0-9a-v]{8}[A-Za-z0-9_-]{14}$/);
    const random = ids.map((id) => id.slice(12));
    expect(new Set(random).size).toBe(ids.length);
    // Not a counter: consecutive ids share no long run of their random characters.
    expect(random.slice(1).filter((part, i) => part.slice(0, 8) === random[i]!.slice(0, 8))).toEqual([]);
  });

  it('sorts ids made later after those made earlier, bytewise and under a locale, through the years', () => {
    vi.useFakeTimers();
    const times = [
      Date.UTC(2001, 0, 1),
      Date.UTC(2026, 10, 28, 8, 0, 0, 999),
      Date.UTC(2026, 10, 28, 8, 0, 1),
      Date.UTC(2026, 10, 28, 8, 0, 2, 500),
      Date.UTC(2100, 0, 1),
      Date.UTC(9999, 11, 31),
    ];
    const ids = times.map((time) => {
      vi.setSystemTime(time);
      return newId('ord');
    });
    expect(ids.map((id) => id.slice(4, 12))).toEqual(
      times.map((time) =>
        Math.floor(time / 1000)
          .toString(32)
          .padStart(8, '0'),
      ),
    );
    for (const id of ids) expect(id).toHaveLength(26);
    const shuffled = [...ids].reverse();
    expect([...shuffled].sort()).toEqual(ids);
    expect([...shuffled].sort((a, b) => a.localeCompare(b, 'en-US'))).toEqual(ids);
  });
});
