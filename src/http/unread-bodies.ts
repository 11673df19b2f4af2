/**
 * An answer sent before its request's body has all arrived (a refusal: too
 * deep, too large, uploads busy, unauthenticated, rate-limited) closes the
 * connection. Otherwise Node reads the rest of the body to keep the
 * connection alive for the next request: a client announcing 100 MB that a
 * 503 refused would still be read to the end, a megabyte at a time, by the
 * server that had just refused it.
 */
import type { FastifyInstance } from 'fastify';

export function closeUnreadBodies(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    if (!request.raw.complete) void reply.header('connection', 'close');
    done(null, payload);
  });
}
