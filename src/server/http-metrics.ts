/**
 * HTTP request metrics of `miniapp serve` (Fastify hooks) and the
 * GET /metrics route that serves every metric. Requests are labelled with
 * the route template (`/api/v2/blog/posts/:post_id`), never the path, so
 * that ids and scanners cannot multiply the series. /metrics counts itself.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bearerChallenge } from '../http/bearer-challenge.js';
import type { ErrorBody, Refusal } from '../http/errors.js';
import type { Metrics } from './metrics.js';

/** The route label of requests that match no route (404s of any path). */
const UNMATCHED_ROUTE = '(unmatched)';
/**
 * The route label of requests refused before any route ran: by Node's parser (a header too large, a duplicate
 * Content-Length, Content-Length with Transfer-Encoding) or by the router (malformed percent-encoding).
 */
const REFUSED_ROUTE = '(refused)';
/** Their method label while the parser had not read one (it refused the request's head). */
const UNKNOWN_METHOD = '(unknown)';
/** The status label of requests whose client left before the answer (nginx's "client closed request"). */
const CLIENT_CLOSED = '499';

/** The realm of /metrics' Bearer challenge. */
const METRICS_REALM = 'miniapp metrics';

const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * The check of `serve --metrics-token` on GET /metrics: `Authorization: Bearer <token>` (what Prometheus sends for a
 * scrape config's `authorization`), compared in constant time (both sides hashed first, so that their lengths match
 * and tell nothing); anything else is 401 with the RFC 6750 challenge, before a metric is read.
 */
function metricsTokenCheck(token: string): (request: FastifyRequest, reply: FastifyReply) => Promise<void> {
  const expected = digest(token);
  return async (request, reply) => {
    const header = request.headers.authorization;
    const [, given] = /^bearer +(\S+) *$/i.exec(header ?? '') ?? [];
    if (given !== undefined && timingSafeEqual(digest(given), expected)) return;
    const message =
      header === undefined
        ? 'GET /metrics needs "Authorization: Bearer <the metrics token>" (serve --metrics-token)'
        : 'the Authorization header does not carry the metrics token';
    const challenge = bearerChallenge(
      header === undefined ? { realm: METRICS_REALM } : { realm: METRICS_REALM, error: 'invalid_token', description: 'the metrics token is not this one' },
    );
    void reply
      .code(401)
      .header('www-authenticate', challenge)
      .header('cache-control', 'no-store')
      .send({ error: message, detail: message, code: 'UNAUTHORIZED' } satisfies ErrorBody);
  };
}

/** When each request in flight arrived; a request leaves it when it is counted, so it is counted once. */
const arrivals = new WeakMap<FastifyRequest, number>();

/**
 * Call right after creating the app, before any plugin: Fastify copies the
 * hooks of an instance into the plugins registered after them, not before.
 * Gives back what counts the requests refused before any route ran
 * (http/errors.ts `refusalHandlers`). With `token`, GET /metrics answers
 * only requests that carry it as a Bearer token.
 */
export function instrumentHttp(app: FastifyInstance, metrics: Metrics, options: { token?: string | undefined } = {}): (refusal: Refusal) => void {
  const { requests, duration, inFlight } = metrics.http;
  /** The request in flight on each connection: one that Node's time-out ends is counted under its route, not as a refusal. */
  const onSocket = new WeakMap<Socket, FastifyRequest>();
  const record = (request: FastifyRequest, status: string) => {
    const arrived = arrivals.get(request);
    if (arrived === undefined) return;
    arrivals.delete(request);
    if (onSocket.get(request.raw.socket) === request) onSocket.delete(request.raw.socket);
    inFlight.dec();
    const labels = { method: request.method, route: request.routeOptions.url ?? UNMATCHED_ROUTE, status };
    requests.inc(labels);
    duration.observe(labels, (performance.now() - arrived) / 1000);
  };
  // Callback hooks, not async ones: an async hook costs each request a promise and a turn of the microtask queue.
  app.addHook('onRequest', (request, reply, done) => {
    arrivals.set(request, performance.now());
    onSocket.set(request.raw.socket, request);
    inFlight.inc();
    // Fastify's onRequestAbort misses a client that leaves after sending its whole body (Node
    // marks only unfinished requests aborted), and onResponse never comes for it: the closed
    // response says it.
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) record(request, CLIENT_CLOSED);
    });
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    record(request, String(reply.statusCode));
    done();
  });

  app.get('/metrics', { onRequest: options.token === undefined ? [] : [metricsTokenCheck(options.token)] }, async (request, reply) => {
    const { contentType, body } = await metrics.scrape(request.headers.accept);
    void reply.type(contentType).header('vary', 'Accept');
    return body;
  });

  return ({ socket, method, status }) => {
    const routed = onSocket.get(socket);
    // Node's request time-out (408) ends a request already routed, whose body was still coming: counted under its route.
    if (routed) record(routed, String(status));
    // Not timed: nothing of the request was seen before the refusal.
    else requests.inc({ method: method ?? UNKNOWN_METHOD, route: REFUSED_ROUTE, status: String(status) });
  };
}
