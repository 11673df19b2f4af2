/**
 * The blog API's errors: the standardized body with its status, and how any
 * failure (a route's, Fastify's, the database's) becomes one. Every
 * VALIDATION_ERROR, of a body, a query string or a path, says what is wrong
 * field by field: `{ field: [messages] }`.
 */
import type { FastifyRequest } from 'fastify';
import { STORE_UNAVAILABLE } from '../http/errors.js';
import { StoreUnavailableError } from '../store/sql.js';
import { NO_NUL } from './schemas.js';

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

export const unauthorized = (detail: string) => new ApiError(401, 'UNAUTHORIZED', 'Unauthorized', detail, { 'www-authenticate': 'Bearer' });

/** A 400 VALIDATION_ERROR naming each field and what is wrong with it. */
export const invalidFields = (problems: Record<string, string[]>) => new ApiError(400, 'VALIDATION_ERROR', 'Validation Error', problems);

const FASTIFY_ERRORS: Record<string, [number, string, string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'PAYLOAD_TOO_LARGE', 'Payload Too Large'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported Media Type'],
  // The relay answers the same code for the same bodies (http/errors.ts): one malformed-JSON error on every surface.
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'INVALID_JSON', 'Bad Request'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'INVALID_JSON', 'Bad Request'],
  FST_INVALID_MULTIPART_CONTENT_TYPE: [415, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported Media Type'],
};

/** One problem ajv found. */
export interface SchemaIssue {
  instancePath: string;
  schemaPath?: string;
  keyword?: string;
  params: Record<string, unknown>;
  message?: string;
}

interface BodySchema {
  properties?: Record<string, unknown>;
  additionalProperties?: unknown;
}

/** `/tags/0` as `tags[0]`; the field is its first step. */
function placeOf(instancePath: string): { field: string; place: string } {
  const steps = instancePath.split('/').slice(1);
  if (steps.length === 0) return { field: '', place: '' };
  return {
    field: steps[0]!,
    place:
      steps[0]! +
      steps
        .slice(1)
        .map((step) => `[${step}]`)
        .join(''),
  };
}

/** A field the body's schema does not have, and what it does take. */
function unknownField(field: string, schema: BodySchema): string {
  const known = Object.keys(schema.properties ?? {});
  return `${field} is not a field of this body${known.length > 0 ? ` (it takes ${known.join(', ')})` : ''}`;
}

/** ajv's message, said in words where its own quotes a pattern. */
function messageOf(issue: SchemaIssue): string {
  if (issue.keyword === 'pattern' && issue.params.pattern === NO_NUL) return 'must not hold a NUL character (U+0000)';
  return issue.message ?? 'is invalid';
}

/**
 * ajv's issues as `{ field: [messages] }`, the body's unknown fields each named (ajv stops at its first issue:
 * finding every problem of a hostile body is work without bound), and a body that is not an object as `body`.
 */
export function fieldProblems(issues: readonly SchemaIssue[], request?: FastifyRequest): Record<string, string[]> {
  const problems: Record<string, string[]> = {};
  const add = (field: string, message: string) => {
    const messages = problems[field] ?? [];
    problems[field] = messages;
    if (!messages.includes(message)) messages.push(message);
  };
  const schema = (request?.routeOptions?.schema?.body ?? {}) as BodySchema;
  // The branches of an anyOf that none matched are one problem: "must match format "date", or must match format "date-time"".
  const anyOf = new Map<string, string[]>();
  for (const issue of issues) {
    const branch = /^(.*\/anyOf)\/\d+\//.exec(issue.schemaPath ?? '');
    if (branch && issue.keyword !== 'anyOf')
      anyOf.set(`${issue.instancePath} ${branch[1]}`, [...(anyOf.get(`${issue.instancePath} ${branch[1]}`) ?? []), messageOf(issue)]);
  }
  for (const issue of issues) {
    if (/\/anyOf\/\d+\//.test(issue.schemaPath ?? '') && issue.keyword !== 'anyOf') continue;
    const missing = issue.params.missingProperty as string | undefined;
    const extra = issue.params.additionalProperty as string | undefined;
    const { field, place } = placeOf(issue.instancePath);
    if (missing !== undefined) add(place ? `${place}.${missing}` : missing, `${missing} is required`);
    else if (extra !== undefined) add(place ? `${place}.${extra}` : extra, unknownField(extra, schema));
    // A schema keyword that holds no field's value (a body that is not an object) is the body's.
    else {
      const branches = issue.keyword === 'anyOf' ? anyOf.get(`${issue.instancePath} ${issue.schemaPath}`) : undefined;
      add(field || 'body', `${place || 'body'} ${branches ? branches.join(', or ') : messageOf(issue)}`);
    }
  }
  const body = request?.body;
  if (schema.additionalProperties === false && body !== null && typeof body === 'object' && !Array.isArray(body)) {
    for (const field of Object.keys(body)) if (!Object.hasOwn(schema.properties ?? {}, field)) add(field, unknownField(field, schema));
  }
  return problems;
}

export function toApiError(error: unknown, request?: FastifyRequest): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof StoreUnavailableError) {
    return new ApiError(STORE_UNAVAILABLE.status, STORE_UNAVAILABLE.code, 'Service Unavailable', STORE_UNAVAILABLE.message, { ...STORE_UNAVAILABLE.headers });
  }
  const e = error as { code?: string; statusCode?: number; message?: string; validation?: SchemaIssue[]; validationContext?: string };
  if (e.validation) {
    // The body's unknown fields are the body's alone: a query string's problem says nothing of them.
    return invalidFields(fieldProblems(e.validation, e.validationContext === 'body' ? request : undefined));
  }
  const known = e.code ? FASTIFY_ERRORS[e.code] : undefined;
  if (known) return new ApiError(known[0], known[1], known[2], e.message ?? known[2]);
  if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) return new ApiError(e.statusCode, 'BAD_REQUEST', 'Bad Request', e.message ?? 'bad request');
  return new ApiError(500, 'INTERNAL_ERROR', 'Internal Server Error', 'an unexpected error occurred');
}
