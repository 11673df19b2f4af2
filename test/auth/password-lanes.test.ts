/**
 * scrypt runs on libuv's thread pool, as the store's flushes do: the hashes
 * of a bulk import must leave a thread free for the disk, and a login or a
 * single account must not wait behind an import's rows. The order in which
 * derivations start is what src/auth/passwords.ts publishes (no clock).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { AT_ONCE, hashPassword, scryptChannel, verifyPassword } from '../../src/auth/passwords.js';

const started: string[] = [];
const record = (message: unknown) => void started.push((message as { lane: string }).lane);
afterEach(() => {
  scryptChannel.unsubscribe(record);
  started.length = 0;
});

describe('password hashing', () => {
  it('runs at most the pool less one at once, and a login goes before the rows of an import that wait', async () => {
    const stored = await hashPassword('login-password', 10);
    scryptChannel.subscribe(record);
    const rows = Array.from({ length: 12 }, (_, i) => hashPassword(`row-${i}`, 10, { bulk: true }));
    const login = verifyPassword('login-password', stored);
    await Promise.all(rows);
    expect(await login).toBe(true);
    // AT_ONCE rows (3 with libuv's default pool of 4) start at once and no more; the login takes the next place,
    // before the rows left waiting.
    expect(started).toEqual([...Array(AT_ONCE).fill('bulk'), 'now', ...Array(12 - AT_ONCE).fill('bulk')]);
  });
});
