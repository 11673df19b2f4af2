/**
 * The HTTP server of `miniapp serve`: one Fastify app with the logger (its
 * redaction keeps credentials out of the log), one error body for every
 * route, CORS for one origin, and the relay. Later parts (metrics, the
 * blog API) register here too.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import cors from '@fastify/cors';
import { installErrorHandling } from './http-errors.js';
import { relayRoutes, type RelayOptions } from '../relay/routes.js';
import { instrumentHttp } from './http-metrics.js';
import type { Metrics } from './metrics.js';
import fastifyStatic from '@fastify/static';
import { blogApi, type BlogOptions } from '../blog/api.js';

export const DEFAULT_BODY_LIMIT = 64 * 1024;

export interface LogSink {
  write(line: string): unknown;
}

export interface ServerOptions {
  logger?: { level: string; stream: LogSink } | false;
  /** The one browser origin allowed, with credentials; none allows no cross-origin call. */
  corsOrigin?: string | undefined;
  bodyLimit?: number;
  relay: RelayOptions;
  /** Served at GET /metrics (Prometheus text or OpenMetrics), with every HTTP request counted. */
  metrics?: Metrics | undefined;
  /** The blog API at /api/v1, /api/v2 and /api (the latest), and its images at /uploads/. */
  blog?: Omit<BlogOptions, 'version'> | undefined;
}

/** Each mount of the blog API and the version it serves; /api follows the latest. */
export const BLOG_MOUNTS = [
  { prefix: '/api/v1', version: 1 },
  { prefix: '/api/v2', version: 2 },
  { prefix: '/api', version: 2 },
] as const;

/** Paths in log records that could carry a secret; Fastify's request serializer does not log headers, this makes sure. */
export const REDACTED_LOG_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.body',
  'res.headers["set-cookie"]',
  'accessToken',
  'refreshToken',
  'authorizationCode',
];

export async function buildServer(options: ServerOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger
      ? { level: options.logger.level, stream: options.logger.stream, redact: { paths: REDACTED_LOG_PATHS, censor: '[redacted]' } }
      : false,
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT,
    // Behind a proxy, the client's address comes from X-Forwarded-For only when the operator says so.
    trustProxy: false,
    // Idle keep-alive sockets close on shutdown; requests in flight finish first.
    forceCloseConnections: 'idle',
  }) as unknown as FastifyInstance;
  if (options.metrics) instrumentHttp(app, options.metrics);
  installErrorHandling(app);
  if (options.corsOrigin) {
    const allowed = options.corsOrigin;
    await app.register(cors, {
      origin: (origin, callback) => callback(null, origin === allowed),
      credentials: true,
      methods: ['GET', 'POST', 'OPTIONS'],
      allowedHeaders: ['Authorization', 'Content-Type'],
      maxAge: 600,
    });
  }
  await app.register(relayRoutes, options.relay);
  if (options.blog) {
    for (const mount of BLOG_MOUNTS) await app.register(blogApi, { ...options.blog, version: mount.version, prefix: mount.prefix });
    await app.register(fastifyStatic, {
      root: options.blog.images.directory,
      prefix: '/uploads/',
      // Content-addressed: a name never changes its bytes.
      immutable: true,
      maxAge: '365d',
      index: false,
      dotfiles: 'deny',
    });
  }
  return app;
}
