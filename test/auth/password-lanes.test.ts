/**
 * scrypt runs on libuv's thread pool, as the store's flushes do: the hashes
 * of a bulk import must leave a thread free for the disk, and a login or a
 * single account must not wait behind an import's rows. The order in which
 * derivations start is what src/auth/passwords.ts publishes (no clock).
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  AT_ONCE,
  DEFAULT_HASH_COST,
  HashingBusy,
  hashPassword,
  scryptChannel,
  SIGNUP_AT_ONCE,
  SIGNUP_QUEUE,
  verifyPassword,
} from '../../src/auth/passwords.js';

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

  it('runs sign-ups one place short of the pool, a login never behind them, and refuses sign-ups past a bounded queue', async () => {
    const stored = await hashPassword('login-password', 10);
    const events: { lane: string; waited: boolean }[] = [];
    const full = (message: unknown) => void events.push(message as { lane: string; waited: boolean });
    scryptChannel.subscribe(full);
    try {
      const signups = Array.from({ length: SIGNUP_AT_ONCE + SIGNUP_QUEUE + 5 }, (_, i) =>
        hashPassword(`signup-${i}`, DEFAULT_HASH_COST, { signup: true }).then(
          () => 'hashed',
          (error: unknown) => (error instanceof HashingBusy ? 'busy' : String(error)),
        ),
      );
      const login = verifyPassword('login-password', stored);
      const outcomes = await Promise.all(signups);
      expect(await login).toBe(true);
      // At the default cost, SIGNUP_AT_ONCE running and SIGNUP_QUEUE waiting; the 5 past them refused at once, with nothing queued for them.
      expect(outcomes).toEqual([...Array(SIGNUP_AT_ONCE + SIGNUP_QUEUE).fill('hashed'), ...Array(5).fill('busy')]);
      // The login found the place no sign-up may take and started at once, before every sign-up that waited.
      expect(events.slice(0, SIGNUP_AT_ONCE + 1)).toEqual([
        ...Array(SIGNUP_AT_ONCE).fill(expect.objectContaining({ lane: 'signup', waited: false })),
        expect.objectContaining({ lane: 'now', waited: AT_ONCE === SIGNUP_AT_ONCE }),
      ]);
      expect(events.slice(SIGNUP_AT_ONCE + 1).map((event) => event.lane)).toEqual(Array(SIGNUP_QUEUE).fill('signup'));
    } finally {
      scryptChannel.unsubscribe(full);
    }
  });
});
