/**
 * The blog API's JSON schemas: one source for request validation, response
 * serialisation and the OpenAPI document (api.ts registers the routes).
 */
import { RETRY_AFTER_SECONDS } from '../http/errors.js';

const ErrorSchema = {
  type: 'object',
  description: 'The standardized error body.',
  properties: {
    error: { type: 'string', examples: ['Validation Error'] },
    detail: {
      description: 'What went wrong: a message; for VALIDATION_ERROR an object mapping each field (of the body, the query string or the path) to its messages.',
      examples: [{ title: ['title must be string'], author_id: ['author_id is not a field of this body (it takes title, content, tags, is_published)'] }],
    },
    code: { type: 'string', examples: ['VALIDATION_ERROR'] },
  },
  required: ['error', 'detail', 'code'],
} as const;

export const PostSchema = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    title: { type: 'string' },
    content: { type: 'string' },
    author: { type: 'string', description: 'the username of the account that wrote the post; `admin` for the admin token of serve (see author_is_admin)' },
    author_is_admin: { type: 'boolean', description: 'written with the admin token of serve: no account can have this (nor, since 2.3.0, the name admin)' },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
    tags: { type: 'array', items: { type: 'string' } },
    is_published: { type: 'boolean' },
  },
  required: ['id', 'title', 'content', 'author', 'author_is_admin', 'created_at', 'updated_at', 'tags', 'is_published'],
} as const;

/**
 * Text without NUL (U+0000): PostgreSQL's text cannot hold it, so it is
 * refused on every backend alike, stored or searched for.
 */
export const NO_NUL = '^[^\\u0000]*$';
export const TagsSchema = { type: 'array', items: { type: 'string', minLength: 1, maxLength: 50, pattern: NO_NUL }, maxItems: 20 } as const;
export const TitleSchema = { type: 'string', minLength: 1, maxLength: 200, pattern: NO_NUL } as const;
export const ContentSchema = { type: 'string', minLength: 1, maxLength: 100_000, pattern: NO_NUL } as const;

export const UserProfileSchema = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    username: { type: 'string', minLength: 3, maxLength: 20 },
    email: { type: 'string' },
    avatar_url: { type: ['string', 'null'] },
    bio: { type: ['string', 'null'], maxLength: 500 },
    created_at: { type: 'string', format: 'date-time' },
  },
  required: ['id', 'username', 'email', 'avatar_url', 'bio', 'created_at'],
} as const;

export const ImageSchema = {
  type: 'object',
  properties: {
    url: { type: 'string' },
    width: { type: 'integer' },
    height: { type: 'integer' },
    size: { type: 'integer', description: 'bytes' },
  },
  required: ['url', 'width', 'height', 'size'],
} as const;

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Bad Request: a parameter or the body breaks its schema, or the body has a field it does not take (VALIDATION_ERROR, each field named in detail); or the body is not JSON: malformed, empty, not UTF-8, holding a lone surrogate escape, or nested deeper than 32 levels (INVALID_JSON)',
  401: 'Unauthorized: no valid Bearer token (UNAUTHORIZED), or wrong credentials (INVALID_CREDENTIALS)',
  403: "Forbidden: the token's user may not do this (FORBIDDEN)",
  404: 'Not Found: no such resource (NOT_FOUND)',
  413: "Payload Too Large: the body is over the route's limit, or an image over 5 MB (PAYLOAD_TOO_LARGE)",
  415: 'Unsupported Media Type: a Content-Type the route does not take, or a file that is not a JPEG, PNG or WebP image (UNSUPPORTED_MEDIA_TYPE)',
  422: 'Unprocessable Content: an image that is truncated or malformed past its header (INVALID_IMAGE), or over 8192 pixels a side or 40 megapixels (IMAGE_TOO_LARGE)',
  429: 'Too Many Requests: too many wrong passwords for this account from this address, or from this address; try again after Retry-After seconds (TOO_MANY_ATTEMPTS)',
  500: 'Internal Server Error: an unexpected failure, logged on the server (INTERNAL_ERROR)',
  503: 'Service Unavailable: the database cannot be reached now (SERVICE_UNAVAILABLE), or on uploads, 16 uploads are being received already (UPLOADS_BUSY); try again after Retry-After seconds',
};
const RETRY_AFTER_HEADER = {
  'Retry-After': { type: 'integer', description: `Seconds to wait before trying again (${RETRY_AFTER_SECONDS})` },
} as const;
const LOCKED_FOR_HEADER = {
  'Retry-After': {
    type: 'integer',
    description: 'Seconds until the lock ends: it doubles with each further wrong password (or, over the request rate, until another request is allowed)',
  },
} as const;
const RATE_LIMITED = "more requests than serve's request rate allows from this access token, or from this address without one (RATE_LIMITED)";
const RATE_LIMITED_HEADER = {
  'Retry-After': { type: 'integer', description: 'Seconds until the token or address may send another request' },
} as const;
/**
 * Every operation may meet an unexpected failure (500), a database that cannot be reached (503) and the request
 * rate of serve --rate-limit (429).
 */
export const errors = (...statuses: number[]) =>
  Object.fromEntries(
    [...statuses, ...(statuses.includes(429) ? [] : [429]), 500, 503].map((status) => [
      status,
      {
        ...ErrorSchema,
        description:
          status !== 429
            ? ERROR_DESCRIPTIONS[status]
            : statuses.includes(429)
              ? `${ERROR_DESCRIPTIONS[429]}; or ${RATE_LIMITED}`
              : `Too Many Requests: ${RATE_LIMITED}; try again after Retry-After seconds`,
        ...(status === 503
          ? { headers: RETRY_AFTER_HEADER }
          : status === 429
            ? { headers: statuses.includes(429) ? LOCKED_FOR_HEADER : RATE_LIMITED_HEADER }
            : {}),
      },
    ]),
  );
/** The upload routes: their 429 is also an account's own uploads in progress (TOO_MANY_UPLOADS), with Retry-After. */
export const uploadErrors = (perAccount: number) => ({
  ...errors(400, 401, 413, 415, 422),
  429: {
    ...ErrorSchema,
    description: `Too Many Requests: this account has ${perAccount} uploads in progress already (TOO_MANY_UPLOADS); or ${RATE_LIMITED}; try again after Retry-After seconds`,
    headers: RATE_LIMITED_HEADER,
  },
});
/**
 * POST /users: its 429 is the sign-up limit (TOO_MANY_SIGNUPS) or the request rate, its 503 also a sign-up lane
 * of the password hashing that is full (SIGNUPS_BUSY), both with Retry-After.
 */
export const signupErrors = () => ({
  ...errors(400, 413, 415),
  429: {
    ...ErrorSchema,
    description: `Too Many Requests: more sign-ups from this address (IPv6: its /64) than serve --signup-limit allows in its hour, counted by every instance together (TOO_MANY_SIGNUPS); or ${RATE_LIMITED}; try again after Retry-After seconds`,
    headers: {
      'Retry-After': {
        type: 'integer',
        description: "Seconds until the address's sign-up window ends (or, over the request rate, until another request is allowed)",
      },
    },
  },
  503: {
    ...ErrorSchema,
    description: `${ERROR_DESCRIPTIONS[503]}; or ${SIGNUPS_BUSY}`,
    headers: RETRY_AFTER_HEADER,
  },
});
const SIGNUPS_BUSY =
  'so many sign-ups wait for their password to be hashed already that no more are queued (SIGNUPS_BUSY): try again after Retry-After seconds';
export const bearer = [{ bearerAuth: [] }];
/** Says so explicitly: the operation needs no token. */
export const PUBLIC: never[] = [];
/** Public, and a Bearer token, when sent, shows what only its user may see (their drafts). */
export const OPTIONAL_BEARER = [{}, { bearerAuth: [] }];
/** The Cache-Control of an answer that depends on who asks (a draft, a list of drafts): kept by no cache, shared or private. */
export const PRIVATE_ANSWER = 'private, no-store';
/** Ids are below 2^53 on every backend (a JavaScript number holds them exactly; PostgreSQL's BIGINT would take more). */
export const PostIdParams = {
  type: 'object',
  properties: { post_id: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER } },
  required: ['post_id'],
} as const;
