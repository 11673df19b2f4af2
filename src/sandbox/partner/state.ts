/**
 * The partner API's state machine (spec 000, "States and transitions"):
 * codes, tokens and login connections, held in memory against the
 * sandbox clock. Every rule the spec leaves open is decided here, the way
 * the real service is reported to behave: a refresh issues a new pair and
 * retires the old access token; a removal retires all of a user's tokens.
 */
import { randomBytes } from 'node:crypto';
import type { SandboxClock } from '../clock.js';
import { personFor, type Person } from './people.js';
import type { TokenData } from '../../login/token-data.js';

export const CODE_TTL_MS = 10 * 60_000;
export const ACCESS_TTL_MS = 60 * 60_000;
export const REFRESH_TTL_MS = 14 * 24 * 60 * 60_000;
export const REQUIRED_TERMS = ['terms_service_required', 'terms_privacy_required'];
export const GRANTED_SCOPE = 'user_ci user_name user_phone user_birthday user_gender user_nationality user_email user_key';

/** A failure the sandbox answers with: HTTP status, errorCode and reason. */
export class PartnerFailure extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: string,
    readonly reason: string,
  ) {
    super(`${errorCode}: ${reason}`);
  }
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

function opaque(prefix: string): string {
  return `${prefix}_${randomBytes(24).toString('base64url')}`;
}

export class PartnerState {
  readonly #users = new Map<number, SandboxUser>();
  readonly #connected = new Set<number>();
  readonly #codes = new Map<string, Grant>();
  readonly #access = new Map<string, Grant>();
  readonly #refresh = new Map<string, Grant>();

  constructor(private readonly clock: SandboxClock) {}

  /** appLogin(): a first-time user agrees to the required terms; every login gets a fresh code. */
  login(userKey: number): { authorizationCode: string; referrer: 'sandbox'; expiresAt: number } {
    if (!Number.isSafeInteger(userKey) || userKey < 0) throw new PartnerFailure(400, 'BAD_REQUEST', 'userKey must be a non-negative integer');
    if (!this.#users.has(userKey)) {
      this.#users.set(userKey, { userKey, ...personFor(userKey), agreedTerms: [...REQUIRED_TERMS], scope: GRANTED_SCOPE });
    }
    this.#connected.add(userKey);
    const authorizationCode = opaque('code');
    const expiresAt = this.clock.now() + CODE_TTL_MS;
    this.#codes.set(authorizationCode, { userKey, expiresAt, retired: false });
    return { authorizationCode, referrer: 'sandbox', expiresAt };
  }

  generateToken(code: unknown, referrer: unknown): TokenData {
    if (typeof code !== 'string' || !code) throw new PartnerFailure(400, 'BAD_REQUEST', 'authorizationCode is required');
    if (typeof referrer !== 'string' || !referrer) throw new PartnerFailure(400, 'BAD_REQUEST', 'referrer is required');
    const grant = this.#codes.get(code);
    if (!grant || grant.retired || grant.expiresAt <= this.clock.now() || !this.#connected.has(grant.userKey)) {
      throw new PartnerFailure(400, 'invalid_grant', 'authorization code is expired or already used');
    }
    grant.retired = true;
    return this.#issue(grant.userKey);
  }

  refreshToken(token: unknown): TokenData {
    if (typeof token !== 'string' || !token) throw new PartnerFailure(400, 'BAD_REQUEST', 'refreshToken is required');
    const grant = this.#refresh.get(token);
    if (!grant || grant.retired || grant.expiresAt <= this.clock.now()) {
      throw new PartnerFailure(400, 'invalid_grant', 'refresh token is expired or revoked');
    }
    grant.retired = true;
    for (const access of this.#access.values()) if (access.userKey === grant.userKey) access.retired = true;
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

  /** Removes a login connection and retires every token of the user. */
  disconnect(userKey: number): void {
    if (!this.#users.has(userKey) || !this.#connected.has(userKey)) {
      throw new PartnerFailure(404, 'USER_NOT_FOUND', `no login connection for userKey ${userKey}`);
    }
    this.#connected.delete(userKey);
    for (const table of [this.#codes, this.#access, this.#refresh]) {
      for (const grant of table.values()) if (grant.userKey === userKey) grant.retired = true;
    }
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
