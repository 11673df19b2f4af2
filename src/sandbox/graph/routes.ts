/**
 * The graph API emulator (spec 001), registered by buildSandbox under
 * /graph, so that `graph-url` is `http://127.0.0.1:PORT/graph`:
 *
 *   GET /graph/{version}/me/social_business_accounts
 *   GET /graph/{version}/{account_id}                 fields: id, name, username, followers_count, media_count
 *   GET /graph/{version}/{account_id}/media           fields, limit (<= 100), after, before, since, until
 *   GET /graph/{version}/{account_id}/stories         stories younger than 24 hours
 *   GET /graph/{version}/{account_id}/insights        metric, period, since, until (<= 30 days), metric_type, breakdown
 *   GET /graph/{version}/{media_id}                   fields, including insights.metric(...)
 *   GET /graph/{version}/{media_id}/insights          metric
 *
 * `{version}` may be left out (`/graph/{object}`), and empty segments are
 * tolerated (`/graph///{object}`, as instagram-graph-api sends without a
 * version). A retired version, or none, is served at the oldest version
 * still usable at the sandbox clock, as Meta's Graph API does (the
 * `facebook-api-version` header names it; insights/versions.ts has the
 * schedule); a version Meta has not released is error 2500.
 *
 * Decisions where the spec is silent, after the field notes and the real API:
 *
 * - Every request counts in `stats.graphCalls`, failed and throttled ones too.
 * - Errors are `{ error: { message, type, code, error_subcode?, fbtrace_id } }`
 *   with HTTP 400 for every graph error, throttling (17) included, as the
 *   real API answers most of them; clients must read `error.code`, not the
 *   status. The tokens and what they answer are listed at
 *   SANDBOX_GRAPH_TOKENS in data.ts.
 * - Field expansion `insights.metric(a,b)` works on media nodes and on each
 *   item of a media list; one item that cannot answer fails the whole
 *   request, as the real API does. `insights` without `.metric(...)` is error 100.
 * - Metric support is per kind (IMAGE, VIDEO, CAROUSEL_ALBUM, REELS, STORY):
 *   an unsupported one is error 100 "The metric X is not supported for this
 *   media type"; an unknown name lists the valid ones. A retired name is
 *   refused from the version Meta retired it at on Meta's mounts, and from
 *   v22.0 on at the spec's (metric-schedule.ts).
 * - Lists page with opaque cursors; `paging.next` (a full URL that carries
 *   the access token, like the real one) is absent on the last page while
 *   `cursors.after` is always present.
 * - Account insights (account-insights.ts): the metrics Meta serves today
 *   (reach, views, accounts_engaged, total_interactions, follower_count,
 *   profile_views, likes, ...) and the spec's; daily values (period day,
 *   week or days_28 where Meta has them) or totals over since..until with
 *   `metric_type=total_value` (the only way for most of the new ones), at
 *   most 30 days apart; distributions with period=lifetime. Their
 *   `paging.next` moves the time window forward without end, as the real
 *   one does, so clients must walk windows themselves.
 * - Rate limit: 200 calls an hour per token by default (rate-limit.ts).
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { SandboxClock } from '../clock.js';
import { DAY_MS, SANDBOX_GRAPH_TOKENS, SANDBOX_PAGES, createGraphData, type GraphData } from './data.js';
import { DEFAULT_RATE_LIMIT, RateLimiter, usageHeaders, type RateLimitOptions } from './rate-limit.js';
import { isVersionSegment } from '../../insights/versions.js';
import { mediaInsights, metricList } from './insights.js';
import { accountInsights } from './account-insights.js';
import type { GraphMount } from './metric-schedule.js';
import { renderAccount, renderChild, renderFields, renderMedia, renderPage } from './nodes.js';
import { GraphFailure, callerOf, fieldsOf, instant, nonexistingObject, oauth, page, param, type Query } from './request.js';

export interface GraphRouteOptions {
  stats: { graphCalls: number };
  clock: SandboxClock;
  /** Media items of the first business account (default 250). */
  media?: number;
  /** Calls per token per window (default 200 an hour). */
  rateLimit?: RateLimitOptions;
  /** How many of the oldest media predate the business conversion (default 0): their insights fail with 100/2108006. */
  preBusinessMedia?: number;
  /** Use this data instead of building it from the clock and `media`. */
  data?: GraphData;
  /** How the account is found: the spec's edge, graph.facebook.com's pages, or graph.instagram.com's `me` (default spec). */
  shape?: GraphShape;
  /** Shared by the mounts of one sandbox, so that one token has one budget. */
  limiter?: RateLimiter;
}

/** The three ways of finding the business account, each mounted at its own path by graphShapes. */
const GRAPH_SHAPES: Readonly<Record<GraphMount, string>> = { spec: '/graph', facebook: '/facebook', instagram: '/instagram' };
type GraphShape = GraphMount;

/**
 * The graph API in its three shapes, sharing data, rate limit and counter:
 * `/graph` the spec's (`/me/social_business_accounts`), `/facebook` as
 * graph.facebook.com with Facebook Login (`/me/accounts` of the user's
 * pages, `/{page-id}?fields=instagram_business_account`; a page token's
 * `/me` is its page), `/instagram` as graph.instagram.com with Instagram
 * Login (`/me` is the token's professional account). A library needs only
 * its base URL pointed at one of them.
 */
export async function graphShapes(app: FastifyInstance, options: GraphRouteOptions): Promise<void> {
  // Anchored now, built at the first request that reads it: serve starts this sandbox, and most runs never call it.
  const now = options.clock.now();
  const data =
    options.data ??
    builtOnFirstUse(() =>
      createGraphData({
        now,
        ...(options.media === undefined ? {} : { media: options.media }),
        ...(options.preBusinessMedia === undefined ? {} : { preBusinessMedia: options.preBusinessMedia }),
      }),
    );
  const limiter = new RateLimiter(options.rateLimit ?? DEFAULT_RATE_LIMIT);
  for (const [shape, prefix] of Object.entries(GRAPH_SHAPES) as [GraphShape, string][]) {
    await app.register(graphRoutes, { ...options, prefix, data, limiter, shape });
  }
}

/** The data `build` makes, made when first read: the same accounts, media and values, later. */
function builtOnFirstUse(build: () => GraphData): GraphData {
  let made: GraphData | undefined;
  const data = () => (made ??= build());
  return {
    get anchorMs() {
      return data().anchorMs;
    },
    get accounts() {
      return data().accounts;
    },
    account: (id) => data().account(id),
    media: (id) => data().media(id),
    child: (id) => data().child(id),
    daily: (accountId, metric, dayStartMs) => data().daily(accountId, metric, dayStartMs),
    audience: (accountId, metric) => data().audience(accountId, metric),
  };
}

const STORY_TTL_MS = DAY_MS;
/** What `/me/accounts` answers for each page when no `fields` are asked, as graph.facebook.com does. */
const PAGE_LIST_DEFAULT_FIELDS = 'access_token,category,category_list,name,id,tasks';

export async function graphRoutes(app: FastifyInstance, options: GraphRouteOptions): Promise<void> {
  const { clock, stats } = options;
  const data =
    options.data ??
    createGraphData({
      now: clock.now(),
      ...(options.media === undefined ? {} : { media: options.media }),
      ...(options.preBusinessMedia === undefined ? {} : { preBusinessMedia: options.preBusinessMedia }),
    });
  const limiter = options.limiter ?? new RateLimiter(options.rateLimit ?? DEFAULT_RATE_LIMIT);
  const shape = options.shape ?? 'spec';
  let traces = 0;

  const fail = (reply: FastifyReply, failure: GraphFailure) => {
    traces++;
    void reply
      .status(failure.status)
      .type('application/json; charset=UTF-8')
      .send({ error: { ...failure.body, fbtrace_id: `Sbx${traces.toString(36).padStart(8, '0')}` } });
  };

  app.addHook('onRequest', async () => {
    stats.graphCalls++;
  });

  app.setErrorHandler((error: Error & { statusCode?: number }, _request, reply) => {
    if (error instanceof GraphFailure) fail(reply, error);
    else if (error.statusCode && error.statusCode < 500) fail(reply, oauth(100, `(#100) ${error.message}`));
    else fail(reply, new GraphFailure({ message: 'An unknown error has occurred.', type: 'OAuthException', code: 1, is_transient: true }, 500));
  });

  app.setNotFoundHandler((request, reply) => {
    fail(reply, oauth(2500, `Unknown path components: ${request.url.split('?')[0]}`));
  });

  // `/{version}/{object}` and `/{object}` alike; empty segments (`///{id}`, as instagram-graph-api sends without a version) are tolerated.
  app.get('/*', async (request, reply) => {
    const rest = (request.params as { '*': string })['*'];
    const now = clock.now();
    const all = rest.split('/').filter(Boolean);
    const asked = all[0] !== undefined && isVersionSegment(all[0]) ? all[0] : undefined;
    const segments = asked === undefined ? all : all.slice(1);
    const caller = callerOf(request, asked, now, data, shape);
    void reply.header('facebook-api-version', caller.versionText);
    // graph.instagram.com: `me` is the token's own professional account, and reads as its ID.
    if (shape === 'instagram' && segments[0] === 'me' && segments.length > 1) segments[0] = caller.accounts[0]!;
    const [objectId, edge, ...extra] = segments;

    // Which business account the call is about, for the usage header.
    const item = objectId === undefined ? undefined : data.media(objectId);
    const business = objectId === 'me' ? caller.accounts[0] : (data.account(objectId ?? '')?.id ?? item?.accountId);
    const usage = limiter.take(caller.token, now);
    void reply.headers(usageHeaders(usage, business));
    if (!usage.allowed) {
      throw oauth(17, '(#17) User request limit reached', { error_subcode: 2207051, is_transient: true });
    }
    if (caller.token === SANDBOX_GRAPH_TOKENS.noPermission) {
      throw oauth(200, '(#200) Requires pages_read_engagement permission to access this object');
    }
    if (caller.token === SANDBOX_GRAPH_TOKENS.personal) {
      throw oauth(10, '(#10) The user must have a business or creator account to use insights');
    }
    if (objectId === undefined || extra.length > 0) throw oauth(2500, `Unknown path components: /${rest}`);

    const query = request.query as Query;
    const reaches = (accountId: string) => caller.accounts.includes(accountId);

    const isUser = caller.token === SANDBOX_GRAPH_TOKENS.user;
    const pagesReached = isUser ? [SANDBOX_PAGES.main, SANDBOX_PAGES.second, SANDBOX_PAGES.unlinked] : [SANDBOX_PAGES.main];
    if (shape === 'instagram' && objectId === 'me') {
      const own = data.account(caller.accounts[0]!)!;
      const fields = fieldsOf(query);
      const extraFields = fields.filter((f) => f.name === 'user_id' || f.name === 'account_type');
      const rendered = renderAccount(
        own,
        fields.filter((f) => !extraFields.includes(f)),
      );
      for (const field of extraFields) rendered[field.name] = field.name === 'user_id' ? own.id : 'BUSINESS';
      return rendered;
    }
    if (shape === 'facebook' && (objectId === 'me' || pagesReached.includes(objectId as never))) {
      const pageId = objectId === 'me' ? (isUser ? undefined : SANDBOX_PAGES.main) : objectId;
      if (pageId !== undefined) {
        if (edge !== undefined) throw oauth(100, `(#100) Tried accessing nonexisting field (${edge}) on node type (Page)`);
        return renderPage(pageId, fieldsOf(query), data);
      }
      if (edge === undefined) return renderFields({ id: SANDBOX_PAGES.user, name: 'Sandbox User' }, fieldsOf(query), 'User');
      if (edge !== 'accounts') throw oauth(100, `(#100) Tried accessing nonexisting field (${edge}) on node type (User)`);
      // Without `fields`, the pages come with the fields Meta gives by default on this edge.
      const fields = fieldsOf(param(query, 'fields') === undefined ? { fields: PAGE_LIST_DEFAULT_FIELDS } : query);
      return page(request, pagesReached, (id) => renderPage(id, fields, data));
    }
    if (objectId === 'me') {
      if (edge === undefined) {
        return caller.token === SANDBOX_GRAPH_TOKENS.user
          ? { id: '100000000000001', name: 'Sandbox User' }
          : { id: '100000000000002', name: 'Sandbox Studio Page' };
      }
      if (edge !== 'social_business_accounts') throw oauth(100, `(#100) Tried accessing nonexisting field (${edge}) on node type (User)`);
      const visible = data.accounts.filter((account) => reaches(account.id));
      return page(request, visible, (account) => ({ id: account.id, name: account.name }));
    }

    const account = data.account(objectId);
    if (account && reaches(account.id)) {
      if (edge === undefined) return renderAccount(account, fieldsOf(query));
      if (edge === 'media' || edge === 'stories') {
        const fields = fieldsOf(query);
        const since = instant(query, 'since');
        const until = instant(query, 'until');
        const list = (edge === 'media' ? account.media : account.stories.filter((story) => now - story.createdMs < STORY_TTL_MS)).filter(
          (media) => (since === undefined || media.createdMs >= since) && (until === undefined || media.createdMs <= until),
        );
        return page(request, list, (media) => renderMedia(media, fields, caller));
      }
      if (edge === 'insights') return accountInsights(request, account, data, caller, now);
      throw oauth(100, `(#100) Tried accessing nonexisting field (${edge}) on node type (IGUser)`);
    }

    const alive = item && (item.kind !== 'STORY' || now - item.createdMs < STORY_TTL_MS);
    if (item && alive && reaches(item.accountId)) {
      if (edge === undefined) return renderMedia(item, fieldsOf(query), caller);
      if (edge === 'insights') return { data: mediaInsights(item, metricList(param(query, 'metric')), caller) };
      if (edge === 'children') return { data: (item.children ?? []).map((child) => renderChild(child, fieldsOf(query))) };
      throw oauth(100, `(#100) Tried accessing nonexisting field (${edge}) on node type (IGMedia)`);
    }
    const child = data.child(objectId);
    if (child && reaches(child.accountId)) {
      if (edge === undefined) return renderChild(child, fieldsOf(query));
      if (edge === 'insights') throw oauth(100, "(#100) Insights are not available for the items of a carousel album; read the album's insights");
      throw oauth(100, `(#100) Tried accessing nonexisting field (${edge}) on node type (IGMedia)`);
    }
    throw nonexistingObject(objectId);
  });
}
