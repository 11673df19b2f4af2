/**
 * The five partner endpoints (spec 000, "Upstream partner API") under the
 * configured prefix, with the response envelope, plus the admin routes
 * under /__sandbox that play the client side (appLogin, unlink) and move
 * the clock.
 */
import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { SandboxClock } from '../clock.js';
import { encryptUserInfo } from '../../login/user-info.js';
import { PartnerFailure, type PartnerState } from './state.js';
import type { CallbackTarget } from './callback.js';
import { removeConnection } from './removal.js';

/** Failure bodies seen in the wild (FIELD-NOTES): the spec's envelope, a bare OAuth error, a top-level errorCode. */
export type ErrorShape = 'envelope' | 'bare' | 'top-level';
export const ERROR_SHAPES: readonly ErrorShape[] = ['envelope', 'bare', 'top-level'];

export interface PartnerRouteOptions {
  state: PartnerState;
  clock: SandboxClock;
  key: Buffer;
  aad: Buffer;
  /** Where the partner endpoints live (not `prefix`, which Fastify would apply to the admin routes too). */
  partnerPrefix: string;
  /** Answer every partner call this much later (a fault for time-out tests). */
  delayMs: number;
  errorShape: ErrorShape;
  /** Where unlink callbacks go; a holder, so a server started later (the relay) can be named after the fact. */
  callback: { current: CallbackTarget | undefined };
  stats: { partnerCalls: number };
  /** Whether the server demands a client certificate (`--mtls`): remove-by-user-key then takes one as the caller's credential. */
  mutualTls?: boolean;
  /** How granted scopes are joined in token and login-me answers: spaces (the spec) or commas (the vendor's documentation). */
  scopeSeparator?: ScopeSeparator;
}

/** Scopes space-separated as the spec writes them, or comma-separated as the vendor's documentation does. */
export type ScopeSeparator = ' ' | ',';

function withScopes<T extends { scope: string }>(payload: T, separator: ScopeSeparator): T {
  return separator === ' ' ? payload : { ...payload, scope: payload.scope.split(' ').filter(Boolean).join(separator) };
}

function failureBody(failure: PartnerFailure, shape: ErrorShape): unknown {
  if (shape === 'bare' && failure.errorCode === 'invalid_grant') return { error: 'invalid_grant', error_description: failure.reason };
  if (shape === 'top-level') return { errorCode: failure.errorCode, reason: failure.reason };
  return { resultType: 'FAIL', error: { errorCode: failure.errorCode, reason: failure.reason } };
}

function bearer(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  return header?.startsWith('Bearer ') ? header.slice(7) : undefined;
}

/** Whether the connection presented a client certificate that the server's CA verified. */
function certifiedPeer(request: FastifyRequest): boolean {
  const socket = request.raw.socket as Partial<TLSSocket>;
  return socket.encrypted === true && socket.authorized === true;
}

function body(request: FastifyRequest): Record<string, unknown> {
  const value = request.body;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new PartnerFailure(400, 'BAD_REQUEST', 'the request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

function userKeyOf(value: unknown): number {
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 0) {
    throw new PartnerFailure(400, 'BAD_REQUEST', 'userKey must be a non-negative integer');
  }
  return number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function partnerRoutes(app: FastifyInstance, options: PartnerRouteOptions): Promise<void> {
  const { state, partnerPrefix } = options;
  const separator = options.scopeSeparator ?? ' ';
  const success = (payload: unknown) => ({ resultType: 'SUCCESS', success: payload });

  app.setErrorHandler((error: Error & { statusCode?: number }, _request, reply: FastifyReply) => {
    const failure =
      error instanceof PartnerFailure
        ? error
        : new PartnerFailure(
            error.statusCode && error.statusCode < 500 ? error.statusCode : 500,
            error.statusCode && error.statusCode < 500 ? 'BAD_REQUEST' : 'INTERNAL_ERROR',
            error.message,
          );
    void reply.status(failure.status).send(failureBody(failure, options.errorShape));
  });

  app.register(
    async (partner) => {
      partner.addHook('onRequest', async () => {
        options.stats.partnerCalls++;
        if (options.delayMs > 0) await sleep(options.delayMs);
      });

      partner.post('/generate-token', async (request) => {
        const { authorizationCode, referrer } = body(request);
        return success(withScopes(state.generateToken(authorizationCode, referrer), separator));
      });

      partner.post('/refresh-token', async (request) => success(withScopes(state.refreshToken(body(request).refreshToken), separator)));

      partner.get('/login-me', async (request) => {
        const user = state.authenticate(bearer(request));
        state.journal.add(
          'user-info-read',
          user.userKey,
          `user info of ${user.userKey} read (login-me), agreedTerms: ${user.agreedTerms.join(', ') || 'none'}`,
        );
        return success(encryptUserInfo(withScopes({ ...user }, separator), options.key, options.aad));
      });

      partner.post('/access/remove-by-access-token', async (request) => {
        const user = state.authenticate(bearer(request));
        state.disconnect(user.userKey, 'removed by the backend (remove-by-access-token)');
        return success({ userKey: user.userKey });
      });

      partner.post('/access/remove-by-user-key', async (request) => {
        // The spec asks for a Bearer token, and one that is sent is checked. The vendor's API reference lists only the
        // body ({ userKey }) and its example server sends no Authorization: under mutual TLS the client certificate
        // authenticates the caller.
        const byCertificate = request.headers.authorization === undefined && options.mutualTls === true && certifiedPeer(request);
        if (!byCertificate) state.authenticate(bearer(request));
        const userKey = userKeyOf(body(request).userKey);
        state.disconnect(userKey, 'removed by the backend (remove-by-user-key)');
        return success({ userKey });
      });
    },
    { prefix: partnerPrefix },
  );

  app.register(
    async (admin) => {
      admin.post('/login', async (request) => {
        const login = state.login(userKeyOf(body(request).userKey));
        return { authorizationCode: login.authorizationCode, referrer: login.referrer, expiresAt: new Date(login.expiresAt).toISOString() };
      });

      admin.post('/unlink', async (request) => {
        const input = body(request);
        const userKey = userKeyOf(input.userKey);
        const reason = typeof input.reason === 'string' && input.reason ? input.reason : 'UNLINK';
        return removeConnection(state, options.callback.current, userKey, reason);
      });

      admin.post('/advance', async (request) => {
        const ms = body(request).ms;
        if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
          throw new PartnerFailure(400, 'BAD_REQUEST', 'ms must be a non-negative number of milliseconds');
        }
        options.clock.advance(ms);
        return { now: new Date(options.clock.now()).toISOString(), offsetMs: options.clock.offsetMs };
      });
    },
    { prefix: '/__sandbox' },
  );
}
