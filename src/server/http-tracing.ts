/**
 * A server span for every HTTP request of serve (relay, blog, uploads,
 * docs, metrics), when tracing is on: continued from the request's
 * `traceparent`, named by its route ("GET /api/v2/posts/:id"), active while
 * its hooks and handler run (so the store's spans and upstream calls nest
 * below it), ended with its status code.
 *
 * The span starts when Fastify makes the request's logger, before any log
 * line of the request: the logger is made with the span's trace_id and
 * span_id, so that every line of a traced request ("incoming request",
 * the handler's, "request completed") leads to its trace.
 *
 * Attributes: method, route, path (never the query string, whose values
 * may be tokens), status; no header, no body.
 */
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import type { IncomingMessage } from 'node:http';
import { SPAN_KIND, type Span, type Telemetry } from '../telemetry/telemetry.js';

const SPAN = Symbol('miniapp.span');

type Traced = { [SPAN]?: Span };

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function pathOf(url: string | undefined): string {
  if (!url) return '/';
  const mark = url.indexOf('?');
  return mark < 0 ? url : url.slice(0, mark);
}

function startRequestSpan(telemetry: Telemetry, raw: IncomingMessage): Span {
  const method = raw.method ?? 'GET';
  return telemetry.startSpan(method, {
    kind: SPAN_KIND.SERVER,
    parent: telemetry.extract(header(raw.headers.traceparent), header(raw.headers.tracestate)),
    attributes: {
      'http.request.method': method,
      'url.path': pathOf(raw.url),
      'url.scheme': 'http',
      ...(raw.socket?.remoteAddress ? { 'client.address': raw.socket.remoteAddress } : {}),
      ...(raw.socket?.localPort ? { 'server.port': raw.socket.localPort } : {}),
    },
  })!;
}

/** The server options that make each request's logger carry its span's ids (see the file's comment). */
export function tracedLoggerOptions(telemetry: Telemetry): Pick<FastifyServerOptions, 'childLoggerFactory'> {
  return {
    childLoggerFactory(logger, bindings, options, raw) {
      const span = startRequestSpan(telemetry, raw as IncomingMessage);
      (raw as Traced)[SPAN] = span;
      return logger.child({ ...bindings, ...telemetry.logFields(span) }, options) as FastifyBaseLogger;
    },
  };
}

/** Installs the hooks that start (when the logger did not), activate and end each request's span. */
export function traceHttp(app: FastifyInstance, telemetry: Telemetry): void {
  const spanOf = (request: FastifyRequest): Span => {
    const raw = request.raw as Traced;
    raw[SPAN] ??= startRequestSpan(telemetry, request.raw);
    return raw[SPAN];
  };
  app.addHook('onRequest', (request, _reply, done) => {
    const span = spanOf(request);
    const route = request.routeOptions.url;
    if (route) {
      span.updateName(`${request.method} ${route}`);
      span.setAttribute('http.route', route);
    }
    telemetry.withSpan(span, done);
  });
  // The body is read on the socket's own events, outside the request's context: each later stage enters it again.
  app.addHook('preValidation', (request, _reply, done) => telemetry.withSpan(spanOf(request), done));
  app.addHook('preHandler', (request, _reply, done) => telemetry.withSpan(spanOf(request), done));
  const end = (request: FastifyRequest, reply: FastifyReply | undefined) => {
    const raw = request.raw as Traced;
    const span = raw[SPAN];
    if (!span) return;
    raw[SPAN] = undefined;
    if (reply) {
      span.setAttribute('http.response.status_code', reply.statusCode);
      if (reply.statusCode >= 500) telemetry.fail(span, String(reply.statusCode));
    } else {
      telemetry.fail(span, 'aborted');
    }
    span.end();
  };
  app.addHook('onResponse', (request, reply, done) => {
    end(request, reply);
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    end(request, undefined);
    done();
  });
}
