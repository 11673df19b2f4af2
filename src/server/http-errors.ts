/**
 * One error body for every HTTP route of `miniapp serve`:
 * `{ error, detail, code }` (`error` for clients of one reference variant,
 * `detail` for the other, `code` for machines). Never a stack trace; the
 * full story goes to the log.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AuthError, DecryptError, MiniappError, UpstreamError } from '../errors.js';

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
    const message = `no route for ${request.method} ${request.url.split('?')[0]}`;
    void reply.status(404).send({ error: message, detail: message, code: 'NOT_FOUND' } satisfies ErrorBody);
  });
}
