/**
 * The blog HTTP API (spec 002, Part B), one Fastify plugin per version
 * mount: /api/v1 (1.1.0), /api/v2 (2.3.0) and /api (the latest). The route
 * schemas validate requests, shape responses and generate each mount's
 * OpenAPI description and docs page, so the three never disagree.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import multipart from '@fastify/multipart';
import { TokenService, type Principal } from '../auth/tokens.js';
import type { UserServiceImpl } from '../users/service.js';
import { DuplicateUserError, newUserProblems, type UserRecord } from '../users/user-store.js';
import type { Post, PostStore } from './posts.js';
import { MAX_IMAGE_BYTES, MAX_IMAGES, type ImageStore, type StoredImage } from './uploads.js';
import { ReceivedUpload, receiveFileParts, UPLOAD_IDLE_TIMEOUT_MS, UploadGate } from './upload-receiver.js';
import { registerPostLists } from './list-routes.js';
import type { Sql } from '../store/sql.js';
import { LoginLocked, type LoginLimiter } from '../auth/login-limits.js';
import { SignupLimited } from '../auth/signup-limits.js';
import { HashingBusy } from '../auth/passwords.js';
import { docsCsp } from '../http/security-headers.js';
import { METHOD_NOT_ALLOWED, methodNotAllowed } from '../http/errors.js';
import { lazyDocsPage } from './docs-page.js';
import { lazyOpenApi } from './openapi-document.js';
import { ApiError, fieldProblems, invalidFields, toApiError, unauthorized } from './api-error.js';
import {
  bearer,
  ContentSchema,
  errors,
  ImageSchema,
  OPTIONAL_BEARER,
  PostIdParams,
  PostSchema,
  PRIVATE_ANSWER,
  PUBLIC,
  signupErrors,
  TagsSchema,
  uploadErrors,
  TitleSchema,
  UserProfileSchema,
} from './schemas.js';

type ApiVersion = 1 | 2;

const API_VERSIONS: Record<ApiVersion, string> = { 1: '1.2.0', 2: '2.4.0' };
const LOGIN_TOKEN_TTL_SECONDS = 3600;
/**
 * The most bytes a JSON string of up to `characters` characters takes as JSON.stringify writes it: 6 a
 * character at worst (a control character is sent as \u0001; any other is at most 4 bytes of UTF-8).
 */
const jsonStringBytes = (characters: number) => 2 + 6 * characters;
/** Rounded up to whole KiB, with 1 KiB for the keys, punctuation and a pretty-printer's whitespace. */
const kib = (bytes: number) => Math.ceil((bytes + 1024) / 1024) * 1024;
/**
 * The body limit of the routes that take a post, from the post schema's lengths: the longest valid post as
 * JSON.stringify writes it always fits (595 KiB), and nothing much larger is read (413 beyond).
 */
export const POST_BODY_LIMIT = kib(
  jsonStringBytes(TitleSchema.maxLength) +
    jsonStringBytes(ContentSchema.maxLength) +
    TagsSchema.maxItems * (jsonStringBytes(TagsSchema.items.maxLength) + 1) +
    'is_published:false'.length,
);
const LOGIN_NAME_MAX = 254;
const LOGIN_PASSWORD_MAX = 1024;
/** The login body: a name and a password at their longest (9 KiB). */
const LOGIN_BODY_LIMIT = kib(jsonStringBytes(LOGIN_NAME_MAX) + jsonStringBytes(LOGIN_PASSWORD_MAX));

const CHANGE_HISTORY = `
## Change history

- **2.4.0** (and **1.2.0** of v1): \`POST /blog/posts\` takes \`is_published\` (v2; \`false\` writes a draft, sent to no
  webhook until it is published). Request bodies are taken as sent, as these documents always said
  (\`additionalProperties: false\`): a field the body does not have (on v1, \`tags\` of a new post) is a 400
  \`VALIDATION_ERROR\` naming it, where it was dropped, and a value of another type (\`"title": 12345\`) is a 400, where it was
  converted. Every \`VALIDATION_ERROR\`, of the query string and the path too, names each field in \`detail\`
  (\`{ field: [messages] }\`). A body that is not JSON (malformed, empty, not UTF-8, holding a lone surrogate escape
  such as \`\\ud800\`, or nested deeper than 32 levels) is a 400 \`INVALID_JSON\`, as on the relay, where it was a
  \`VALIDATION_ERROR\`.
- **2.3.0** (and **1.1.0** of v1): drafts are seen by their author and admins alone: \`GET /blog/posts/{id}\` of another's
  draft is 404, and \`?is_published=false\` lists the caller's own drafts (an admin's: every draft; without a token: none).
  Posts carry \`author_is_admin\`, true for those written with the admin token of serve, whose
  author is \`admin\`; \`?author=admin\` lists those alone. The usernames admin, administrator, root, system and miniapp are
  reserved (in any case or width): sign-up refuses them (400 naming \`username\`).
- **2.2.0**: \`next\` and \`previous\` of the post list carry a cursor (\`after\`, \`before\`): following them walks the list at the
  same cost at any depth, and a post written meanwhile is neither repeated nor skipped.
- **2.1.0**: tags on post creation (\`POST /blog/posts\` accepts \`tags\`); the \`sort\` parameter on the post list.
- **2.0.0** (breaking): the post list is paginated (\`page\`, \`page_size\`; answers \`count\`, \`next\`, \`previous\`, \`results\`)
  and filtered; \`POST /auth/login\` takes \`email\` instead of \`username\`.
- **1.0.0**: posts (list of at most 20, read, create, update), users, login by username, image uploads.
`;

export interface BlogOptions {
  version: ApiVersion;
  posts: PostStore;
  users: UserServiceImpl;
  tokens: TokenService;
  images: ImageStore;
  /** Publish the interactive docs page and the OpenAPI description. */
  docs: boolean;
  /**
   * Called when a post becomes public: created published, or published for
   * the first time by an update; inside the transaction that writes the
   * post, so what it writes through `tx` (the webhook deliveries) commits
   * with the post or not at all.
   */
  onPublished: (post: Post, tx: Sql) => Promise<void> | void;
  /**
   * Where clients reach serve (`serve --public-url`, e.g. https://blog.example.com):
   * pagination and image links are absolute under it. Without it they are
   * relative (`/api/v2/blog/posts?page=2`), never built from the request's Host.
   */
  publicUrl?: string | undefined;
  /** Counts wrong passwords and locks guessing out (auth/login-limits.ts); none when absent. */
  loginLimiter?: LoginLimiter | undefined;
  /** How long an upload's body may send nothing before it is dropped (default UPLOAD_IDLE_TIMEOUT_MS). */
  uploadIdleTimeoutMs?: number | undefined;
  /** Uploads in flight over every mount (one gate for the server); a gate of its own when absent. */
  uploadGate?: UploadGate | undefined;
}

// ---- helpers ----

async function principalOf(request: FastifyRequest, tokens: TokenService): Promise<Principal> {
  const header = request.headers.authorization;
  if (!header) throw unauthorized('this endpoint needs "Authorization: Bearer <access_token>" (POST /auth/login gives one)');
  const token = TokenService.bearer(header);
  if (!token) throw unauthorized('the Authorization header must be "Bearer <access_token>"');
  const principal = await tokens.authenticate(token);
  if (!principal) throw unauthorized('the access token is invalid or has expired; log in again');
  return principal;
}

/**
 * Who reads, on the public reads (the post lists, a post): the token's principal, or undefined without one. A token
 * that does not authenticate reads as no token (as anonymous), so that it never tells a draft from a missing post.
 */
async function readerOf(request: FastifyRequest, tokens: TokenService): Promise<Principal | undefined> {
  const token = request.headers.authorization === undefined ? undefined : TokenService.bearer(request.headers.authorization);
  return token ? await tokens.authenticate(token) : undefined;
}

/** A draft is seen by its author and by admins alone; anyone may see a published post. */
function maySee(post: { is_published: boolean; authorId: number | null }, reader: Principal | undefined): boolean {
  if (post.is_published || reader?.isAdmin) return true;
  return reader !== undefined && reader.userId !== null && reader.userId === post.authorId;
}

function profile(user: UserRecord) {
  return { id: user.id, username: user.username, email: user.email, avatar_url: user.avatarUrl, bio: user.bio, created_at: user.createdAt };
}

/** @fastify/swagger's options for the document of the blog API `version` mounted at `mount`. */
export function openApiOptions(version: ApiVersion, mount: string, publicUrl: string | undefined): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: `miniapp blog API v${version}`,
        version: API_VERSIONS[version],
        description: `Posts, users, login and image uploads, served by \`miniapp serve\`.\n${CHANGE_HISTORY}`,
        license: { name: 'MIT', url: 'https://opensource.org/license/mit' },
      },
      // Relative unless serve knows its public URL: the document then works wherever it is fetched from.
      servers: [{ url: `${publicUrl ?? ''}${mount}`, description: `the v${version} mount of this server` }],
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'access_token from POST /auth/login' } } },
      tags: [
        { name: 'posts', description: 'Blog posts: list (filtered and paginated in v2), read, create, change.' },
        { name: 'users', description: 'Sign-up: the same users as the gRPC user service (user.v1).' },
        { name: 'auth', description: 'Log in for a Bearer access token.' },
        { name: 'uploads', description: 'JPEG, PNG and WebP images, stored content-addressed and served under /uploads/.' },
      ],
    },
    // Multipart bodies are read by the handlers, not validated by Fastify; they are described here only.
    transform: ({ schema, url }) => {
      const { multipart: described, ...rest } = (schema ?? {}) as FastifySchema & { multipart?: object };
      return { schema: (described ? { ...rest, body: described, consumes: ['multipart/form-data'] } : rest) as FastifySchema, url };
    },
  };
}

// ---- the plugin ----

export async function blogApi(app: FastifyInstance, options: BlogOptions): Promise<void> {
  const { version, posts, users, tokens } = options;
  // The token is checked in onRequest, before any byte of the body is read: a request without a valid one is
  // answered 401 at once, however slowly its body would come.
  const principals = new WeakMap<FastifyRequest, Principal>();
  const authenticate = async (request: FastifyRequest) => {
    principals.set(request, await principalOf(request, tokens));
  };
  const auth = (request: FastifyRequest): Principal => principals.get(request)!;
  const uploadGate = options.uploadGate ?? new UploadGate();
  app.setErrorHandler((error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const sent = toApiError(error, request);
    // An unreachable database is an outage to watch, not a bug: no stack for each request that meets it.
    if (sent.statusCode === 503) request.log.warn({ code: sent.code }, (error as Error).message);
    else if (sent.statusCode >= 500) request.log.error({ err: error }, 'blog API error');
    void reply.status(sent.statusCode).headers(sent.headers).send({ error: sent.title, detail: sent.detail, code: sent.code });
  });
  app.setNotFoundHandler((request, reply) => {
    const wrongMethod = methodNotAllowed(request);
    if (wrongMethod) {
      void reply.status(405).header('allow', wrongMethod.allow).send({ error: 'Method Not Allowed', detail: wrongMethod.message, code: METHOD_NOT_ALLOWED });
      return;
    }
    void reply.status(404).send({ error: 'Not Found', detail: `no route for ${request.method} ${request.url.split('?')[0]}`, code: 'NOT_FOUND' });
  });

  if (options.docs) {
    // The document and the page are made at their first request (openapi-document.ts, docs-page.ts).
    const document = lazyOpenApi(app, openApiOptions(version, app.prefix, options.publicUrl));
    // Swagger UI at /docs; its page links its assets under the mount.
    lazyDocsPage(app, document, {
      uiConfig: { docExpansion: 'list', deepLinking: true },
      theme: { title: `miniapp blog API v${version}: docs` },
      // The page's own policy in place of the API's (which allows nothing): http/security-headers.ts.
      staticCSP: docsCsp(options.publicUrl ? [new URL(options.publicUrl).origin] : []),
    });
    app.get('/openapi.json', { schema: { hide: true } }, async () => (await document())());
  }
  await app.register(multipart, { limits: { fileSize: MAX_IMAGE_BYTES, files: MAX_IMAGES, fields: 10, parts: MAX_IMAGES + 10 } });

  // -- posts --
  await registerPostLists(app, { version, posts, publicUrl: options.publicUrl, reader: (request) => readerOf(request, tokens) });

  app.get(
    '/blog/posts/:post_id',
    {
      schema: {
        tags: ['posts'],
        operationId: 'getPost',
        summary: 'One post',
        description:
          'A draft (is_published false) is shown to its author and to admins only (send their Bearer token); to anyone else it is 404, as a post that does not exist.',
        security: OPTIONAL_BEARER,
        params: PostIdParams,
        response: { 200: PostSchema, ...errors(400, 404) },
      } as FastifySchema,
    },
    async (request, reply) => {
      const { post_id: id } = request.params as { post_id: number };
      const post = await posts.get(id);
      // Not 403: whether a draft exists is not told to those who may not see it.
      if (!post || (!post.is_published && !maySee(post, await readerOf(request, tokens))))
        throw new ApiError(404, 'NOT_FOUND', 'Not Found', `no post with id ${id}`);
      if (!post.is_published) void reply.header('cache-control', PRIVATE_ANSWER);
      const { authorId: _a, firstPublished: _f, ...body } = post;
      return body;
    },
  );

  app.post(
    '/blog/posts',
    {
      onRequest: authenticate,
      bodyLimit: POST_BODY_LIMIT,
      schema: {
        tags: ['posts'],
        operationId: 'createPost',
        summary:
          version === 1
            ? "Create a post (published at once; the author is the token's user)"
            : "Create a post (published unless is_published is false; the author is the token's user)",
        security: bearer,
        body: {
          type: 'object',
          // v1 predates tags and drafts on creation: it refuses them (400 naming the field), as any unknown field.
          properties:
            version === 1
              ? { title: TitleSchema, content: ContentSchema }
              : {
                  title: TitleSchema,
                  content: ContentSchema,
                  tags: { ...TagsSchema, default: [] },
                  is_published: {
                    type: 'boolean',
                    default: true,
                    description: 'false writes a draft (since 2.4.0): seen by its author and admins, sent to webhooks when first published',
                  },
                },
          required: ['title', 'content'],
          additionalProperties: false,
        },
        response: { 201: PostSchema, ...errors(400, 401, 413, 415) },
      } as FastifySchema,
    },
    async (request, reply) => {
      const principal = auth(request);
      const body = request.body as { title: string; content: string; tags?: string[]; is_published?: boolean };
      const isPublished = body.is_published !== false;
      // The post and its webhook deliveries are written together or not at all; a draft has none until it is published.
      const post = await posts.create(
        {
          title: body.title,
          content: body.content,
          tags: body.tags ?? [],
          authorId: principal.userId,
          author: principal.username ?? 'admin',
          authorIsAdmin: principal.kind === 'admin',
          isPublished,
        },
        isPublished ? options.onPublished : undefined,
      );
      return reply.status(201).send(post);
    },
  );

  app.patch(
    '/blog/posts/:post_id',
    {
      onRequest: authenticate,
      bodyLimit: POST_BODY_LIMIT,
      schema: {
        tags: ['posts'],
        operationId: 'updatePost',
        summary: 'Change a post (its author or an admin)',
        security: bearer,
        params: PostIdParams,
        body: {
          type: 'object',
          description: 'PostUpdateSchema: every field optional; null leaves it as it is.',
          properties: {
            // A type list, not anyOf: ajv would coerce "" to null to satisfy the null branch.
            title: { ...TitleSchema, type: ['string', 'null'] },
            content: { ...ContentSchema, type: ['string', 'null'] },
            tags: { ...TagsSchema, type: ['array', 'null'] },
            is_published: { type: ['boolean', 'null'] },
          },
          additionalProperties: false,
        },
        response: { 200: PostSchema, ...errors(400, 401, 403, 404, 413, 415) },
      } as FastifySchema,
    },
    async (request) => {
      const principal = auth(request);
      const { post_id: id } = request.params as { post_id: number };
      const current = await posts.get(id);
      // A draft that the caller may not see is not found, as with GET.
      if (!current || !maySee(current, principal)) throw new ApiError(404, 'NOT_FOUND', 'Not Found', `no post with id ${id}`);
      if (!principal.isAdmin && principal.userId !== current.authorId) {
        throw new ApiError(403, 'FORBIDDEN', 'Forbidden', 'only the author of a post or an admin may change it');
      }
      const body = (request.body ?? {}) as { title?: string | null; content?: string | null; tags?: string[] | null; is_published?: boolean | null };
      const result = await posts.update(
        id,
        { title: body.title ?? undefined, content: body.content ?? undefined, tags: body.tags ?? undefined, is_published: body.is_published ?? undefined },
        (updated, tx) => (updated.firstPublication ? options.onPublished(updated.post, tx) : undefined),
      );
      // Posts are never deleted today; should that change, a post gone since the check above is simply not found.
      if (!result) throw new ApiError(404, 'NOT_FOUND', 'Not Found', `no post with id ${id}`);
      return result.post;
    },
  );

  // -- users and login --
  app.post(
    '/users',
    {
      attachValidation: true,
      schema: {
        tags: ['users'],
        operationId: 'createUser',
        summary: 'Create a user (the same users as the gRPC user service)',
        security: PUBLIC,
        body: {
          type: 'object',
          properties: {
            username: { type: 'string', minLength: 3, maxLength: 20 },
            email: { type: 'string', format: 'email' },
            password: { type: 'string', minLength: 8 },
            bio: { type: ['string', 'null'], maxLength: 500 },
            avatar_url: { type: ['string', 'null'], format: 'uri' },
          },
          required: ['username', 'email', 'password'],
          additionalProperties: false,
        },
        response: { 201: UserProfileSchema, ...signupErrors() },
      } as FastifySchema,
    },
    async (request, reply) => {
      const body = (request.body && typeof request.body === 'object' ? request.body : {}) as Record<string, unknown>;
      // The domain's messages first (they name the rule), then the schema's for anything else.
      const problems = newUserProblems(body);
      if (request.validationError) {
        for (const [field, messages] of Object.entries(fieldProblems((request.validationError as { validation?: [] }).validation ?? [], request)))
          problems[field] ??= messages;
      }
      if (Object.keys(problems).length > 0) throw invalidFields(problems);
      try {
        const user = await users.createAccount(
          {
            username: body.username as string,
            email: body.email as string,
            password: body.password as string,
            full_name: '',
            bio: (body.bio as string | null | undefined) ?? null,
            avatar_url: (body.avatar_url as string | null | undefined) ?? null,
          },
          // A sign-up unless an admin's token makes the account (auth/signup-limits.ts).
          { authorization: request.headers.authorization, address: request.ip },
        );
        return reply.status(201).send(profile(user));
      } catch (error) {
        if (error instanceof DuplicateUserError) {
          throw new ApiError(400, 'VALIDATION_ERROR', 'Validation Error', { [error.field]: [error.message] });
        }
        if (error instanceof SignupLimited) {
          throw new ApiError(429, 'TOO_MANY_SIGNUPS', 'Too Many Requests', error.message, { 'retry-after': String(error.retryAfterSeconds) });
        }
        if (error instanceof HashingBusy) {
          throw new ApiError(503, 'SIGNUPS_BUSY', 'Service Unavailable', error.message, { 'retry-after': String(error.retryAfterSeconds) });
        }
        throw error;
      }
    },
  );

  const loginField = version === 1 ? 'username' : 'email';
  app.post(
    '/auth/login',
    {
      bodyLimit: LOGIN_BODY_LIMIT,
      schema: {
        tags: ['auth'],
        operationId: 'login',
        summary: version === 1 ? 'Log in by username and password' : 'Log in by e-mail and password',
        security: PUBLIC,
        body: {
          type: 'object',
          properties: {
            [loginField]: { type: 'string', minLength: 1, maxLength: LOGIN_NAME_MAX },
            password: { type: 'string', minLength: 1, maxLength: LOGIN_PASSWORD_MAX },
          },
          required: [loginField, 'password'],
          additionalProperties: false,
        },
        response: {
          200: {
            type: 'object',
            properties: { access_token: { type: 'string' }, token_type: { type: 'string' }, expires_in: { type: 'integer' } },
            required: ['access_token', 'token_type', 'expires_in'],
          },
          ...errors(400, 401, 413, 415, 429),
        },
      } as FastifySchema,
    },
    async (request, reply) => {
      // A token is never kept by a cache on the way (RFC 6749 §5.1), whatever the answer.
      void reply.header('cache-control', 'no-store');
      const body = request.body as Record<string, string>;
      // One count per account whichever route names it (v1 by username, v2 by e-mail).
      const account = await users.loginAccount(loginField, body[loginField]!);
      const limiter = options.loginLimiter;
      try {
        await limiter?.attempt(account, request.ip);
      } catch (error) {
        if (!(error instanceof LoginLocked)) throw error;
        throw new ApiError(
          429,
          'TOO_MANY_ATTEMPTS',
          'Too Many Requests',
          `too many failed logins for this ${loginField} from this address: try again in ${error.retryAfterSeconds} s`,
          { 'retry-after': String(error.retryAfterSeconds) },
        );
      }
      const user = await users.checkCredentials(loginField, body[loginField]!, body.password!);
      // A wrong password is counted already (attempt); a right one is given back.
      if (!user) throw new ApiError(401, 'INVALID_CREDENTIALS', 'Unauthorized', `wrong ${loginField} or password`);
      await limiter?.succeeded(account, request.ip);
      const { token, expiresIn } = await tokens.issueUserToken(user.id, LOGIN_TOKEN_TTL_SECONDS);
      return { access_token: token, token_type: 'bearer', expires_in: expiresIn };
    },
  );

  app.post(
    '/auth/revoke',
    {
      onRequest: authenticate,
      schema: {
        tags: ['auth'],
        operationId: 'revokeToken',
        summary: 'Revoke the access token this request carries (log out)',
        description:
          'The token stops working at once, on every instance, and the gRPC streams it holds open end with UNAUTHENTICATED. ' +
          'The admin token of `miniapp serve` is not revoked this way (403): it lives in its file, or in the shared store.',
        security: bearer,
        response: { 204: { type: 'null', description: 'revoked' }, ...errors(401, 403) },
      } as FastifySchema,
    },
    async (request, reply) => {
      const principal = auth(request);
      if (principal.kind === 'admin') {
        throw new ApiError(
          403,
          'FORBIDDEN',
          'Forbidden',
          'the admin token cannot be revoked through the API: remove its file (or its row in server_secrets) and restart serve',
        );
      }
      // auth() found it; a revocation that lost a race with another one finds none, and the token is gone either way.
      await tokens.revoke(TokenService.bearer(request.headers.authorization)!);
      return reply.status(204).send();
    },
  );

  // -- uploads --
  const imageUrl = (_request: FastifyRequest, image: StoredImage) => `${options.publicUrl ?? ''}/uploads/${image.name}`;
  const receiveImages = async (request: FastifyRequest, field: 'file' | 'files', most: number) => {
    if (!request.isMultipart()) {
      throw new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported Media Type', `send multipart/form-data with the image in the part "${field}"`);
    }
    const principal = auth(request);
    const release = uploadGate.enter(principal.kind === 'admin' ? 'admin' : `user:${principal.userId}`);
    const upload = await ReceivedUpload.open();
    try {
      try {
        await receiveFileParts(request, upload, field, most, options.uploadIdleTimeoutMs ?? UPLOAD_IDLE_TIMEOUT_MS);
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (code === 'FST_REQ_FILE_TOO_LARGE') {
          throw new ApiError(413, 'PAYLOAD_TOO_LARGE', 'Payload Too Large', `each image may be at most ${MAX_IMAGE_BYTES / 1024 / 1024} MB`);
        }
        if (code === 'FST_FILES_LIMIT') {
          throw new ApiError(400, 'TOO_MANY_FILES', 'Validation Error', `at most ${most} image${most === 1 ? '' : 's'} per request`);
        }
        if (error instanceof ApiError) throw error;
        // Anything else here comes from reading the form: a body that is not the multipart it claims to be.
        throw invalidFields({ body: [`malformed multipart/form-data body: ${(error as Error).message}`] });
      }
      if (upload.files.length === 0) throw invalidFields({ [field]: [`no image in the part "${field}"`] });
      // Check every image before storing any; read back one at a time.
      const { inspectImage } = await import('./uploads.js');
      const rejected: string[] = [];
      for (const file of upload.files) {
        const inspected = inspectImage(await upload.bytesOf(file));
        if (!inspected) rejected.push(file.name);
        else if (!inspected.ok) throw new ApiError(422, inspected.code, 'Unprocessable Content', `"${file.name}" is refused: ${inspected.problem}`);
      }
      if (rejected.length > 0) {
        throw new ApiError(
          415,
          'UNSUPPORTED_MEDIA_TYPE',
          'Unsupported Media Type',
          `${rejected.map((name) => `"${name}"`).join(', ')} ${rejected.length === 1 ? 'is' : 'are'} not a JPEG, PNG or WebP image (recognised by content, not by the declared type)`,
        );
      }
      const stored: StoredImage[] = [];
      for (const file of upload.files) stored.push((await options.images.save(await upload.bytesOf(file)))!);
      return stored;
    } finally {
      release();
      await upload.dispose();
    }
  };

  const binary = { type: 'string', format: 'binary' } as const;
  const uploadSchema = (operationId: string, summary: string, field: 'file' | 'files', response: object): FastifySchema =>
    ({
      tags: ['uploads'],
      operationId,
      summary,
      description: `multipart/form-data; the image${field === 'files' ? 's' : ''} in the part "${field}". JPEG, PNG or WebP (by content), whole (a truncated file is refused), at most 5 MB, 8192 pixels a side and 40 megapixels each; recommended at most 1920x1080.`,
      security: bearer,
      multipart: {
        type: 'object',
        properties: {
          [field]:
            field === 'file'
              ? { ...binary, description: 'one image' }
              : { type: 'array', items: binary, minItems: 1, maxItems: MAX_IMAGES, description: `1 to ${MAX_IMAGES} images` },
        },
        required: [field],
      },
      response: { 200: response, ...uploadErrors(uploadGate.perAccount) },
    }) as FastifySchema;

  app.post('/upload/image', { onRequest: authenticate, schema: uploadSchema('uploadImage', 'Upload an image', 'file', ImageSchema) }, async (request) => {
    const [image] = await receiveImages(request, 'file', 1);
    return { url: imageUrl(request, image!), width: image!.width, height: image!.height, size: image!.size };
  });

  app.post(
    '/upload/images',
    {
      onRequest: authenticate,
      schema: uploadSchema('uploadImages', `Upload up to ${MAX_IMAGES} images`, 'files', { type: 'array', items: ImageSchema, maxItems: MAX_IMAGES }),
    },
    async (request) => {
      const images = await receiveImages(request, 'files', MAX_IMAGES);
      return images.map((image) => ({ url: imageUrl(request, image), width: image.width, height: image.height, size: image.size }));
    },
  );
}
