/**
 * Request rates on serve's HTTP APIs (auth/request-rates.ts): every route
 * of the blog API (/api/v1, /api/v2, /api), its images (/uploads/) and the
 * relay (/api/auth/*) takes from its client's bucket before anything else
 * runs; /health, /metrics and the docs pages (with their assets and
 * OpenAPI descriptions) are never limited. Which routes are limited is
 * decided once, as each route is added, not per request.
 *
 * A bearer token counts by itself only once it has authenticated (see
 * auth/request-rates.ts): a request with a token not seen yet counts
 * against its address and, when it goes through, its token is checked
 * (`verify`) so that the next request of a real token finds its own
 * bucket, on public routes too. A made-up token costs that check once per
 * request the address's budget lets through, never more.
 *
 * Every limited answer carries the RateLimit headers (the IETF httpapi
 * draft's RateLimit-Limit, -Remaining, -Reset and -Policy); a request over
 * the limit is answered 429 with Retry-After and the usual error body.
 */
import type { FastifyInstance, onRequestHookHandler, RouteOptions } from 'fastify';
import { isTokenKey, type RequestRates } from '../auth/request-rates.js';
import { TokenService } from '../auth/tokens.js';
import type { ErrorBody } from '../http/errors.js';

const RATE_LIMITED = 'RATE_LIMITED';

/** Whether a route (its full URL pattern) takes from the buckets. */
function isRateLimited(url: string): boolean {
  if (!url.startsWith('/api/') && !url.startsWith('/uploads/')) return false;
  return !/\/docs(\/|$)/.test(url) && !url.endsWith('/openapi.json');
}

/** Call before registering any route: the hook is attached to each limited route as it is added. */
export function installRequestRates(app: FastifyInstance, rates: RequestRates, verify?: (token: string) => Promise<unknown>): void {
  const { perSecond, burst } = rates.limits;
  const limit = String(burst);
  const policy = `${burst};w=${Math.max(1, Math.round(burst / perSecond))}`;
  const hook: onRequestHookHandler = (request, reply, done) => {
    const authorization = request.headers.authorization;
    const key = rates.keyOf(authorization, request.ip);
    const waitMs = rates.take(key);
    void reply
      .header('ratelimit-limit', limit)
      .header('ratelimit-remaining', String(rates.left))
      .header('ratelimit-reset', String(rates.resetSeconds()))
      .header('ratelimit-policy', policy);
    if (waitMs === 0) {
      const token = verify && authorization !== undefined && !isTokenKey(key) ? TokenService.bearer(authorization) : undefined;
      // What the check finds reaches the buckets through TokenService; the route still answers for itself (401 or not).
      if (token !== undefined)
        verify!(token).then(
          () => done(),
          () => done(),
        );
      else done();
      return;
    }
    const seconds = Math.ceil(waitMs / 1000);
    const detail = `more than ${perSecond} request${perSecond === 1 ? '' : 's'} a second (bursts of ${burst}) from this ${isTokenKey(key) ? 'access token' : 'address'}: try again in ${seconds} s`;
    void reply
      .code(429)
      .header('retry-after', String(seconds))
      .send({ error: 'Too Many Requests', detail, code: RATE_LIMITED } satisfies ErrorBody);
  };
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!isRateLimited(route.url)) return;
    const own = route.onRequest;
    route.onRequest = own === undefined ? [hook] : [hook, ...(Array.isArray(own) ? own : [own])];
  });
}
