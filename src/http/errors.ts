/**
 * One error body for every HTTP route of `miniapp serve`:
 * `{ error, detail, code }` (`error` for clients of one reference variant,
 * `detail` for the other, `code` for machines). Never a stack trace; the
 * full story goes to the log.
 */
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AuthError, DecryptError, MiniappError, UpstreamError } from '../errors.js';
import { StoreUnavailableError } from '../store/sql.js';
import { SECURITY_HEADERS } from './security-headers.js';

export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export interface ErrorBody {
  error: string;
  detail: string;
  code: string;
}

/**
 * How long a client should wait before trying again while the database
 * cannot be reached: about one connection time-out, so that a retry meets
 * either a database that is back or a fresh attempt to reach it.
 */
export const RETRY_AFTER_SECONDS = 5;

/** The answer to a StoreUnavailableError on every route: 503, never 500, and when to come back. */
export const STORE_UNAVAILABLE = {
  status: 503,
  code: 'SERVICE_UNAVAILABLE',
  message: 'the database cannot be reached now; try again shortly',
  headers: { 'retry-after': String(RETRY_AFTER_SECONDS) },
} as const;

const TRANSPORT_MESSAGES: Record<string, string> = {
  UPSTREAM_TIMEOUT: 'the partner API did not answer in time',
  UPSTREAM_UNREACHABLE: 'the partner API cannot be reached',
  UPSTREAM_TLS: 'the TLS handshake with the partner API failed',
  UPSTREAM_FAILURE: 'the request to the partner API failed',
};

const FASTIFY_CODES: Record<string, [number, string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'PAYLOAD_TOO_LARGE'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'UNSUPPORTED_MEDIA_TYPE'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'INVALID_JSON'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'INVALID_JSON'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'BAD_REQUEST'],
};

/** Maps any error to a status and body; `log` says what to record. */
export function toHttpError(error: unknown): { status: number; body: ErrorBody; headers: Record<string, string>; log: 'warn' | 'error' | 'info' } {
  const body = (status: number, code: string, message: string, headers: Record<string, string> = {}, log: 'warn' | 'error' | 'info' = 'info') => ({
    status,
    body: { error: message, detail: message, code },
    headers,
    log,
  });
  if (error instanceof HttpError) return body(error.statusCode, error.code, error.message, error.headers);
  if (error instanceof StoreUnavailableError) {
    return body(STORE_UNAVAILABLE.status, STORE_UNAVAILABLE.code, STORE_UNAVAILABLE.message, { ...STORE_UNAVAILABLE.headers }, 'warn');
  }
  if (error instanceof AuthError) {
    // A used or expired authorization code is the client's to fix by logging in again, not a token to refresh.
    return body(error.code === 'INVALID_GRANT' ? 400 : 401, error.code, error.message);
  }
  if (error instanceof DecryptError) return body(500, error.code, error.message, {}, 'error');
  if (error instanceof UpstreamError) return body(500, error.code, TRANSPORT_MESSAGES[error.code] ?? error.message, {}, 'warn');
  if (error instanceof MiniappError) return body(500, error.code, error.message, {}, 'error');
  const fastifyError = error as FastifyError;
  if (fastifyError?.code && FASTIFY_CODES[fastifyError.code]) {
    const [status, code] = FASTIFY_CODES[fastifyError.code]!;
    return body(status, code, fastifyError.message);
  }
  if (fastifyError?.validation) return body(400, 'VALIDATION_ERROR', fastifyError.message);
  if (fastifyError?.statusCode && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
    return body(fastifyError.statusCode, 'BAD_REQUEST', fastifyError.message);
  }
  return body(500, 'INTERNAL_ERROR', 'internal error', {}, 'error');
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const mapped = toHttpError(error);
    const message = error instanceof Error ? error.message : String(error);
    request.log[mapped.log]({ status: mapped.status, code: mapped.body.code, err: mapped.log === 'error' ? error : undefined }, message);
    void reply.status(mapped.status).headers(mapped.headers).send(mapped.body);
  });
  app.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) => {
    const wrongMethod = methodNotAllowed(request);
    if (wrongMethod) {
      void reply
        .status(405)
        .header('allow', wrongMethod.allow)
        .send({ error: wrongMethod.message, detail: wrongMethod.message, code: METHOD_NOT_ALLOWED } satisfies ErrorBody);
      return;
    }
    const message = `no route for ${request.method} ${request.url.split('?')[0]}`;
    void reply.status(404).send({ error: message, detail: message, code: 'NOT_FOUND' } satisfies ErrorBody);
  });
}

export const METHOD_NOT_ALLOWED = 'METHOD_NOT_ALLOWED';

/**
 * The methods a route is asked for by: OPTIONS is left out, as a preflight is answered for any path (CORS), not by
 * a route of its own.
 */
const ROUTE_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/**
 * For a request that no route answers: the methods its path does have routes for (the `Allow` of a 405, RFC 9110
 * section 15.5.6), and what to say; undefined when no method has one (a 404).
 */
export function methodNotAllowed(request: FastifyRequest): { allow: string; message: string } | undefined {
  const path = request.url.split('?', 1)[0]!;
  const allowed = ROUTE_METHODS.filter((method) => request.server.findRoute({ method, url: path }) !== null);
  // A route of the request's own method that found nothing there (an image not stored: reply.callNotFound) is a 404.
  if (allowed.length === 0 || allowed.includes(request.method as (typeof ROUTE_METHODS)[number])) return undefined;
  return { allow: allowed.join(', '), message: `${request.method} is not allowed on ${path}: it takes ${allowed.join(', ')}` };
}

/** Why Node's HTTP parser refused a request, in words a client author can act on. */
const PARSER_ERRORS: Record<string, [number, string, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'HEADERS_TOO_LARGE', 'the request headers are too large'],
  HPE_INVALID_HEADER_TOKEN: [400, 'BAD_REQUEST', 'a request header holds a character HTTP does not allow'],
  HPE_INVALID_METHOD: [400, 'BAD_REQUEST', 'the request method is not valid HTTP'],
  HPE_INVALID_URL: [400, 'BAD_REQUEST', 'the request target is not a valid URL'],
  HPE_INVALID_CONTENT_LENGTH: [400, 'BAD_REQUEST', 'the Content-Length header is not valid'],
  // llhttp's name for it: "Duplicate Content-Length".
  HPE_UNEXPECTED_CONTENT_LENGTH: [400, 'BAD_REQUEST', 'Content-Length is sent more than once'],
  HPE_INVALID_TRANSFER_ENCODING: [400, 'BAD_REQUEST', 'the Transfer-Encoding header is not valid: chunked, as its last coding, is what is taken'],
  HPE_INVALID_CHUNK_SIZE: [400, 'BAD_REQUEST', 'the chunked body is malformed'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'REQUEST_TIMEOUT', 'the request was not received in time'],
};

/** llhttp refuses Content-Length beside Transfer-Encoding as HPE_INVALID_TRANSFER_ENCODING; its reason tells the two apart. */
const BOTH_LENGTHS = 'Content-Length and Transfer-Encoding must not both be sent';

/** Why the parser refused `error`: status, code and words. */
function parserRefusal(error: NodeJS.ErrnoException & { reason?: string }): [number, string, string] {
  if (error.code === 'HPE_INVALID_TRANSFER_ENCODING' && /content-length/i.test(error.reason ?? '')) return [400, 'BAD_REQUEST', BOTH_LENGTHS];
  return PARSER_ERRORS[error.code ?? ''] ?? [400, 'BAD_REQUEST', 'the request is not valid HTTP'];
}

/** A request refused before any route ran: its socket, its method once the parser had read it, and the status sent. */
export interface Refusal {
  socket: Socket;
  method: string | undefined;
  status: number;
}
export type RefusalObserver = (refusal: Refusal) => void;

/** The security headers as raw header lines. */
const RAW_SECURITY_HEADERS = Object.entries(SECURITY_HEADERS)
  .map(([name, value]) => `${name}: ${value}\r\n`)
  .join('');

/**
 * Fastify's `clientErrorHandler` and `frameworkErrors` for serve: the
 * requests refused before any route runs (Node's parser: a header too large,
 * a duplicate Content-Length; Fastify's router: a path with malformed
 * percent-encoding) get the usual error body and the security headers every
 * answer carries, and `observe` is told of each (serve counts them in
 * /metrics).
 */
export function refusalHandlers(observe?: RefusalObserver): {
  clientErrorHandler: (error: NodeJS.ErrnoException, socket: Socket) => void;
  frameworkErrors: (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => void;
} {
  return {
    /**
     * Answers a request that Node's HTTP parser refused (no route, no Fastify
     * request exists yet) with the usual error body, then closes the socket.
     * Replaces Fastify's `{"error":"Bad Request","message":"Client Error"}`.
     */
    clientErrorHandler(error, socket) {
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE' || !socket.writable) {
        socket.destroy();
        return;
      }
      const [status, code, message] = parserRefusal(error);
      const body = JSON.stringify({ error: message, detail: message, code } satisfies ErrorBody);
      observe?.({ socket, method: undefined, status });
      socket.end(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n${RAW_SECURITY_HEADERS}` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    },

    /** Errors Fastify raises while routing (a path with malformed percent-encoding, a path segment too long): the usual error body. */
    frameworkErrors(error, request, reply) {
      const [status, code, message]: [number, string, string] =
        error.code === 'FST_ERR_BAD_URL'
          ? [400, 'BAD_REQUEST', 'the request path is not a valid URL path (malformed percent-encoding)']
          : error.code === 'FST_ERR_MAX_PARAM_LENGTH'
            ? [414, 'URI_TOO_LONG', 'a segment of the request path is longer than any route takes (100 characters)']
            : [400, 'BAD_REQUEST', 'bad request'];
      observe?.({ socket: request.raw.socket, method: request.method, status });
      void reply
        .code(status)
        .headers(SECURITY_HEADERS)
        .send({ error: message, detail: message, code } satisfies ErrorBody);
    },
  };
}
