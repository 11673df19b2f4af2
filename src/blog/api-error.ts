/**
 * The blog API's errors: the standardized body with its status, and how any
 * failure (a route's, Fastify's, the database's) becomes one.
 */
import { STORE_UNAVAILABLE } from '../http/errors.js';
import { StoreUnavailableError } from '../store/sql.js';

/** The standardized error body, with its HTTP status. */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    readonly title: string,
    readonly detail: unknown,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof detail === 'string' ? detail : title);
  }
}

export const unauthorized = (detail: string) =>
  new ApiError(401, 'UNAUTHORIZED', 'Unauthorized', detail, { 'www-authenticate': 'Bearer' });

const FASTIFY_ERRORS: Record<string, [number, string, string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'PAYLOAD_TOO_LARGE', 'Payload Too Large'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported Media Type'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'VALIDATION_ERROR', 'Validation Error'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'VALIDATION_ERROR', 'Validation Error'],
  FST_INVALID_MULTIPART_CONTENT_TYPE: [415, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported Media Type'],
};

export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof StoreUnavailableError) {
    return new ApiError(STORE_UNAVAILABLE.status, STORE_UNAVAILABLE.code, 'Service Unavailable', STORE_UNAVAILABLE.message, { ...STORE_UNAVAILABLE.headers });
  }
  const e = error as { code?: string; statusCode?: number; message?: string; validation?: unknown };
  if (e.validation) return new ApiError(400, 'VALIDATION_ERROR', 'Validation Error', e.message ?? 'invalid request');
  const known = e.code ? FASTIFY_ERRORS[e.code] : undefined;
  if (known) return new ApiError(known[0], known[1], known[2], e.message ?? known[2]);
  if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) return new ApiError(e.statusCode, 'BAD_REQUEST', 'Bad Request', e.message ?? 'bad request');
  return new ApiError(500, 'INTERNAL_ERROR', 'Internal Server Error', 'an unexpected error occurred');
}
