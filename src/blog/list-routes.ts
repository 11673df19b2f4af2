/**
 * The post lists of the blog API (v1: the newest posts; v2: filtered and
 * paginated), and what keeps them cheap: answers kept under the posts'
 * version (ListCache), the page found by cursor or from the nearer end
 * (PostStore.page), and next/previous links that carry a cursor.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import type { PostPage, PostSort, PostStore } from './posts.js';
import { decodeCursor, encodeCursor, type PageCursor } from './post-listing.js';
import { ListCache } from './list-cache.js';
import { withPage } from './page-links.js';
import { invalidFields, type ApiError } from './api-error.js';
import type { Principal } from '../auth/tokens.js';
import { usernameKey } from '../users/user-store.js';
import { errors, NO_NUL, OPTIONAL_BEARER, PostSchema, PRIVATE_ANSWER } from './schemas.js';

const V1_LIST_LIMIT = 20;
/** The last page a v2 list accepts: far past any real list, and (page - 1) * page_size stays a safe integer for every store. */
const MAX_PAGE = 1_000_000;

/** The end of a v2 list's body, after its results. */
const CLOSE_BRACE = Buffer.from('}');

function dateBound(value: string | undefined): string | undefined {
  if (!value) return undefined;
  // A bare date means the start of that day (UTC); the bound is compared with ISO timestamps.
  if (/^\d{4}-\d{2}-\d{2}$/.test(value)) return new Date(`${value}T00:00:00.000Z`).toISOString();
  // RFC 3339 allows a leap second (23:59:60), which Date cannot hold: it is the instant the next second starts.
  const leap = /^(.{17})60(.*)$/.exec(value);
  if (leap) return new Date(new Date(`${leap[1]}59${leap[2]}`).getTime() + 1000).toISOString();
  return new Date(value).toISOString();
}

/**
 * The author filter: `admin` (in any case or width) names the admin token, whose posts alone it lists; any other
 * name lists the posts of the account of that username (case-insensitive), never the admin's.
 */
function authorFilter(author: string | undefined): { author?: string; author_is_admin?: boolean } {
  if (!author?.trim()) return {};
  if (usernameKey(author.trim()) === 'admin') return { author: 'admin', author_is_admin: true };
  return { author, author_is_admin: false };
}

function tagList(value: string[] | undefined): string[] | undefined {
  if (!value) return undefined;
  return value.flatMap((tag) => tag.split(','));
}

/**
 * The URL of the same list with another page: under the public URL when one
 * is configured, else relative. Never from the request's Host header, which
 * any client can set.
 */
function pageUrl(request: FastifyRequest, page: number, publicUrl: string | undefined, cursor: { after?: string; before?: string } = {}): string {
  const path = withPage(request.url, page, cursor);
  return publicUrl ? `${publicUrl}${path}` : path;
}

/** A 400 about query parameters, each named with what is wrong with it, as the schema's own are. */
function invalidQuery(problems: Record<string, string>): ApiError {
  return invalidFields(Object.fromEntries(Object.entries(problems).map(([field, message]) => [field, [message]])));
}

/** A cursor parameter of the list: the cursor, or a 400 that says what is wrong with it. */
function cursorParam(name: 'after' | 'before', text: string, sort: PostSort): PageCursor {
  const cursor = decodeCursor(text, sort);
  if ('problem' in cursor) throw invalidQuery({ [name]: `${name} ${cursor.problem}` });
  return cursor;
}

export interface PostListOptions {
  version: 1 | 2;
  posts: PostStore;
  publicUrl?: string | undefined;
  /** Who reads: the principal of the request's token, undefined without one (or with one that does not authenticate). */
  reader: (request: FastifyRequest) => Promise<Principal | undefined>;
}

/**
 * Whose drafts a list of drafts shows, and under which name its answers are kept: an admin's list holds every draft,
 * a user's their own (author_id), and one without a token none (no post has author_id 0).
 */
function draftsOf(reader: Principal | undefined): { filter: { author_id?: number }; cacheKey: string } {
  if (reader?.isAdmin) return { filter: {}, cacheKey: 'admin' };
  if (reader?.userId != null) return { filter: { author_id: reader.userId }, cacheKey: `user ${reader.userId}` };
  return { filter: { author_id: 0 }, cacheKey: 'nobody' };
}

const DRAFTS = 'Drafts (`is_published=false`) are listed to their author alone (send the Bearer token), every draft to an admin, and none without a token.';

/** Registers GET /blog/posts of a mount. */
export async function registerPostLists(app: FastifyInstance, options: PostListOptions): Promise<void> {
  const { version, posts } = options;
  // Kept from a URL's second request on: see ListCache.
  const lists = new ListCache<Buffer>(512, { admitOnSecondRequest: true });
  /**
   * Answers a post list from the cache while the posts are unchanged;
   * otherwise computes its JSON and keeps it under the version it was read
   * at (see ListCache for which it keeps). A computed answer in text (from
   * PostgreSQL) is sent as text: Node encodes it into the socket's write, and
   * no Buffer of the page's size is made for it (memory outside V8's heap,
   * which V8 answers with full collections). What is kept is kept as bytes,
   * so that a cached answer is not encoded again at every send.
   */
  const cachedList = async (
    request: FastifyRequest,
    reply: FastifyReply,
    compute: (version: string | undefined) => Promise<{ body: Buffer | string; version: string }>,
    reader?: string,
  ) => {
    // The links in a list depend on the URL only (see pageUrl), so the URL is the key; a list of drafts depends on
    // who reads it too, and is kept apart for each.
    const key = reader === undefined ? request.url : `${reader}\n${request.url}`;
    if (reader !== undefined) void reply.header('cache-control', PRIVATE_ANSWER);
    // A write acknowledged by any instance has changed the version (see PostStore.version): known without asking
    // while this instance holds its lease, else read, unless nothing can be kept for this URL (the statement
    // that computes the page reads the version with it).
    let current = posts.knownVersion();
    if (current === undefined && lists.has(key)) current = await posts.version();
    let body: Buffer | string | undefined = current === undefined ? undefined : lists.get(key, current);
    if (body === undefined) {
      const computed = await compute(current);
      const answer = computed.body;
      body = answer;
      lists.set(key, computed.version, typeof answer === 'string' ? () => Buffer.from(answer) : answer);
    }
    return reply.type('application/json; charset=utf-8').send(body);
  };

  if (version === 1) {
    app.get(
      '/blog/posts',
      {
        schema: {
          tags: ['posts'],
          operationId: 'listPosts',
          summary: 'The newest posts, at most 20',
          description: DRAFTS,
          security: OPTIONAL_BEARER,
          querystring: { type: 'object', properties: { is_published: { type: 'boolean', default: true } } },
          response: { 200: { type: 'array', items: PostSchema, maxItems: V1_LIST_LIMIT }, ...errors(400) },
        } as FastifySchema,
      },
      async (request, reply) => {
        const query = request.query as { is_published: boolean };
        const drafts = query.is_published ? undefined : draftsOf(await options.reader(request));
        return cachedList(
          request,
          reply,
          async (version) => {
            const page = await posts.page({ is_published: query.is_published, ...drafts?.filter }, { limit: V1_LIST_LIMIT, version });
            return { body: page.json, version: page.version };
          },
          drafts?.cacheKey,
        );
      },
    );
  } else {
    app.get(
      '/blog/posts',
      {
        schema: {
          tags: ['posts'],
          operationId: 'listPosts',
          summary: 'Posts, filtered and paginated',
          security: OPTIONAL_BEARER,
          description:
            'Filters combine with AND, except `tags`, which match any of the given tags (OR). `search` matches title or content, ' +
            'case-insensitively. `tags` may repeat (`tags=a&tags=b`) or be comma-separated. `next` and `previous` carry a cursor ' +
            '(`after`, `before`) besides the page number: following them costs the same at any depth, and a post written meanwhile ' +
            'is neither shown twice nor skipped; a page asked for by number alone (`page=N`) is the Nth page of the list as it is now. ' +
            DRAFTS,
          querystring: {
            type: 'object',
            properties: {
              page: { type: 'integer', minimum: 1, maximum: MAX_PAGE, default: 1 },
              page_size: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
              sort: {
                type: 'string',
                enum: ['created_at', '-created_at', 'title', '-title'],
                default: '-created_at',
                description: 'a leading "-" sorts descending',
              },
              search: { type: 'string', maxLength: 200, pattern: NO_NUL },
              author: {
                type: 'string',
                maxLength: 50,
                pattern: NO_NUL,
                description: 'a username (case-insensitive); `admin` lists the posts of the admin token of serve alone (author_is_admin)',
              },
              tags: { type: 'array', items: { type: 'string', maxLength: 200, pattern: NO_NUL }, maxItems: 20 },
              is_published: { type: 'boolean', default: true },
              created_after: { type: 'string', anyOf: [{ format: 'date' }, { format: 'date-time' }], description: 'inclusive' },
              created_before: { type: 'string', anyOf: [{ format: 'date' }, { format: 'date-time' }], description: 'exclusive' },
              after: {
                type: 'string',
                maxLength: 2048,
                description: 'the page after this cursor, as `next` gives it: leave it as it is (it belongs to the `sort` of the list it came from)',
              },
              before: {
                type: 'string',
                maxLength: 2048,
                description: 'the page before this cursor, as `previous` gives it: leave it as it is (it belongs to the `sort` of the list it came from)',
              },
            },
          },
          response: {
            200: {
              type: 'object',
              properties: {
                count: { type: 'integer' },
                next: { type: ['string', 'null'] },
                previous: { type: ['string', 'null'] },
                results: { type: 'array', items: PostSchema },
              },
              required: ['count', 'next', 'previous', 'results'],
            },
            ...errors(400),
          },
        } as FastifySchema,
      },
      async (request, reply) => {
        const query = request.query as {
          page: number;
          page_size: number;
          sort: PostSort;
          search?: string;
          author?: string;
          tags?: string[];
          is_published: boolean;
          created_after?: string;
          created_before?: string;
          after?: string;
          before?: string;
        };
        if (query.after !== undefined && query.before !== undefined) {
          const both = 'after and before cannot both be given: follow next or previous as given';
          throw invalidQuery({ after: both, before: both });
        }
        const after = query.after === undefined ? undefined : cursorParam('after', query.after, query.sort);
        const before = query.before === undefined ? undefined : cursorParam('before', query.before, query.sort);
        const drafts = query.is_published ? undefined : draftsOf(await options.reader(request));
        return cachedList(
          request,
          reply,
          async (version) => {
            const page = await posts.page(
              {
                search: query.search,
                ...authorFilter(query.author),
                tags: tagList(query.tags),
                is_published: query.is_published,
                created_after: dateBound(query.created_after),
                created_before: dateBound(query.created_before),
                ...drafts?.filter,
              },
              { sort: query.sort, limit: query.page_size, offset: (query.page - 1) * query.page_size, after, before, version },
            );
            const { next, previous } = pageLinks(request, query, page);
            // What JSON.stringify({ count, next, previous, results }) gives, around the posts' JSON as the store wrote it.
            const head = `{"count":${JSON.stringify(page.total)},"next":${JSON.stringify(next)},"previous":${JSON.stringify(previous)},"results":`;
            if (typeof page.json === 'string') return { body: `${head}${page.json}}`, version: page.version };
            const headBytes = Buffer.from(head);
            return { body: Buffer.concat([headBytes, page.json, CLOSE_BRACE], headBytes.length + page.json.length + 1), version: page.version };
          },
          drafts?.cacheKey,
        );
      },
    );
  }

  /**
   * The next and previous links of a page: the page number either side, and
   * the cursor of the page's last (next) or first (previous) post, so that a
   * client following them walks the list by seeks. Page 1 is always the
   * list's start, without a cursor.
   */
  function pageLinks(
    request: FastifyRequest,
    query: { page: number; page_size: number; sort: PostSort; after?: string; before?: string },
    page: PostPage,
  ): { next: string | null; previous: string | null } {
    const number = page.isFirstPage ? 1 : query.page;
    const link = (n: number, cursor?: { name: 'after' | 'before'; at: PageCursor }) =>
      pageUrl(request, n, options.publicUrl, cursor ? { [cursor.name]: encodeCursor(query.sort, cursor.at) } : {});
    if (query.after === undefined && query.before === undefined && !page.isFirstPage) {
      // By number: the links of the numbered pages, as before, with cursors besides.
      const pages = Math.ceil(page.total / query.page_size);
      const next = query.page < pages ? link(query.page + 1, page.last && { name: 'after', at: page.last }) : null;
      const back = Math.min(query.page - 1, Math.max(pages, 1));
      const previous = query.page > 1 ? link(back, back > 1 && back === query.page - 1 && page.first ? { name: 'before', at: page.first } : undefined) : null;
      return { next, previous };
    }
    const next = page.moreAfter && page.last ? link(number + 1, { name: 'after', at: page.last }) : null;
    let previous: string | null = null;
    if (page.moreBefore) previous = number - 1 > 1 && page.first ? link(number - 1, { name: 'before', at: page.first }) : link(1);
    else if (page.shown === 0 && number > 1) previous = link(1);
    return { next, previous };
  }
}
