/**
 * Limits on guessing passwords (OWASP's guidance on credential stuffing):
 * wrong passwords are counted per account and client address, and per
 * address across accounts. Past a few free failures, each further one
 * locks that key for twice as long as the last (1 s, 2 s, 4 s ... up to a
 * ceiling); while a key is locked, attempts are answered 429 with
 * Retry-After and no password is checked. An attempt is counted before its
 * password is checked, so guesses sent all at once are held to the same
 * limit, and a right password gives its attempt back and clears its own
 * account-and-address count: it does not lift another address's lock, and
 * another address is never locked out by someone else's guesses.
 * Unknown accounts count as known ones do, so a lock tells nothing of
 * whether an account exists.
 *
 * The counts live in the store (`login_failures`), so every instance on one
 * database shares them. A count is forgotten after `windowMs` without a
 * failure.
 */
import type { Sql } from '../store/sql.js';

export interface LoginLimits {
  /** Wrong passwords allowed per account and address before the back-off starts. */
  perAccount: number;
  /** Wrong passwords allowed per address, over every account, before the back-off starts. */
  perAddress: number;
  /** The first lock; each further failure doubles it. */
  firstLockMs: number;
  /** The longest lock. */
  maxLockMs: number;
  /** A count is forgotten after this long without a failure. */
  windowMs: number;
}

export const DEFAULT_LOGIN_LIMITS: LoginLimits = {
  perAccount: 5,
  perAddress: 50,
  firstLockMs: 1_000,
  maxLockMs: 15 * 60_000,
  windowMs: 15 * 60_000,
};

/** The limits in words, for serve's banner and help. */
export function describeLoginLimits(limits: LoginLimits | false): string {
  if (!limits) return 'off';
  return (
    `${limits.perAccount} wrong passwords per account and address, ${limits.perAddress} per address, ` +
    `then locked for ${seconds(limits.firstLockMs)} doubling up to ${seconds(limits.maxLockMs)}`
  );
}

const seconds = (ms: number) => (ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms / 1000} s`);

/** A login refused for now: how many whole seconds to wait. */
export class LoginLocked extends Error {
  constructor(readonly retryAfterSeconds: number) {
    super(`too many failed logins: try again in ${retryAfterSeconds} s`);
  }
}

export class LoginLimiter {
  constructor(
    private readonly sql: Sql,
    private readonly limits: LoginLimits,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /**
   * Counts a login attempt before its password is checked, or throws LoginLocked (counting nothing) while the
   * account at this address, or the address, is locked. Counting first is what makes the limit hold for guesses
   * sent all at once: each attempt takes its keys' rows (on PostgreSQL locked until COMMIT, across instances; SQLite
   * runs one transaction at a time), so the attempts after the one that locks see the lock. A right password gives
   * its count back (`succeeded`).
   */
  async attempt(account: string, address: string): Promise<void> {
    await this.#count([
      [accountKey(account, address), this.limits.perAccount],
      [addressKey(address), this.limits.perAddress],
    ]);
  }

  /**
   * Counts an attempt of another kind than a password (`scope`: the relay's code exchanges and refreshes) from an
   * address alone, in a key space of its own, with the per-address allowance and the same back-off; throws
   * LoginLocked while the address is locked for that scope. An attempt that turns out not to be a failure is given
   * back (`givenBack`).
   */
  async attemptFrom(scope: string, address: string): Promise<void> {
    await this.#count([[scopedKey(scope, address), this.limits.perAddress]]);
  }

  /** Gives back an attempt counted by attemptFrom, with the lock it may have set unless the address is over its allowance without it. */
  async givenBack(scope: string, address: string): Promise<void> {
    await this.#giveBack(this.sql, scopedKey(scope, address));
  }

  /** One attempt back to an address's key, and the lock it may have set, unless the key is over its allowance without it. */
  async #giveBack(sql: Sql, key: string): Promise<void> {
    await sql.run(
      `UPDATE login_failures SET failures = failures - 1, locked_until = CASE WHEN failures - 1 <= $2 THEN NULL ELSE locked_until END
       WHERE key = $1 AND failures > 0`,
      [key, this.limits.perAddress],
    );
  }

  /** Counts one attempt under each key (with its free allowance), or throws LoginLocked while any is locked. */
  async #count(keys: readonly (readonly [string, number])[]): Promise<void> {
    const now = this.now();
    const at = now.toISOString();
    const stale = new Date(now.getTime() - this.limits.windowMs).toISOString();
    await this.sql.transaction(async (tx) => {
      const rows = [];
      // Always the account's row first, then the address's: attempts take their rows in one order, never in a circle.
      for (const [key] of keys) {
        // Made, or taken as it is (the update changes nothing): either way this transaction holds the row.
        const row = await tx.one<{ failures: number; last_at: string; locked_until: string | null }>(
          `INSERT INTO login_failures (key, failures, last_at) VALUES ($1, 0, $2)
           ON CONFLICT (key) DO UPDATE SET key = excluded.key
           RETURNING failures, last_at, locked_until`,
          [key, at],
        );
        rows.push(row!);
      }
      const lockedUntil = Math.max(...rows.map((row) => (row.locked_until ? Date.parse(row.locked_until) : 0)));
      if (lockedUntil > now.getTime()) throw new LoginLocked(Math.max(1, Math.ceil((lockedUntil - now.getTime()) / 1000)));
      for (const [i, [key, free]] of keys.entries()) {
        // A count nobody has added to for a whole window starts again.
        const failures = rows[i]!.last_at < stale ? 1 : Number(rows[i]!.failures) + 1;
        const over = failures - free;
        const lockMs = Math.min(this.limits.maxLockMs, this.limits.firstLockMs * 2 ** Math.min(over - 1, 30));
        await tx.run('UPDATE login_failures SET failures = $1, last_at = $2, locked_until = $3 WHERE key = $4', [
          failures,
          at,
          over > 0 ? new Date(now.getTime() + lockMs).toISOString() : null,
          key,
        ]);
      }
    });
    // Counts nobody has added to for a whole window are forgotten; rows other attempts hold are left for later.
    await this.sql.run(
      this.sql.dialect === 'postgres'
        ? 'DELETE FROM login_failures WHERE key IN (SELECT key FROM login_failures WHERE last_at < $1 FOR UPDATE SKIP LOCKED)'
        : 'DELETE FROM login_failures WHERE last_at < $1',
      [stale],
    );
  }

  /**
   * A right password: this account's count at this address starts again, and the address gets back the attempt
   * counted against it (with the lock that attempt may have set, unless the address is over its limit without it).
   */
  async succeeded(account: string, address: string): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await tx.run('DELETE FROM login_failures WHERE key = $1', [accountKey(account, address)]);
      await this.#giveBack(tx, addressKey(address));
    });
  }
}

const accountKey = (account: string, address: string) => `account:${address}:${account.trim().toLowerCase()}`;
const addressKey = (address: string) => `address:${address}`;
const scopedKey = (scope: string, address: string) => `${scope}:address:${address}`;
