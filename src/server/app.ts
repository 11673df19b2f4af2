/**
 * The HTTP server of `miniapp serve`: one Fastify app with the logger (its
 * redaction keeps credentials out of the log), one error body for every
 * route, CORS for one origin, and the relay. Later parts (metrics, the
 * blog API) register here too.
 */
import { redactUrl } from '../url-redaction.js';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import cors from '@fastify/cors';
import { installErrorHandling, refusalHandlers, type RefusalObserver } from '../http/errors.js';
import { installSecurityHeaders } from '../http/security-headers.js';
import { compilersFactory } from '../http/schema-compilers.js';
import { installJsonBodyParser } from '../http/json-body.js';
import { closeUnreadBodies } from '../http/unread-bodies.js';
import { relayRoutes, type RelayOptions } from '../relay/routes.js';
import { instrumentHttp } from './http-metrics.js';
import { installRequestRates } from './request-rates-hook.js';
import type { RequestRates } from '../auth/request-rates.js';
import type { Metrics } from './metrics.js';
import { blogApi, type BlogOptions } from '../blog/api.js';
import { imageRoute } from '../blog/image-route.js';
import type { Telemetry } from '../telemetry/telemetry.js';
import { traceHttp, tracedLoggerOptions } from './http-tracing.js';
import { HOST_PREFIX, hostRoutes, type HostPageOptions } from '../sandbox/host/routes.js';

/** Bodies of every route but those that set their own (the blog's posts: POST_BODY_LIMIT). */
const DEFAULT_BODY_LIMIT = 64 * 1024;

/**
 * The HTTP time-outs (the README's limits): Fastify leaves the request
 * time-out off, so a body that trickles in a byte at a time held its
 * request, and a stop, for as long as the client liked.
 * - A whole request, headers and body, must arrive within the request
 *   time-out (`serve --request-timeout`); past it Node answers 408 and
 *   closes the connection.
 * - A connection on which nothing arrives or leaves for a minute is closed
 *   (Node's socket time-out), a keep-alive one after 72 s without a request.
 */
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
const CONNECTION_IDLE_MS = 60_000;
const KEEP_ALIVE_MS = 72_000;

/** How often Node looks for requests past their time-out (its default, 30 s, would let a 1 s time-out run 31 s). */
function timeoutCheckInterval(requestTimeoutMs: number): number {
  return Math.max(50, Math.min(1_000, Math.floor(requestTimeoutMs / 4)));
}

/** Every method the APIs answer; a preflight from the allowed origin allows them all. */
const CORS_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
/** Every request header the APIs read beyond the CORS-safelisted ones. */
const CORS_HEADERS = ['Authorization', 'Content-Type'];
/** Response headers a browser script may read: the Bearer challenge of a 401. */
const CORS_EXPOSED_HEADERS = ['WWW-Authenticate'];

export interface LogSink {
  write(line: string): unknown;
}

export interface ServerOptions {
  logger?: { level: string; stream: LogSink } | false;
  /** The one browser origin allowed, with credentials; none allows no cross-origin call. */
  corsOrigin?: string | undefined;
  bodyLimit?: number;
  /** How long a whole request (headers and body) may take to arrive (default DEFAULT_REQUEST_TIMEOUT_MS). */
  requestTimeoutMs?: number | undefined;
  relay: RelayOptions;
  /** Served at GET /metrics (Prometheus text or OpenMetrics), with every HTTP request counted. */
  metrics?: Metrics | undefined;
  /** The Bearer token GET /metrics requires (`serve --metrics-token`); none: open to whoever reaches the port. */
  metricsToken?: string | undefined;
  /** The blog API at /api/v1, /api/v2 and /api (the latest), and its images at /uploads/. */
  blog?: Omit<BlogOptions, 'version'> | undefined;
  /** A span for every request, its ids on the request's log lines (http-tracing.ts); none when tracing is off. */
  telemetry?: Telemetry | undefined;
  /** Request rates per token or address on the blog API, its images and the relay (request-rates-hook.ts); none when absent. */
  requestRates?: RequestRates | undefined;
  /** True while serve drains before stopping: every answer then closes its connection (`Connection: close`). */
  draining?: () => boolean;
  /** The host page at /host/, over the embedded sandbox; never given when the upstream is a real partner API. */
  sandboxHost?: HostPageOptions | undefined;
}

/** Each mount of the blog API and the version it serves; /api follows the latest. */
export const BLOG_MOUNTS = [
  { prefix: '/api/v1', version: 1 },
  { prefix: '/api/v2', version: 2 },
  { prefix: '/api', version: 2 },
] as const;

/** Paths in log records that could carry a secret; Fastify's request serializer does not log headers, this makes sure. */
const REDACTED_LOG_PATHS = [
  'req.headers.authorization',
  'req.headers["x-operator-token"]',
  'req.headers.cookie',
  'req.body',
  'res.headers["set-cookie"]',
  'accessToken',
  'refreshToken',
  'authorizationCode',
];

/** Fastify's request fields of a log line, with the URL redacted (a query may carry a token: `?token=mat_...`). */
function logRequest(request: FastifyRequest): Record<string, unknown> {
  return {
    method: request.method,
    url: redactUrl(request.url),
    version: request.headers?.['accept-version'],
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

export async function buildServer(options: ServerOptions): Promise<FastifyInstance> {
  const requestTimeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  // Requests refused before any route runs are counted once the metrics are installed (below).
  let countRefusal: RefusalObserver | undefined;
  const { clientErrorHandler, frameworkErrors } = refusalHandlers((refusal) => countRefusal?.(refusal));
  const app = Fastify({
    logger: options.logger
      ? {
          level: options.logger.level,
          stream: options.logger.stream,
          redact: { paths: REDACTED_LOG_PATHS, censor: '[redacted]' },
          serializers: { req: logRequest },
        }
      : false,
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT,
    requestTimeout,
    connectionTimeout: CONNECTION_IDLE_MS,
    keepAliveTimeout: KEEP_ALIVE_MS,
    // Node checks the header time-out within the request time-out (past it, set afterwards as Fastify does, a body
    // that trickled was never timed out): both given to Node's constructor, the header one no longer than the other.
    http: { requestTimeout, headersTimeout: Math.min(requestTimeout, 60_000), connectionsCheckingInterval: timeoutCheckInterval(requestTimeout) },
    // Behind a proxy, the client's address comes from X-Forwarded-For only when the operator says so.
    trustProxy: false,
    // Idle keep-alive sockets close on shutdown; requests in flight finish first.
    forceCloseConnections: 'idle',
    // Requests Node or Fastify refuse before any route runs get the same error body and headers as the rest.
    clientErrorHandler,
    frameworkErrors,
    // Schemas compiled once per process, not once per mount and per start (http/schema-compilers.ts).
    schemaController: { compilersFactory },
    ...(options.telemetry && options.logger ? tracedLoggerOptions(options.telemetry) : {}),
  }) as unknown as FastifyInstance;
  if (options.telemetry) traceHttp(app, options.telemetry);
  installSecurityHeaders(app);
  if (options.requestRates) {
    const tokens = options.blog?.tokens;
    installRequestRates(app, options.requestRates, tokens && ((token) => tokens.authenticate(token)));
  }
  if (options.metrics) countRefusal = instrumentHttp(app, options.metrics, { token: options.metricsToken });
  installErrorHandling(app);
  // Nesting past MAX_JSON_DEPTH is refused before JSON.parse, on every route (http/json-body.ts).
  installJsonBodyParser(app);
  // A refusal sent before its body has arrived closes the connection rather than reading the rest (http/unread-bodies.ts).
  closeUnreadBodies(app);
  // A request in flight when the server starts closing gets its answer, and then its keep-alive connection goes
  // idle: Node closes idle connections only once, when close starts, and one left open holds the close (and the
  // process) for the keep-alive time-out (72 s). So idle connections are closed until the server has closed.
  app.addHook('preClose', (done) => {
    const sweep = setInterval(() => app.server.closeIdleConnections(), 50);
    app.server.once('close', () => clearInterval(sweep));
    done();
  });
  // While serve drains, each answer closes its keep-alive connection, so that clients reconnect through their load
  // balancer (to a ready instance) instead of holding a connection to one that is about to stop.
  const draining = options.draining;
  if (draining) {
    app.addHook('onRequest', (_request, reply, done) => {
      if (draining()) void reply.header('connection', 'close');
      done();
    });
  }
  if (options.corsOrigin) {
    const allowed = options.corsOrigin;
    await app.register(cors, {
      origin: (origin, callback) => callback(null, origin === allowed),
      credentials: true,
      methods: CORS_METHODS,
      allowedHeaders: CORS_HEADERS,
      exposedHeaders: CORS_EXPOSED_HEADERS,
      maxAge: 600,
    });
  }
  // A preflight that CORS does not allow (another origin, or none configured) is still a preflight:
  // it gets an empty 204 without CORS headers, and the browser refuses the call itself.
  app.addHook('onRequest', (request, reply, done) => {
    if (request.method === 'OPTIONS' && request.headers.origin && request.headers['access-control-request-method']) {
      void reply.header('vary', 'Origin').header('content-length', '0').code(204).send();
      return;
    }
    done();
  });
  await app.register(relayRoutes, options.relay);
  if (options.blog) {
    for (const mount of BLOG_MOUNTS) await app.register(blogApi, { ...options.blog, version: mount.version, prefix: mount.prefix });
    await app.register(imageRoute, { images: options.blog.images });
  }
  // The page polls its state every second: its requests are logged only when something goes wrong.
  if (options.sandboxHost) await app.register(hostRoutes, { ...options.sandboxHost, prefix: HOST_PREFIX, logLevel: 'warn' });
  return app;
}
