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
 *   media type"; an unknown name lists the valid ones. Retired names work
 *   before v22.0 and are error 100 from v22.0 on.
 * - Lists page with opaque cursors; `paging.next` (a full URL that carries
 *   the access token, like the real one) is absent on the last page while
 *   `cursors.after` is always present.
 * - Account insights: period=day with since/until (unix seconds or dates)
 *   at most 30 days apart, one value per UTC day with `end_time` at the end
 *   of that day; audience_* with period=lifetime; `metric_type=total_value`
 *   answers the totals shape; follower_demographics needs a breakdown.
 *   Their `paging.next` moves the time window forward without end, as the
 *   real one does, so clients must walk windows themselves.
 * - Rate limit: 200 calls an hour per token by default (rate-limit.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { SandboxClock } from '../clock.js';
import {
  DAY_MS,
  METRIC_TITLES,
  RETIRED_FROM_VERSION,
  SANDBOX_AUDIENCE_METRICS,
  SANDBOX_DAILY_METRICS,
  SANDBOX_GRAPH_TOKENS,
  SANDBOX_MEDIA_METRICS,
  SANDBOX_PAGES,
  SANDBOX_RETIRED_METRICS,
  MAIN_ACCOUNT_ID,
  createGraphData,
  graphTimestamp,
  startOfUtcDay,
  type GraphData,
  type SandboxAccount,
  type SandboxChild,
  type SandboxMedia,
} from './data.js';
import { FieldSyntaxError, parseFields, type FieldRequest } from './fields.js';
import { DEFAULT_RATE_LIMIT, RateLimiter, usageHeaders, type RateLimitOptions } from './rate-limit.js';
import { isKnownOrOlder, isVersionSegment, servingVersion, versionNumber } from '../../insights/versions.js';

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
export const GRAPH_SHAPES = { spec: '/graph', facebook: '/facebook', instagram: '/instagram' } as const;
export type GraphShape = keyof typeof GRAPH_SHAPES;

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
  const data =
    options.data ??
    createGraphData({
      now: options.clock.now(),
      ...(options.media === undefined ? {} : { media: options.media }),
      ...(options.preBusinessMedia === undefined ? {} : { preBusinessMedia: options.preBusinessMedia }),
    });
  const limiter = new RateLimiter(options.rateLimit ?? DEFAULT_RATE_LIMIT);
  for (const [shape, prefix] of Object.entries(GRAPH_SHAPES) as [GraphShape, string][]) {
    await app.register(graphRoutes, { ...options, prefix, data, limiter, shape });
  }
}

interface GraphErrorBody {
  message: string;
  type: string;
  code: number;
  error_subcode?: number;
  error_user_title?: string;
  error_user_msg?: string;
  is_transient?: boolean;
}

/** A graph error the sandbox answers with. */
export class GraphFailure extends Error {
  constructor(
    readonly body: GraphErrorBody,
    readonly status = 400,
  ) {
    super(body.message);
  }
}

const oauth = (code: number, message: string, extra: Partial<GraphErrorBody> = {}) =>
  new GraphFailure({ message, type: 'OAuthException', code, ...extra });

const MEDIA_FIELDS = new Set([
  'id',
  'caption',
  'media_type',
  'media_product_type',
  'timestamp',
  'permalink',
  'shortcode',
  'username',
  'media_url',
  'like_count',
  'comments_count',
  'thumbnail_url',
  'is_comment_enabled',
  'ig_id',
]);
/** What an album item answers: no counts, no caption, no insights. */
const CHILD_FIELDS = new Set(['id', 'media_type', 'media_url', 'permalink', 'shortcode', 'timestamp', 'username', 'ig_id', 'thumbnail_url']);
const ACCOUNT_FIELDS = new Set([
  'id',
  'name',
  'username',
  'biography',
  'profile_picture_url',
  'followers_count',
  'follows_count',
  'media_count',
  'ig_id',
  'website',
]);
const DEMOGRAPHIC_BREAKDOWNS = new Set(['country', 'city', 'age', 'gender', 'age,gender']);
const MAX_LIMIT = 100;
const DEFAULT_LIMIT = 25;
const STORY_TTL_MS = DAY_MS;
const MAX_RANGE_S = 30 * 86_400;

interface Caller {
  token: string;
  /** Accounts the token reaches: one for a page token, all for the user token. */
  accounts: readonly string[];
  version: number;
  versionText: string;
}

type Query = Record<string, string | string[] | undefined>;

function param(query: Query, name: string): string | undefined {
  const value = query[name];
  return Array.isArray(value) ? value[0] : value;
}

function nonexistingObject(id: string): GraphFailure {
  return new GraphFailure({
    message: `Unsupported get request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
    type: 'GraphMethodException',
    code: 100,
    error_subcode: 33,
  });
}

function metricList(text: string | undefined): string[] {
  const metrics = (text ?? '').split(',').map((m) => m.trim()).filter(Boolean);
  if (metrics.length === 0) throw oauth(100, '(#100) The parameter metric is required');
  return metrics;
}

function rejectRetired(metrics: readonly string[], caller: Caller): void {
  if (caller.version < RETIRED_FROM_VERSION) return;
  const retired = metrics.filter((m) => SANDBOX_RETIRED_METRICS.has(m));
  if (retired.length > 0) {
    throw oauth(100, `(#100) Starting from version v${RETIRED_FROM_VERSION}.0, these metrics are no longer supported: ${retired.join(', ')}`);
  }
}

function usable(list: readonly string[], caller: Caller): string[] {
  return caller.version < RETIRED_FROM_VERSION ? [...list] : list.filter((m) => !SANDBOX_RETIRED_METRICS.has(m));
}

const ALL_MEDIA_METRICS = new Set(Object.values(SANDBOX_MEDIA_METRICS).flat());

/** The lifetime insights of one media item, or the error the API gives for it. */
function mediaInsights(item: SandboxMedia, metrics: readonly string[], caller: Caller): unknown[] {
  rejectRetired(metrics, caller);
  const supported = SANDBOX_MEDIA_METRICS[item.kind];
  metrics.forEach((metric, index) => {
    if (!ALL_MEDIA_METRICS.has(metric)) {
      throw oauth(100, `(#100) metric[${index}] must be one of the following values: ${usable(supported, caller).join(', ')}`);
    }
    if (!supported.includes(metric)) throw oauth(100, `(#100) The metric ${metric} is not supported for this media type`);
  });
  if (item.preBusiness) {
    throw oauth(100, 'Invalid parameter', {
      error_subcode: 2108006,
      error_user_title: 'Media posted before business account conversion',
      error_user_msg: "The media was posted before the most recent time that the user's account was converted to a business account.",
    });
  }
  return metrics.map((name) => ({
    name,
    period: 'lifetime',
    values: [{ value: item.insights[name] }],
    title: METRIC_TITLES[name] ?? name,
    description: `${METRIC_TITLES[name] ?? name} of this media`,
    id: `${item.id}/insights/${name}/lifetime`,
  }));
}

function insightsFieldMetrics(field: FieldRequest): string[] {
  const metrics = field.modifiers.metric;
  if (!metrics || field.children !== undefined) {
    // `insights{reach}` and a bare `insights` both fail: the metric must be named with .metric(...).
    throw oauth(100, '(#100) The parameter metric is required');
  }
  return metrics.length > 0 ? metrics : metricList('');
}

function renderMedia(item: SandboxMedia, fields: readonly FieldRequest[], caller: Caller): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (field.name === 'insights') {
      out.insights = { data: mediaInsights(item, insightsFieldMetrics(field), caller) };
    } else if (field.name === 'owner') {
      out.owner = { id: item.accountId };
    } else if (field.name === 'children') {
      // Albums only, as the real API: other media leave the field out.
      if (item.children) out.children = { data: item.children.map((child) => renderChild(child, field.children ?? [])) };
    } else if (MEDIA_FIELDS.has(field.name)) {
      const value = item.fields[field.name];
      if (value !== undefined) out[field.name] = value;
    } else {
      throw oauth(100, `(#100) Tried accessing nonexisting field (${field.name}) on node type (IGMedia)`);
    }
  }
  out.id = item.id;
  return out;
}

function renderChild(child: SandboxChild, fields: readonly FieldRequest[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (field.name === 'owner') out.owner = { id: child.accountId };
    else if (CHILD_FIELDS.has(field.name)) {
      const value = child.fields[field.name];
      if (value !== undefined) out[field.name] = value;
    } else throw oauth(100, `(#100) Tried accessing nonexisting field (${field.name}) on node type (IGMedia)`);
  }
  out.id = child.id;
  return out;
}

/** A node of plain values: the asked fields it has, else the nonexisting-field error of its type. */
function renderFields(values: Record<string, unknown>, fields: readonly FieldRequest[], type: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (!(field.name in values)) throw oauth(100, `(#100) Tried accessing nonexisting field (${field.name}) on node type (${type})`);
    out[field.name] = values[field.name];
  }
  out.id = values.id;
  return out;
}

/** A Facebook page (graph.facebook.com shape): its linked Instagram account, when it has one, as `instagram_business_account`. */
function renderPage(pageId: string, fields: readonly FieldRequest[], data: GraphData): Record<string, unknown> {
  const linked = data.accounts.find((account) => account.pageId === pageId);
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (field.name === 'instagram_business_account') {
      if (linked) out.instagram_business_account = renderAccount(linked, field.children ?? [{ name: 'id', modifiers: {}, children: undefined }]);
    } else if (field.name === 'name') out.name = linked?.pageName ?? 'Sandbox Notes Page';
    else if (field.name !== 'id') throw oauth(100, `(#100) Tried accessing nonexisting field (${field.name}) on node type (Page)`);
  }
  out.id = pageId;
  return out;
}

function renderAccount(account: SandboxAccount, fields: readonly FieldRequest[]): Record<string, unknown> {
  const values: Record<string, unknown> = {
    id: account.id,
    name: account.name,
    username: account.username,
    biography: account.biography,
    profile_picture_url: account.profilePictureUrl,
    followers_count: account.followersCount,
    follows_count: account.followsCount,
    media_count: account.media.length,
    ig_id: account.igId,
    website: `https://${account.username.replace('.', '-')}.example`,
  };
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (!ACCOUNT_FIELDS.has(field.name)) {
      throw oauth(100, `(#100) Tried accessing nonexisting field (${field.name}) on node type (IGUser)`);
    }
    out[field.name] = values[field.name];
  }
  out.id = account.id;
  return out;
}

function fieldsOf(query: Query): FieldRequest[] {
  try {
    return parseFields(param(query, 'fields') ?? 'id');
  } catch (error) {
    if (error instanceof FieldSyntaxError) throw oauth(100, `(#100) Syntax error in fields: ${error.message}`);
    throw error;
  }
}

/** Unix seconds, or anything Date.parse reads, to ms. */
function instant(query: Query, name: string): number | undefined {
  const text = param(query, name);
  if (text === undefined || text === '') return undefined;
  const ms = /^\d+$/.test(text) ? Number(text) * 1000 : Date.parse(text);
  if (!Number.isFinite(ms)) throw oauth(100, `(#100) The parameter ${name} is not a valid time: ${text}`);
  return ms;
}

const encodeCursor = (index: number) => Buffer.from(`sandbox-cursor:${index}`).toString('base64url');

function decodeCursor(cursor: string): number {
  const match = /^sandbox-cursor:(\d+)$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match) throw oauth(100, '(#100) The cursor is invalid');
  return Number(match[1]);
}

/** The request's own URL with some query parameters replaced: how paging links are built. */
function linkTo(request: FastifyRequest, changes: Record<string, string | undefined>): string {
  // Empty path segments collapsed: `//x` would read as a host.
  const [path, query = ''] = request.url.split('?') as [string, string?];
  const url = new URL(`${path.replace(/\/{2,}/g, '/')}${query ? `?${query}` : ''}`, `${request.protocol}://${request.headers.host ?? '127.0.0.1'}`);
  for (const [name, value] of Object.entries(changes)) {
    if (value === undefined) url.searchParams.delete(name);
    else url.searchParams.set(name, value);
  }
  return url.href;
}

function page<T>(request: FastifyRequest, items: readonly T[], render: (item: T) => unknown): unknown {
  const query = request.query as Query;
  const limitText = param(query, 'limit');
  let limit = DEFAULT_LIMIT;
  if (limitText !== undefined) {
    limit = Number(limitText);
    if (!Number.isInteger(limit) || limit < 1) throw oauth(100, '(#100) The parameter limit must be a positive integer');
    limit = Math.min(limit, MAX_LIMIT);
  }
  const after = param(query, 'after');
  const before = param(query, 'before');
  let start = 0;
  if (after !== undefined) start = decodeCursor(after) + 1;
  else if (before !== undefined) start = Math.max(0, decodeCursor(before) - limit);
  const end = before !== undefined && after === undefined ? Math.min(decodeCursor(before), start + limit) : start + limit;
  const slice = items.slice(start, end);
  if (slice.length === 0) return { data: [] };
  const data = slice.map(render);
  const last = start + slice.length - 1;
  const paging: Record<string, unknown> = { cursors: { before: encodeCursor(start), after: encodeCursor(last) } };
  if (last < items.length - 1) paging.next = linkTo(request, { after: encodeCursor(last), before: undefined });
  if (start > 0) paging.previous = linkTo(request, { before: encodeCursor(start), after: undefined });
  return { data, paging };
}

function accountInsights(request: FastifyRequest, account: SandboxAccount, data: GraphData, caller: Caller, now: number): unknown {
  const query = request.query as Query;
  const metrics = metricList(param(query, 'metric'));
  rejectRetired(metrics, caller);
  const daily = new Set<string>(SANDBOX_DAILY_METRICS);
  const audience = new Set<string>(SANDBOX_AUDIENCE_METRICS);
  const valid = [...SANDBOX_DAILY_METRICS, ...SANDBOX_AUDIENCE_METRICS, 'follower_demographics'];
  metrics.forEach((metric, index) => {
    if (!valid.includes(metric)) {
      throw oauth(100, `(#100) metric[${index}] must be one of the following values: ${usable(valid, caller).join(', ')}`);
    }
  });
  const period = param(query, 'period');
  if (period === undefined) throw oauth(100, '(#100) The parameter period is required');
  if (period !== 'day' && period !== 'lifetime') throw oauth(100, '(#100) Param period must be one of {day, lifetime}');
  const wrongPeriod = metrics.filter((m) => (period === 'day' ? !daily.has(m) : daily.has(m)));
  if (wrongPeriod.length > 0) {
    throw oauth(100, `(#100) The following metrics (${wrongPeriod.join(', ')}) should be specified with parameter period=${period === 'day' ? 'lifetime' : 'day'}`);
  }
  const totals = param(query, 'metric_type') === 'total_value';
  const title = (name: string) => ({ title: METRIC_TITLES[name] ?? name, description: `${METRIC_TITLES[name] ?? name} of this account` });

  if (period === 'lifetime') {
    const endTime = graphTimestamp(startOfUtcDay(now));
    return {
      data: metrics.map((name) => {
        if (audience.has(name)) {
          return { name, period, values: [{ value: data.audience(account.id, name), end_time: endTime }], ...title(name), id: `${account.id}/insights/${name}/lifetime` };
        }
        // follower_demographics: the totals shape, broken down.
        const breakdown = param(query, 'breakdown');
        if (!totals) throw oauth(100, '(#100) follower_demographics requires metric_type=total_value');
        if (breakdown === undefined || !DEMOGRAPHIC_BREAKDOWNS.has(breakdown)) {
          throw oauth(100, `(#100) The parameter breakdown must be one of ${[...DEMOGRAPHIC_BREAKDOWNS].join(' | ')}`);
        }
        return { name, period, total_value: { breakdowns: [demographics(data, account.id, breakdown)] }, ...title(name), id: `${account.id}/insights/${name}/lifetime` };
      }),
    };
  }

  const until = instant(query, 'until') ?? now;
  const since = instant(query, 'since') ?? until - 2 * DAY_MS;
  if (since >= until) throw oauth(100, '(#100) The parameter since must be before until');
  if ((until - since) / 1000 > MAX_RANGE_S) {
    throw oauth(100, `(#100) There cannot be more than 30 days (${MAX_RANGE_S} s) between since and until`);
  }
  const days: number[] = [];
  for (let day = startOfUtcDay(since); day < until; day += DAY_MS) days.push(day);
  const span = until - since;
  const shifted = (by: number) => linkTo(request, { since: String(Math.floor((since + by) / 1000)), until: String(Math.floor((until + by) / 1000)) });
  return {
    data: metrics.map((name) => {
      const base = { name, period, ...title(name), id: `${account.id}/insights/${name}/day` };
      if (totals) {
        const sum = days.reduce((total, day) => total + data.daily(account.id, name, day), 0);
        // Reach counts unique accounts: a window's total is less than the sum of its days.
        return { ...base, total_value: { value: name === 'reach' ? Math.round(sum * 0.6) : sum } };
      }
      return { ...base, values: days.map((day) => ({ value: data.daily(account.id, name, day), end_time: graphTimestamp(day + DAY_MS) })) };
    }),
    paging: { previous: shifted(-span), next: shifted(span) },
  };
}

function demographics(data: GraphData, accountId: string, breakdown: string): unknown {
  const cells = new Map<string, { dims: string[]; value: number }>();
  const add = (dims: string[], value: number) => {
    const key = dims.join('\u0000');
    const cell = cells.get(key);
    if (cell) cell.value += value;
    else cells.set(key, { dims, value });
  };
  if (breakdown === 'country') for (const [key, value] of Object.entries(data.audience(accountId, 'audience_country'))) add([key], value);
  else if (breakdown === 'city') for (const [key, value] of Object.entries(data.audience(accountId, 'audience_city'))) add([key], value);
  else {
    for (const [key, value] of Object.entries(data.audience(accountId, 'audience_gender_age'))) {
      const [gender, age] = key.split('.') as [string, string];
      add(breakdown === 'age' ? [age] : breakdown === 'gender' ? [gender] : [age, gender], value);
    }
  }
  return {
    dimension_keys: breakdown.split(','),
    results: [...cells.values()].map(({ dims, value }) => ({ dimension_values: dims, value })),
  };
}

function callerOf(request: FastifyRequest, versionText: string | undefined, now: number, data: GraphData): Caller {
  const token = param(request.query as Query, 'access_token');
  if (versionText !== undefined && !isKnownOrOlder(versionText)) throw oauth(2500, `Unknown path components: /${versionText}`);
  // A retired version, or none at all, is served at the oldest usable one, as Meta's Graph API does.
  const served = servingVersion(versionText, now);
  const version = Math.floor(versionNumber(served)!);
  const base = { version, versionText: served };
  if (token === undefined || token === '') {
    throw oauth(2500, 'An active access token must be used to query information about the current user.');
  }
  switch (token) {
    case SANDBOX_GRAPH_TOKENS.page:
    case SANDBOX_GRAPH_TOKENS.noPermission:
    case SANDBOX_GRAPH_TOKENS.personal:
      return { token, accounts: [MAIN_ACCOUNT_ID], ...base };
    case SANDBOX_GRAPH_TOKENS.user:
      return { token, accounts: data.accounts.map((account) => account.id), ...base };
    case SANDBOX_GRAPH_TOKENS.expired: {
      const expired = new Date(now - DAY_MS).toUTCString();
      throw oauth(190, `Error validating access token: Session has expired on ${expired}. The current time is ${new Date(now).toUTCString()}.`, {
        error_subcode: 463,
      });
    }
    default:
      throw oauth(190, 'Invalid OAuth access token - Cannot parse access token');
  }
}

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
    const caller = callerOf(request, asked, now, data);
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
      const rendered = renderAccount(own, fields.filter((f) => !extraFields.includes(f)));
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
      const fields = fieldsOf(query);
      return page(request, pagesReached, (id) => renderPage(id, fields, data));
    }
    if (objectId === 'me') {
      if (edge === undefined) {
        return caller.token === SANDBOX_GRAPH_TOKENS.user ? { id: '100000000000001', name: 'Sandbox User' } : { id: '100000000000002', name: 'Sandbox Studio Page' };
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
      if (edge === 'insights') throw oauth(100, '(#100) Insights are not available for the items of a carousel album; read the album\'s insights');
      throw oauth(100, `(#100) Tried accessing nonexisting field (${edge}) on node type (IGMedia)`);
    }
    throw nonexistingObject(objectId);
  });
}
