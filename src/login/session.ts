/**
 * Tokens kept between commands (absolute expiry times, so that "time left"
 * survives restarts), and login-me with one automatic refresh: when the
 * access token has expired, by the stored expiry or by the API's answer,
 * and a refresh token is stored, refresh once, store the new pair, retry
 * once.
 */
import { AuthError, MiniappError } from '../errors.js';
import type { PartnerClient } from './partner-client.js';
import { REFRESH_TTL_MS, splitScopes, type TokenData } from './token-data.js';

export interface StoredTokens {
  tokenType: 'Bearer';
  accessToken: string;
  refreshToken: string;
  scope: string;
  /** ISO 8601. */
  accessTokenExpiresAt: string;
  /** ISO 8601; the API does not say, the spec gives 14 days. */
  refreshTokenExpiresAt: string;
  obtainedAt: string;
  referrer?: string;
}

export interface TokenStore {
  load(): StoredTokens | undefined;
  save(tokens: StoredTokens): Promise<void>;
  clear(): Promise<void>;
}

export function storedFrom(data: TokenData, now: Date, referrer?: string): StoredTokens {
  return {
    tokenType: data.tokenType,
    accessToken: data.accessToken,
    refreshToken: data.refreshToken,
    scope: data.scope,
    accessTokenExpiresAt: new Date(now.getTime() + data.expiresIn * 1000).toISOString(),
    refreshTokenExpiresAt: new Date(now.getTime() + REFRESH_TTL_MS).toISOString(),
    obtainedAt: now.toISOString(),
    ...(referrer ? { referrer } : {}),
  };
}

export interface TokenState {
  stored: StoredTokens;
  accessExpired: boolean;
  refreshExpired: boolean;
  accessMsLeft: number;
  refreshMsLeft: number;
  scopes: string[];
}

export function tokenState(stored: StoredTokens, now: Date): TokenState {
  const accessMsLeft = Date.parse(stored.accessTokenExpiresAt) - now.getTime();
  const refreshMsLeft = Date.parse(stored.refreshTokenExpiresAt) - now.getTime();
  return {
    stored,
    accessExpired: !(accessMsLeft > 0),
    refreshExpired: !(refreshMsLeft > 0),
    accessMsLeft,
    refreshMsLeft,
    scopes: splitScopes(stored.scope),
  };
}

export function notLoggedIn(profile: string): AuthError {
  return new AuthError(`no tokens are stored in profile "${profile}"`, {
    code: 'NOT_LOGGED_IN',
    hint: 'get a code from appLogin() (or `miniapp sandbox login`), then run `miniapp token exchange --code CODE`',
  });
}

/** Refreshes with the stored refresh token and stores the new pair. */
export async function refreshStored(client: PartnerClient, store: TokenStore, now: Date, refreshToken?: string): Promise<StoredTokens> {
  const current = store.load();
  const token = refreshToken ?? current?.refreshToken;
  if (!token) throw notLoggedIn('this');
  const data = await client.refreshToken(token);
  const next = storedFrom(data, now, current?.referrer);
  await store.save(next);
  return next;
}

export interface UserInfoResult {
  /** Personal fields still encrypted. */
  info: Record<string, unknown>;
  /** Whether the stored pair was refreshed on the way. */
  refreshed: boolean;
}

function isExpiredAccess(error: unknown): boolean {
  return error instanceof MiniappError && (error.code === 'ACCESS_TOKEN_EXPIRED' || error.code === 'ACCESS_TOKEN_REJECTED');
}

export async function fetchUserInfo(options: {
  client: PartnerClient;
  store: TokenStore;
  now: () => Date;
  profile: string;
  /** A token from MINIAPP_ACCESS_TOKEN: used as it is, never refreshed. */
  accessTokenOverride?: string | undefined;
}): Promise<UserInfoResult> {
  const { client, store, now } = options;
  if (options.accessTokenOverride) return { info: await client.loginMe(options.accessTokenOverride), refreshed: false };

  let stored = store.load();
  if (!stored) throw notLoggedIn(options.profile);
  let refreshed = false;
  if (tokenState(stored, now()).accessExpired && stored.refreshToken) {
    stored = await refreshStored(client, store, now());
    refreshed = true;
  }
  try {
    return { info: await client.loginMe(stored.accessToken), refreshed };
  } catch (error) {
    if (refreshed || !isExpiredAccess(error) || !stored.refreshToken) throw error;
    stored = await refreshStored(client, store, now());
    return { info: await client.loginMe(stored.accessToken), refreshed: true };
  }
}
