/**
 * The partner API's state machine (spec 000, "States and transitions"):
 * users, codes, tokens and login connections, held in memory against the
 * sandbox clock. Every rule the spec leaves open is decided here, the way
 * the real service is reported to behave: a refresh issues a new pair and
 * retires the old access token; a removal retires all of a user's tokens.
 *
 * Consent belongs to the connection: a user without one (never logged in,
 * or removed since) is a first-time user, who agrees to the terms on the
 * next appLogin(); a user with one is a returning user, who gets a code
 * with no screen.
 */
import { randomBytes } from 'node:crypto';
import type { SandboxClock } from '../clock.js';
import { personFor, type Person } from './people.js';
import type { TokenData } from '../../login/token-data.js';
import { PartnerFailure } from './failure.js';
import { agreedTags, checkTerms, DEFAULT_TERMS, requiredTags, type Term } from './terms.js';
import { Journal, shortened } from './journal.js';

export { PartnerFailure } from './failure.js';

const CODE_TTL_MS = 10 * 60_000;
const ACCESS_TTL_MS = 60 * 60_000;
const REFRESH_TTL_MS = 14 * 24 * 60 * 60_000;
/** The required tags of the default terms: what `miniapp sandbox login` agrees to for a first-time user. */
export const REQUIRED_TERMS = requiredTags(DEFAULT_TERMS);
export const GRANTED_SCOPE = 'user_ci user_name user_phone user_birthday user_gender user_nationality user_email user_key';
/** The userKey of the first user made without one. */
const FIRST_USER_KEY = 1001;

export interface PartnerStateOptions {
  /** The consent screen's terms (default DEFAULT_TERMS). */
  terms?: readonly Term[] | undefined;
}

interface Grant {
  userKey: number;
  expiresAt: number;
  retired: boolean;
}

export interface SandboxUser extends Person {
  userKey: number;
  agreedTerms: string[];
  scope: string;
}

function checkUserKey(userKey: number): void {
  if (!Number.isSafeInteger(userKey) || userKey < 0) throw new PartnerFailure(400, 'BAD_REQUEST', 'userKey must be a non-negative integer');
}

function opaque(prefix: string): string {
  return `${prefix}_${randomBytes(24).toString('base64url')}`;
}

export interface IssuedCode {
  authorizationCode: string;
  referrer: 'sandbox';
  expiresAt: number;
  /** The tags agreed to now, when this login was the user's first (the consent screen); undefined for a returning user. */
  consented: string[] | undefined;
}

export class PartnerState {
  readonly #users = new Map<number, SandboxUser>();
  readonly #connected = new Set<number>();
  readonly #codes = new Map<string, Grant>();
  readonly #access = new Map<string, Grant>();
  readonly #refresh = new Map<string, Grant>();
  /** The terms of the consent screen. */
  readonly terms: readonly Term[];
  /** What happened, for the host page's log. */
  readonly journal: Journal;

  constructor(
    private readonly clock: SandboxClock,
    options: PartnerStateOptions = {},
  ) {
    this.terms = checkTerms(options.terms ?? DEFAULT_TERMS);
    this.journal = new Journal(() => clock.now());
  }

  /** A user who has never logged in (a first-time user); the next free userKey from FIRST_USER_KEY unless one is given. */
  createUser(userKey?: number): SandboxUser {
    const key = userKey ?? Math.max(FIRST_USER_KEY - 1, ...this.#users.keys()) + 1;
    checkUserKey(key);
    if (this.#users.has(key)) throw new PartnerFailure(409, 'USER_EXISTS', `userKey ${key} is already a sandbox user`);
    const user = { userKey: key, ...personFor(key), agreedTerms: [], scope: GRANTED_SCOPE };
    this.#users.set(key, user);
    this.journal.add('user-created', key, `user ${key} (${user.name}) created: a first-time user`);
    return user;
  }

  /** Every user, by userKey. */
  users(): SandboxUser[] {
    return [...this.#users.values()].sort((a, b) => a.userKey - b.userKey);
  }

  /** Whether the user's next appLogin() shows the consent screen: no login connection (never logged in, or removed). */
  needsConsent(userKey: number): boolean {
    return !this.#connected.has(userKey);
  }

  isConnected(userKey: number): boolean {
    return this.#connected.has(userKey);
  }

  /**
   * appLogin(): every login gets a fresh code. A first-time user (unknown,
   * or without a connection) agrees to `agreedTerms` first (default: the
   * required ones, as `miniapp sandbox login` plays it), which must hold
   * every required tag; a returning user's terms stay as they were.
   */
  login(userKey: number, agreedTerms?: unknown): IssuedCode {
    checkUserKey(userKey);
    const user = this.#users.get(userKey) ?? this.createUser(userKey);
    let consented: string[] | undefined;
    if (!this.#connected.has(userKey)) {
      consented = agreedTerms === undefined ? requiredTags(this.terms) : agreedTags(this.terms, agreedTerms);
      user.agreedTerms = consented;
      this.#connected.add(userKey);
    }
    const authorizationCode = opaque('code');
    const expiresAt = this.clock.now() + CODE_TTL_MS;
    this.#codes.set(authorizationCode, { userKey, expiresAt, retired: false });
    this.journal.add(
      'code-issued',
      userKey,
      consented
        ? `code ${shortened(authorizationCode)} issued to ${userKey} after the consent screen (agreed: ${consented.join(', ') || 'none'})`
        : `code ${shortened(authorizationCode)} issued to ${userKey}, a returning user: no consent screen`,
    );
    return { authorizationCode, referrer: 'sandbox', expiresAt, consented };
  }

  generateToken(code: unknown, referrer: unknown): TokenData {
    if (typeof code !== 'string' || !code) throw new PartnerFailure(400, 'BAD_REQUEST', 'authorizationCode is required');
    if (typeof referrer !== 'string' || !referrer) throw new PartnerFailure(400, 'BAD_REQUEST', 'referrer is required');
    const grant = this.#codes.get(code);
    if (!grant || grant.retired || grant.expiresAt <= this.clock.now() || !this.#connected.has(grant.userKey)) {
      const why = !grant
        ? 'unknown'
        : grant.retired
          ? 'already used or revoked'
          : grant.expiresAt <= this.clock.now()
            ? 'expired'
            : 'its connection was removed';
      this.journal.add('exchange-refused', grant?.userKey ?? null, `generate-token refused code ${shortened(code)}: ${why} (invalid_grant)`, false);
      throw new PartnerFailure(400, 'invalid_grant', 'authorization code is expired or already used');
    }
    grant.retired = true;
    this.journal.add(
      'code-exchanged',
      grant.userKey,
      `code ${shortened(code)} of ${grant.userKey} exchanged for tokens (generate-token, referrer ${referrer})`,
    );
    return this.#issue(grant.userKey);
  }

  refreshToken(token: unknown): TokenData {
    if (typeof token !== 'string' || !token) throw new PartnerFailure(400, 'BAD_REQUEST', 'refreshToken is required');
    const grant = this.#refresh.get(token);
    if (!grant || grant.retired || grant.expiresAt <= this.clock.now()) {
      this.journal.add('exchange-refused', grant?.userKey ?? null, 'refresh-token refused a refresh token: expired, revoked or unknown (invalid_grant)', false);
      throw new PartnerFailure(400, 'invalid_grant', 'refresh token is expired or revoked');
    }
    grant.retired = true;
    for (const access of this.#access.values()) if (access.userKey === grant.userKey) access.retired = true;
    this.journal.add('token-refreshed', grant.userKey, `tokens of ${grant.userKey} refreshed (refresh-token): a new pair, the old access token retired`);
    return this.#issue(grant.userKey);
  }

  /** The user behind a valid access token. */
  authenticate(accessToken: string | undefined): SandboxUser {
    const grant = accessToken ? this.#access.get(accessToken) : undefined;
    if (!grant || grant.retired || grant.expiresAt <= this.clock.now()) {
      throw new PartnerFailure(401, 'invalid_grant', 'access token is expired or invalid');
    }
    const user = this.#users.get(grant.userKey);
    if (!user || !this.#connected.has(user.userKey)) throw new PartnerFailure(404, 'USER_NOT_FOUND', 'no such user');
    return user;
  }

  /**
   * Removes a login connection, and with it the consent (the next login
   * shows the consent screen again), and retires every token of the user.
   * `how` says who removed it, for the journal.
   */
  disconnect(userKey: number, how = 'removed'): void {
    const user = this.#users.get(userKey);
    if (!user || !this.#connected.has(userKey)) {
      throw new PartnerFailure(404, 'USER_NOT_FOUND', `no login connection for userKey ${userKey}`);
    }
    this.#connected.delete(userKey);
    user.agreedTerms = [];
    for (const table of [this.#codes, this.#access, this.#refresh]) {
      for (const grant of table.values()) if (grant.userKey === userKey) grant.retired = true;
    }
    this.journal.add('connection-removed', userKey, `login connection of ${userKey} ${how}: its tokens retired, the next login asks for consent`);
  }

  user(userKey: number): SandboxUser | undefined {
    return this.#users.get(userKey);
  }

  get connectedUsers(): number {
    return this.#connected.size;
  }

  #issue(userKey: number): TokenData {
    const now = this.clock.now();
    const accessToken = opaque('at');
    const refreshToken = opaque('rt');
    this.#access.set(accessToken, { userKey, expiresAt: now + ACCESS_TTL_MS, retired: false });
    this.#refresh.set(refreshToken, { userKey, expiresAt: now + REFRESH_TTL_MS, retired: false });
    return { tokenType: 'Bearer', accessToken, refreshToken, expiresIn: ACCESS_TTL_MS / 1000, scope: GRANTED_SCOPE };
  }
}
