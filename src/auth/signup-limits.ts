/**
 * A limit on sign-ups per client address: one address made 996 accounts in
 * 25 s, each a password hash that logins then queued behind. A sign-up is an
 * account made by anyone but an admin: the blog's POST /users (every mount)
 * and gRPC CreateUser without the admin token (or a token of a user with
 * the admin role); those make accounts without counting. Each sign-up that
 * passes validation is counted before its password is hashed; past
 * `perAddress` in one window of `windowMs`, the address is answered 429
 * TOO_MANY_SIGNUPS / RESOURCE_EXHAUSTED with the seconds until its window
 * ends. Attempts that fail later (a name taken) count too: they cost a hash
 * as well. One refused because the sign-up lane of the hashing is full
 * (auth/passwords.ts, HashingBusy) is given back.
 *
 * The window is fixed, not sliding: it opens at an address's first sign-up
 * and lasts `windowMs`; the next sign-up after it opens a new one. So an
 * address makes at most 2 x perAddress accounts in any span of one window
 * (the end of one window and the start of the next), and a refused address
 * is told exactly when it may sign up again. IPv6 addresses count by their
 * /64, the block one subscriber gets (RFC 6177): the 2^64 addresses of a home
 * network are one address here.
 *
 * The counts live in the store (`signup_counts`), one row per address, so
 * every instance on one database shares them; one statement counts and
 * reads, atomically on both backends. Rows of windows that are over are
 * deleted as sign-ups come, so the table holds at most the addresses that
 * signed up within one window.
 */
import ipaddr from 'ipaddr.js';
import type { Sql } from '../store/sql.js';
import { HashingBusy, hashingBusy, signupLaneFull } from './passwords.js';
import { TokenService } from './tokens.js';

export interface SignupLimits {
  /** Sign-ups allowed per address in one window. */
  perAddress: number;
  /** The window, from an address's first sign-up in it. */
  windowMs: number;
}

/** Far above what a household or an office signs up in an hour; far below an account factory. */
export const DEFAULT_SIGNUP_LIMITS: SignupLimits = { perAddress: 10, windowMs: 60 * 60_000 };

const HOUR_MS = 3_600_000;
const describeWindow = (ms: number) =>
  ms === HOUR_MS ? 'an hour' : ms % HOUR_MS === 0 ? `${ms / HOUR_MS} hours` : ms % 60_000 === 0 ? `${ms / 60_000} minutes` : `${ms / 1000} s`;

/** The limit in words, for serve's banner. */
export function describeSignupLimits(limits: SignupLimits | false): string {
  if (!limits) return 'off';
  return `${limits.perAddress} per address (IPv6: per /64) in ${describeWindow(limits.windowMs)} from its first, shared by every instance`;
}

/** A sign-up refused for now: how many whole seconds until the address's window ends. */
export class SignupLimited extends Error {
  constructor(
    readonly retryAfterSeconds: number,
    readonly limits: SignupLimits,
  ) {
    super(`more than ${limits.perAddress} sign-ups from this address in ${describeWindow(limits.windowMs)}: try again in ${retryAfterSeconds} s`);
  }
}

/** The key an address counts under: an IPv4 address (also IPv4-mapped IPv6) as it is, an IPv6 address by its /64. */
export function signupAddressKey(address: string): string {
  const plain = address.replace(/%.*$/, '');
  if (!ipaddr.isValid(plain)) return address;
  const ip = ipaddr.process(plain);
  if (ip.kind() === 'ipv4') return ip.toString();
  return `${(ip as ipaddr.IPv6).parts
    .slice(0, 4)
    .map((part) => part.toString(16))
    .join(':')}::/64`;
}

export class SignupLimiter {
  constructor(
    private readonly sql: Sql,
    readonly limits: SignupLimits,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Counts one sign-up from `address`, or throws SignupLimited when the address is past its allowance. */
  async charge(address: string): Promise<void> {
    const now = this.now();
    const stale = new Date(now.getTime() - this.limits.windowMs).toISOString();
    // One statement: a new row, or the address's window counted on (or started again when it is over).
    const row = await this.sql.one<{ used: number; window_start: string }>(
      `INSERT INTO signup_counts (address, used, window_start) VALUES ($1, 1, $2)
       ON CONFLICT (address) DO UPDATE SET
         used = CASE WHEN signup_counts.window_start <= $3 THEN 1 ELSE signup_counts.used + 1 END,
         window_start = CASE WHEN signup_counts.window_start <= $3 THEN excluded.window_start ELSE signup_counts.window_start END
       RETURNING used, window_start`,
      [signupAddressKey(address), now.toISOString(), stale],
    );
    // Windows that are over are forgotten; on PostgreSQL rows other sign-ups hold are left for the next.
    await this.sql.run(
      this.sql.dialect === 'postgres'
        ? 'DELETE FROM signup_counts WHERE address IN (SELECT address FROM signup_counts WHERE window_start <= $1 FOR UPDATE SKIP LOCKED)'
        : 'DELETE FROM signup_counts WHERE window_start <= $1',
      [stale],
    );
    if (Number(row!.used) <= this.limits.perAddress) return;
    const endsAt = Date.parse(row!.window_start) + this.limits.windowMs;
    throw new SignupLimited(Math.max(1, Math.ceil((endsAt - now.getTime()) / 1000)), this.limits);
  }

  /** Gives back a sign-up counted for `address` that was refused before it cost anything (HashingBusy). */
  async giveBack(address: string): Promise<void> {
    await this.sql.run('UPDATE signup_counts SET used = used - 1 WHERE address = $1 AND used > 0', [signupAddressKey(address)]);
  }
}

/** Who asks for an account: the `authorization` they sent (HTTP header or gRPC metadata) and their address. */
export interface AccountCaller {
  authorization: string | undefined;
  address: string;
}

/**
 * The door every new account from outside goes through (CreateUser, POST /users): an admin's is made at once on
 * the hashing's first lane; anyone else's is a sign-up, counted per address (`limiter`, when the limit is on) and
 * hashed on the sign-up lane.
 */
export class SignUps {
  constructor(
    private readonly tokens: TokenService,
    private readonly limiter: SignupLimiter | undefined,
  ) {}

  /** Runs `create` (told whether it is a sign-up) once the caller may; throws SignupLimited or HashingBusy when not. */
  async admit<T>(caller: AccountCaller, create: (signup: boolean) => Promise<T>): Promise<T> {
    const token = TokenService.bearer(caller.authorization);
    if (token !== undefined && (await this.tokens.authenticate(token))?.isAdmin) return create(false);
    // Refused at once while sign-ups queue for hashing already, before anything is counted.
    if (signupLaneFull()) throw hashingBusy();
    await this.limiter?.charge(caller.address);
    try {
      return await create(true);
    } catch (error) {
      if (error instanceof HashingBusy) await this.limiter?.giveBack(caller.address);
      throw error;
    }
  }
}
