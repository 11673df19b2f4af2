/**
 * Meta's own Node SDK (facebook-nodejs-business-sdk, as published, not
 * patched) against the graph sandbox's graph.facebook.com mount: pointed
 * there by its configuration (the static GRAPH getter it reads its base URL
 * from; its own version, v24.0), with its crash reporter off. With Facebook
 * Login's user token: the account found through the user's pages, the IG
 * User with the SDK's own field names, every media item page by page to the
 * end, a media item's insights, and account insights over since..until as
 * totals (metric_type=total_value) and by day.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import bizSdk from 'facebook-nodejs-business-sdk';
import { DAY_MS, MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS, SANDBOX_PAGES, SECOND_ACCOUNT_ID, startOfUtcDay } from '../../../src/sandbox/graph/data.js';
import { NOW, startGraphSandbox, type GraphSandbox } from '../../insights/graph-sandbox.js';

const { FacebookAdsApi, IGMedia, IGUser, InstagramInsightsResult, Page, User } = bizSdk;

let graph: GraphSandbox;
let restore: () => void;

beforeAll(async () => {
  graph = await startGraphSandbox({ media: 60 });
  // The SDK's base URL is a static getter (`FacebookAdsApi.GRAPH`): configured, not patched, the way a test of an
  // app built on the SDK would. Put back afterwards: test files share a module graph.
  const original = Object.getOwnPropertyDescriptor(FacebookAdsApi, 'GRAPH')!;
  Object.defineProperty(FacebookAdsApi, 'GRAPH', { get: () => graph.url.replace(/\/graph$/, '/facebook'), configurable: true });
  restore = () => Object.defineProperty(FacebookAdsApi, 'GRAPH', original);
  // axios (under the SDK) honours proxy variables: none for the sandbox on 127.0.0.1.
  vi.stubEnv('NO_PROXY', '127.0.0.1,localhost');
  // The third argument turns the crash reporter off (it would hook uncaughtException and post reports to Meta).
  FacebookAdsApi.init(SANDBOX_GRAPH_TOKENS.user, 'en_US', false);
});
afterAll(async () => {
  restore();
  await graph.close();
});

describe('facebook-nodejs-business-sdk against the sandbox (graph.facebook.com shape)', () => {
  it('calls the sandbox at its own version', () => {
    expect(FacebookAdsApi.VERSION).toBe('v24.0');
    expect(FacebookAdsApi.GRAPH).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/facebook$/);
  });

  it("finds the Instagram accounts through the user's pages, and a page's linked account", async () => {
    const pages = await new User('me').getAccounts([Page.Fields.id!, Page.Fields.name!, `${Page.Fields.instagram_business_account}{id,username,name}`]);
    expect(pages.hasNext()).toBe(false);
    expect(pages.map((page) => [page.id, (page.instagram_business_account as { id: string } | undefined)?.id])).toEqual([
      [SANDBOX_PAGES.main, MAIN_ACCOUNT_ID],
      [SANDBOX_PAGES.second, SECOND_ACCOUNT_ID],
      [SANDBOX_PAGES.unlinked, undefined],
    ]);
    const page = await new Page(SANDBOX_PAGES.main).get([Page.Fields.instagram_business_account!]);
    expect(page.instagram_business_account).toEqual({ id: MAIN_ACCOUNT_ID });
  });

  it("reads the IG User with the SDK's own field names", async () => {
    const fields = ['biography', 'followers_count', 'follows_count', 'id', 'ig_id', 'media_count', 'name', 'profile_picture_url', 'username', 'website'].map(
      (f) => IGUser.Fields[f]!,
    );
    const user = await new IGUser(MAIN_ACCOUNT_ID).get(fields);
    const account = graph.data.account(MAIN_ACCOUNT_ID)!;
    expect(user.exportAllData()).toEqual({
      id: MAIN_ACCOUNT_ID,
      biography: account.biography,
      followers_count: account.followersCount,
      follows_count: account.followsCount,
      ig_id: account.igId,
      media_count: 60,
      name: account.name,
      profile_picture_url: account.profilePictureUrl,
      username: account.username,
      website: expect.stringMatching(/^https:\/\//),
    });
  });

  it("reads every media item, page by page to the end, with the SDK's field names", async () => {
    const fields = [
      'id',
      'caption',
      'comments_count',
      'ig_id',
      'is_comment_enabled',
      'like_count',
      'media_product_type',
      'media_type',
      'media_url',
      'owner',
      'permalink',
      'shortcode',
      'thumbnail_url',
      'timestamp',
      'username',
    ].map((f) => IGMedia.Fields[f]!);
    let cursor = await new IGUser(MAIN_ACCOUNT_ID).getMedia(fields, { limit: 25 });
    const seen = [...cursor];
    let pages = 1;
    while (cursor.hasNext()) {
      cursor = await cursor.next();
      seen.push(...cursor);
      pages++;
    }
    const media = graph.data.account(MAIN_ACCOUNT_ID)!.media;
    expect(pages).toBe(3);
    expect(seen.map((item) => item.id)).toEqual(media.map((item) => item.id));
    const first = seen[0]!.exportAllData();
    expect(first).toMatchObject({ owner: { id: MAIN_ACCOUNT_ID }, shortcode: media[0]!.fields.shortcode, timestamp: media[0]!.fields.timestamp });
    const video = seen.find((item) => item.media_type === 'VIDEO')!;
    expect(video.thumbnail_url).toEqual(expect.stringMatching(/_thumb\.jpg$/));
  });

  it("reads a media item's insights", async () => {
    const item = graph.data.account(MAIN_ACCOUNT_ID)!.media.find((m) => m.kind === 'IMAGE')!;
    const { reach, saved, views, total_interactions } = InstagramInsightsResult.Metric;
    const insights = await new IGMedia(item.id).getInsights([], { metric: [reach, saved, views, total_interactions].join(',') });
    expect(insights.map((i) => [i.name, (i.values as { value: number }[])[0]!.value])).toEqual([
      ['reach', item.insights.reach],
      ['saved', item.insights.saved],
      ['views', item.insights.views],
      ['total_interactions', item.insights.total_interactions],
    ]);
    // What v24.0 no longer serves, in Meta's words.
    await expect(new IGMedia(item.id).getInsights([], { metric: InstagramInsightsResult.Metric.impressions })).rejects.toMatchObject({
      message: '(#100) Starting from version v22.0 and above, the impressions metric is no longer supported for the queried media',
    });
  });

  it('reads account insights over since..until, as totals (metric_type=total_value) and by day', async () => {
    const until = startOfUtcDay(NOW);
    const since = until - 14 * DAY_MS;
    const range = { since: Math.floor(since / 1000), until: Math.floor(until / 1000) };
    const sum = (metric: string) =>
      Array.from({ length: 14 }, (_, i) => graph.data.daily(MAIN_ACCOUNT_ID, metric, since + i * DAY_MS)).reduce((a, b) => a + b, 0);
    const totals = await new IGUser(MAIN_ACCOUNT_ID).getInsights([], {
      metric: 'views,accounts_engaged,total_interactions,profile_views',
      period: InstagramInsightsResult.Period.day,
      metric_type: InstagramInsightsResult.MetricType.total_value,
      ...range,
    });
    expect(totals.map((t) => [t.name, (t.total_value as { value: number }).value])).toEqual([
      ['views', sum('views')],
      ['accounts_engaged', sum('accounts_engaged')],
      ['total_interactions', sum('total_interactions')],
      ['profile_views', sum('profile_views')],
    ]);
    const daily = await new IGUser(MAIN_ACCOUNT_ID).getInsights([], { metric: 'reach,follower_count', period: InstagramInsightsResult.Period.day, ...range });
    const reach = daily[0]!.values as { value: number; end_time: string }[];
    expect(reach).toHaveLength(14);
    expect(reach[0]!.value).toBe(graph.data.daily(MAIN_ACCOUNT_ID, 'reach', since));
    await expect(new IGUser(MAIN_ACCOUNT_ID).getInsights([], { metric: 'views', period: 'day', ...range })).rejects.toMatchObject({
      message: '(#100) The following metrics (views) should be specified with parameter metric_type=total_value',
    });
  });
});
