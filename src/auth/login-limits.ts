/**
 * Limits on guessing passwords (OWASP's guidance on credential stuffing):
 * wrong passwords are counted per account and client address, and per
 * address across accounts. Past a few free failures, each further one
 * locks that key for twice as long as the last (1 s, 2 s, 4 s ... up to a
 * ceiling); while a key is locked, attempts are answered 429 with
 * Retry-After and no password is checked. A right password clears its own
 * account-and-address count only: it does not lift another address's lock,
 * and another address is never locked out by someone else's guesses.
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

  static keys(account: string, address: string): { account: string; address: string } {
    return { account: `account:${address}:${account.trim().toLowerCase()}`, address: `address:${address}` };
  }

  /** Throws LoginLocked while the account at this address, or the address, is locked. */
  async check(account: string, address: string): Promise<void> {
    const keys = LoginLimiter.keys(account, address);
    const now = this.now();
    const row = await this.sql.one<{ locked_until: string | null }>(
      'SELECT MAX(locked_until) AS locked_until FROM login_failures WHERE key IN ($1, $2) AND locked_until > $3',
      [keys.account, keys.address, now.toISOString()],
    );
    if (row?.locked_until) throw new LoginLocked(Math.max(1, Math.ceil((Date.parse(row.locked_until) - now.getTime()) / 1000)));
  }

  /** Counts a wrong password (or an unknown account), locking what is past its free failures. */
  async failed(account: string, address: string): Promise<void> {
    const keys = LoginLimiter.keys(account, address);
    const now = this.now();
    const stale = new Date(now.getTime() - this.limits.windowMs).toISOString();
    await this.sql.transaction(async (tx) => {
      for (const [key, free] of [
        [keys.account, this.limits.perAccount],
        [keys.address, this.limits.perAddress],
      ] as const) {
        // One statement, so that failures counted by several instances at once are all counted.
        const row = await tx.one<{ failures: number }>(
          `INSERT INTO login_failures (key, failures, last_at) VALUES ($1, 1, $2)
           ON CONFLICT (key) DO UPDATE SET
             failures = CASE WHEN login_failures.last_at < $3 THEN 1 ELSE login_failures.failures + 1 END,
             last_at = $2
           RETURNING failures`,
          [key, now.toISOString(), stale],
        );
        const over = Number(row!.failures) - free;
        if (over > 0) {
          const lockMs = Math.min(this.limits.maxLockMs, this.limits.firstLockMs * 2 ** Math.min(over - 1, 30));
          await tx.run('UPDATE login_failures SET locked_until = $1 WHERE key = $2', [new Date(now.getTime() + lockMs).toISOString(), key]);
        }
      }
      // Counts nobody has added to for a whole window are forgotten.
      await tx.run('DELETE FROM login_failures WHERE last_at < $1', [stale]);
    });
  }

  /** A right password: this account's count at this address starts again. */
  async succeeded(account: string, address: string): Promise<void> {
    await this.sql.run('DELETE FROM login_failures WHERE key = $1', [LoginLimiter.keys(account, address).account]);
  }
}
