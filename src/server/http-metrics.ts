/**
 * HTTP request metrics of `miniapp serve` (Fastify hooks) and the
 * GET /metrics route that serves every metric. Requests are labelled with
 * the route template (`/api/v2/blog/posts/:post_id`), never the path, so
 * that ids and scanners cannot multiply the series. /metrics counts itself.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Metrics } from './metrics.js';

/** The route label of requests that match no route (404s of any path). */
export const UNMATCHED_ROUTE = '(unmatched)';
/** The status label of requests whose client left before the answer (nginx's "client closed request"). */
export const CLIENT_CLOSED = '499';

/** When each request in flight arrived; a request leaves it when it is counted, so it is counted once. */
const arrivals = new WeakMap<FastifyRequest, number>();

/**
 * Call right after creating the app, before any plugin: Fastify copies the
 * hooks of an instance into the plugins registered after them, not before.
 */
export function instrumentHttp(app: FastifyInstance, metrics: Metrics): void {
  const { requests, duration, inFlight } = metrics.http;
  const record = (request: FastifyRequest, status: string) => {
    const arrived = arrivals.get(request);
    if (arrived === undefined) return;
    arrivals.delete(request);
    inFlight.dec();
    const labels = { method: request.method, route: request.routeOptions.url ?? UNMATCHED_ROUTE, status };
    requests.inc(labels);
    duration.observe(labels, (performance.now() - arrived) / 1000);
  };
  app.addHook('onRequest', async (request, reply) => {
    arrivals.set(request, performance.now());
    inFlight.inc();
    // Fastify's onRequestAbort misses a client that leaves after sending its whole body (Node
    // marks only unfinished requests aborted), and onResponse never comes for it: the closed
    // response says it.
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) record(request, CLIENT_CLOSED);
    });
  });
  app.addHook('onResponse', async (request, reply) => record(request, String(reply.statusCode)));

  app.get('/metrics', async (request, reply) => {
    const { contentType, body } = await metrics.scrape(request.headers.accept);
    void reply.type(contentType).header('vary', 'Accept');
    return body;
  });
}
