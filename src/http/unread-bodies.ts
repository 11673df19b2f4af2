/**
 * An answer sent before its request's body has all arrived (a refusal: too
 * deep, too large, uploads busy, unauthenticated, rate-limited) closes the
 * connection. Otherwise Node reads the rest of the body to keep the
 * connection alive for the next request: a client announcing 100 MB that a
 * 503 refused would still be read to the end, a megabyte at a time, by the
 * server that had just refused it.
 *
 * The close lingers, as Go's and nginx's servers do: the answer, then FIN,
 * then nothing more is read (the kernel's receive window closes on the
 * sender, at no cost to serve), and the socket is destroyed LINGER_MS later.
 * Destroyed at once, a socket whose client is still sending makes the
 * kernel answer with a reset, and a reset can throw away the answer before
 * the client has read it: the client would see "connection reset" instead of
 * the 503 and its Retry-After.
 */
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** How long a connection closed on an unread body stays half-open, for the client to read the answer. */
const LINGER_MS = 1_000;

/** Makes Node's close of `socket` after the answer (`destroySoon`) a lingering one. */
function lingerOnClose(socket: Socket): void {
  socket.destroySoon = function lingeringClose(this: Socket) {
    this.end();
    // After Node's own handling of the unread request, which asks the socket for more on the next tick: from then on
    // nothing more is read.
    setImmediate(() => {
      this.removeAllListeners('data');
      this.pause();
    });
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    timer.unref();
    this.once('close', () => clearTimeout(timer));
  };
}

export function closeUnreadBodies(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    if (!request.raw.complete) {
      void reply.header('connection', 'close');
      lingerOnClose(request.raw.socket);
    }
    done(null, payload);
  });
}
