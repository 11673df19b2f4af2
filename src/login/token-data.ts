/**
 * TokenData as the spec documents it and as the service really sends it:
 * `tokenType` in any case, `expiresIn` as a number or a string, scopes
 * separated by spaces or commas (unknown scope names tolerated).
 */
import { UpstreamError } from '../errors.js';

export interface TokenData {
  tokenType: 'Bearer';
  accessToken: string;
  refreshToken: string;
  /** Access-token lifetime in seconds. */
  expiresIn: number;
  /** Granted scopes, space-separated. */
  scope: string;
}

const DEFAULT_ACCESS_TTL_S = 3600;
export const REFRESH_TTL_MS = 14 * 24 * 3600 * 1000;

export function splitScopes(scope: unknown): string[] {
  return typeof scope === 'string' ? scope.split(/[\s,]+/).filter(Boolean) : [];
}

export function readTokenData(payload: unknown): TokenData {
  const data = (typeof payload === 'object' && payload !== null ? payload : {}) as Record<string, unknown>;
  const missing = ['accessToken', 'refreshToken'].filter((field) => typeof data[field] !== 'string' || !data[field]);
  if (missing.length > 0) {
    throw new UpstreamError(`the partner API answered without ${missing.join(' and ')}`, { code: 'BAD_RESPONSE' });
  }
  const type = typeof data.tokenType === 'string' ? data.tokenType : 'Bearer';
  if (type.toLowerCase() !== 'bearer') {
    throw new UpstreamError(`the partner API issued a token of type "${type}"; only Bearer tokens are known`, { code: 'BAD_RESPONSE' });
  }
  const expiresIn = typeof data.expiresIn === 'string' ? Number(data.expiresIn.trim()) : data.expiresIn;
  return {
    tokenType: 'Bearer',
    accessToken: data.accessToken as string,
    refreshToken: data.refreshToken as string,
    expiresIn: typeof expiresIn === 'number' && Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : DEFAULT_ACCESS_TTL_S,
    scope: splitScopes(data.scope).join(' '),
  };
}
