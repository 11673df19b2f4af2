/**
 * The relay backend (spec 000, "Reference relay backend"): /api/auth/* in
 * front of the partner API, through the one PartnerClient, and /health.
 * Unlink callbacks are stored durably before they are acknowledged.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AuthError, UpstreamError, UsageError } from '../errors.js';
import { LoginLocked, type LoginLimiter } from '../auth/login-limits.js';
import type { PartnerClient } from '../login/partner-client.js';
import { normalizeReferrer } from '../login/referrer.js';
import { isKnownUnlinkReason } from '../login/unlink-reasons.js';
import { decryptUserInfo, decryptionError } from '../login/user-info.js';
import type { AadMaterial, KeyMaterial } from '../login/key-material.js';
import type { UnlinkEventStore } from '../store/unlink-events.js';
import { HttpError } from '../http/errors.js';
import { bearerChallenge } from '../http/bearer-challenge.js';
import { TokenOwners } from './token-owners.js';

/** The relay's routes whose answers carry tokens or personal fields. */
const PRIVATE_ANSWERS = new Set(['/api/auth/token', '/api/auth/refresh', '/api/auth/me']);

export interface RelayOptions {
  client: PartnerClient;
  key: KeyMaterial;
  aad: AadMaterial;
  events: UnlinkEventStore;
  /** `id:password` the unlink callback must carry as Basic auth. */
  callbackAuth?: string | undefined;
  version: string;
  now: () => Date;
  /** Readiness for /health/ready: whether the database answers now. */
  ready?: () => Promise<{ ready: boolean; reason?: string | undefined }>;
  /**
   * Counts authorization codes and refresh tokens the partner API refuses, per client address, and locks an
   * address that guesses (auth/login-limits.ts, in the store); none when absent.
   */
  grantLimiter?: LoginLimiter | undefined;
  /**
   * The operator credential: sent as the X-Operator-Token header, it lets /logout-by-user-key remove any user's
   * connection (without it, a token removes only its own user's). Compared in constant time, never logged.
   */
  operatorToken?: string | undefined;
}

/** The header that carries the operator token (REDACTED_LOG_PATHS keeps it out of the log). */
const OPERATOR_HEADER = 'x-operator-token';

/** The realm of the relay's Bearer challenges (RFC 6750 section 3). */
const RELAY_REALM = 'miniapp relay';

/** error_description of the challenge, per code: what the client does next (upstream reasons are not echoed there). */
const TOKEN_PROBLEMS: Readonly<Record<string, string>> = {
  ACCESS_TOKEN_EXPIRED: 'the access token has expired or was revoked; refresh it and retry',
  ACCESS_TOKEN_REJECTED: 'the partner API rejected the access token; refresh it and retry',
  REFRESH_TOKEN_EXPIRED: 'the refresh token has expired or was revoked; log in again',
  USER_NOT_FOUND: 'no login connection is left for this token; log in again',
};

/**
 * A 401 from a token the partner API did not take carries the challenge RFC 6750 section 3 asks for, naming
 * `invalid_token`; a used authorization code stays a 400 (the client logs in again, there is nothing to refresh).
 */
function challenged(error: unknown): unknown {
  if (!(error instanceof AuthError) || error.code === 'INVALID_GRANT') return error;
  return new HttpError(401, error.code, error.message, {
    'www-authenticate': bearerChallenge({
      realm: RELAY_REALM,
      error: 'invalid_token',
      description: TOKEN_PROBLEMS[error.code] ?? 'the token was not accepted',
    }),
  });
}

async function tokenCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw challenged(error);
  }
}

/** The key space of the relay's counts in login_failures, apart from the blog's logins. */
const RELAY_GRANT_SCOPE = 'relay-grant';

function jsonObject(request: FastifyRequest, expected: string): Record<string, unknown> {
  const body = request.body;
  if (body === undefined || body === null) throw new HttpError(400, 'MISSING_BODY', `the request needs a JSON body with ${expected}`);
  if (typeof body !== 'object' || Array.isArray(body)) throw new HttpError(400, 'INVALID_BODY', `the body must be a JSON object with ${expected}`);
  return body as Record<string, unknown>;
}

function requiredString(body: Record<string, unknown>, field: string): string {
  const value = body[field];
  if (value === undefined || value === null || value === '') throw new HttpError(400, 'MISSING_FIELD', `${field} is required`);
  if (typeof value !== 'string') throw new HttpError(400, 'INVALID_FIELD', `${field} must be a string`);
  return value;
}

/** The Bearer value, after the 7-character prefix `Bearer ` (spec rule 5). */
function bearer(request: FastifyRequest): string {
  const header = request.headers.authorization;
  if (!header) {
    // No credentials at all: the challenge names no error (RFC 6750 section 3.1).
    throw new HttpError(401, 'MISSING_AUTHORIZATION', 'the Authorization header is missing', { 'www-authenticate': bearerChallenge({ realm: RELAY_REALM }) });
  }
  // The scheme's name is case-insensitive (RFC 9110 section 11.1): "bearer", as some clients send it, is as good.
  const [, token] = /^bearer +(.*)$/is.exec(header) ?? [];
  if (!token?.trim()) {
    throw new HttpError(401, 'MALFORMED_AUTHORIZATION', 'the Authorization header must be "Bearer <access token>"', {
      'www-authenticate': bearerChallenge({
        realm: RELAY_REALM,
        error: 'invalid_request',
        description: 'the Authorization header must be Bearer <access token>',
      }),
    });
  }
  return token.trim();
}

function userKeyOf(value: unknown, where: string): number {
  if (value === undefined || value === null || value === '') throw new HttpError(400, 'MISSING_FIELD', `userKey is required (${where})`);
  const number = typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 0) {
    throw new HttpError(400, 'INVALID_FIELD', 'userKey must be a non-negative integer');
  }
  return number;
}

/** Compares in constant time; hashing first makes the lengths equal. */
function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

export async function relayRoutes(app: FastifyInstance, options: RelayOptions): Promise<void> {
  const { client } = options;
  const owners = new TokenOwners(() => options.now().getTime());

  /** The userKey of a token's user: remembered from an earlier /me, else asked of login-me. */
  const ownerOf = async (token: string): Promise<number> => {
    const known = owners.get(token);
    if (known !== undefined) return known;
    const info = await tokenCall(() => client.loginMe(token));
    return remember(token, info);
  };
  const remember = (token: string, info: Record<string, unknown>): number => {
    const userKey = typeof info.userKey === 'string' && /^\d+$/.test(info.userKey) ? Number(info.userKey) : info.userKey;
    if (typeof userKey !== 'number' || !Number.isSafeInteger(userKey)) {
      throw new UpstreamError('the partner API answered login-me without a userKey', { code: 'BAD_RESPONSE' });
    }
    owners.set(token, userKey);
    return userKey;
  };

  /**
   * Exchanges a code or a refresh token with the partner API under the address's limit: the attempt is counted
   * before the call (so guesses sent at once are held to the limit too) and given back, on success too, unless the
   * partner API refused the grant (an AuthError: invalid_grant, an unknown user, rejected credentials). An outage, a time-out
   * or a bad answer is not the client's guess and does not count.
   */
  const limitedGrant = async <T>(request: FastifyRequest, exchange: () => Promise<T>): Promise<T> => {
    const limiter = options.grantLimiter;
    if (!limiter) return exchange();
    try {
      await limiter.attemptFrom(RELAY_GRANT_SCOPE, request.ip);
    } catch (error) {
      if (!(error instanceof LoginLocked)) throw error;
      throw new HttpError(
        429,
        'TOO_MANY_ATTEMPTS',
        `too many refused authorization codes or refresh tokens from this address: try again in ${error.retryAfterSeconds} s`,
        { 'retry-after': String(error.retryAfterSeconds) },
      );
    }
    // Only a refused grant is a guess: an accepted one, an outage or a time-out gives its attempt back. Giving back
    // is best effort: the partner API has already spent the code, so its tokens go to the caller whatever the store says.
    const giveBack = () => limiter.givenBack(RELAY_GRANT_SCOPE, request.ip).catch(() => undefined);
    let granted: T;
    try {
      granted = await exchange();
    } catch (error) {
      if (!(error instanceof AuthError)) await giveBack();
      throw error;
    }
    await giveBack();
    return granted;
  };

  app.get('/health', async () => ({
    status: 'ok',
    timestamp: options.now().toISOString(),
    service: 'miniapp-relay',
    version: options.version,
  }));

  // Readiness, for load balancers: 503 while the database cannot answer, 200 again once it can.
  app.get('/health/ready', async (_request, reply) => {
    const state = options.ready ? await options.ready() : { ready: true };
    const body = {
      status: state.ready ? 'ready' : 'unavailable',
      timestamp: options.now().toISOString(),
      ...(state.ready ? {} : { detail: state.reason ?? 'the database cannot be reached' }),
    };
    return reply
      .code(state.ready ? 200 : 503)
      .header('cache-control', 'no-store')
      .send(body);
  });

  app.register(
    async (auth) => {
      // Tokens and the user's personal fields: never kept by a cache on the way (RFC 6749 §5.1), errors included.
      auth.addHook('onRequest', async (request, reply) => {
        if (PRIVATE_ANSWERS.has(request.routeOptions.url ?? '')) void reply.header('cache-control', 'no-store');
      });

      auth.post('/token', async (request) => {
        const body = jsonObject(request, 'authorizationCode and referrer');
        const code = requiredString(body, 'authorizationCode');
        let referrer: string;
        try {
          referrer = normalizeReferrer(requiredString(body, 'referrer'));
        } catch (error) {
          if (error instanceof UsageError) throw new HttpError(400, 'INVALID_FIELD', 'referrer must be DEFAULT or sandbox');
          throw error;
        }
        return tokenCall(() => limitedGrant(request, () => client.generateToken(code, referrer)));
      });

      auth.post('/refresh', async (request) => {
        const body = jsonObject(request, 'refreshToken');
        const refreshToken = requiredString(body, 'refreshToken');
        return tokenCall(() => limitedGrant(request, () => client.refreshToken(refreshToken)));
      });

      auth.get('/me', async (request) => {
        const token = bearer(request);
        const info = await tokenCall(() => client.loginMe(token));
        remember(token, info);
        const outcome = decryptUserInfo(info, options.key.bytes, options.aad.bytes);
        // The message is logged and answered: the AAD's form is named, never its value.
        if (outcome.failed.length > 0) throw decryptionError(outcome, info, options, { showAad: false });
        return outcome.user;
      });

      auth.post('/logout', async (request) => {
        const token = bearer(request);
        const owner = owners.get(token);
        await tokenCall(() => client.removeByAccessToken(token));
        owners.forgetToken(token);
        if (owner !== undefined) owners.forgetUser(owner);
        return { success: true };
      });

      /**
       * The partner API trusts the relay's certificate for any userKey, so who asks is checked here: a token removes
       * its own user's connection only (its userKey from login-me), the operator token any. Anything else is 403, the
       * same answer whether the userKey has a connection or not, and nothing is sent upstream.
       */
      auth.post('/logout-by-user-key', async (request) => {
        const query = request.query as Record<string, unknown>;
        const body = request.body && typeof request.body === 'object' ? (request.body as Record<string, unknown>) : {};
        const where = 'as a query parameter or in the JSON body';
        const operator = request.headers[OPERATOR_HEADER];
        if (operator !== undefined) {
          if (!options.operatorToken || typeof operator !== 'string' || !sameSecret(operator, options.operatorToken)) {
            throw new HttpError(403, 'OPERATOR_TOKEN_REFUSED', "the X-Operator-Token header does not carry the relay's operator token");
          }
          const userKey = userKeyOf(query.userKey ?? body.userKey, where);
          // A Bearer token sent along goes upstream (the spec's partner API asks for one); under mutual TLS none is needed.
          const token = request.headers.authorization === undefined ? undefined : bearer(request);
          await tokenCall(() => client.removeByUserKey(userKey, token));
          owners.forgetUser(userKey);
          return { success: true, userKey };
        }
        const token = bearer(request);
        const userKey = userKeyOf(query.userKey ?? body.userKey, where);
        if ((await ownerOf(token)) !== userKey) {
          throw new HttpError(
            403,
            'NOT_YOUR_CONNECTION',
            `an access token removes only its own user's login connection; another user's takes the operator token in the X-Operator-Token header`,
          );
        }
        await tokenCall(() => client.removeByUserKey(userKey, token));
        owners.forgetUser(userKey);
        return { success: true, userKey };
      });

      const receive = (method: 'GET' | 'POST') => async (request: FastifyRequest) => {
        if (options.callbackAuth) {
          const header = request.headers.authorization ?? '';
          const expected = `Basic ${Buffer.from(options.callbackAuth).toString('base64')}`;
          if (!sameSecret(header, expected)) {
            throw new HttpError(401, 'CALLBACK_UNAUTHORIZED', 'the callback did not carry the configured Basic-Auth credentials', {
              'www-authenticate': 'Basic realm="miniapp unlink callback"',
            });
          }
        }
        const input = method === 'GET' ? (request.query as Record<string, unknown>) : jsonObject(request, 'userKey and referrer');
        const userKey = userKeyOf(input.userKey, method === 'GET' ? 'as a query parameter' : 'in the JSON body');
        const referrer = input.referrer === undefined || input.referrer === null ? null : String(input.referrer);
        const event = await options.events.record({ receivedAt: options.now().toISOString(), userKey, referrer, method, source: request.ip });
        request.log.info({ userKey, referrer, known: isKnownUnlinkReason(referrer), id: event.id }, 'unlink callback recorded');
        return { success: true };
      };
      auth.get('/unlink-callback', receive('GET'));
      auth.post('/unlink-callback', receive('POST'));
    },
    { prefix: '/api/auth' },
  );
}
