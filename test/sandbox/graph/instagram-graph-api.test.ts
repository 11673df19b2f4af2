/**
 * The instagram-graph-api package (as published, not patched) against the
 * graph sandbox, pointed there by its API URL constant (`Constants.API_URL`),
 * with no version set, as its README has it: its calls go out unversioned
 * (`{API_URL}//{id}`), served at the oldest usable version as Meta serves
 * them. Its own default field sets throughout: the user's pages and the
 * linked account (graph.facebook.com), the account's info, every media item
 * page by page to the end, one item's info and insights, and account
 * insights over since..until by day and as totals (metric_type=total_value,
 * which its requests do not offer, set by a subclass as an app would).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Client,
  Constants,
  GetAuthorizedFacebookPagesRequest,
  GetLinkedInstagramAccountRequest,
  GetPageDayInsightsRequest,
  GetPageInfoRequest,
  PageOption,
  type DayMetric,
  type GetPageMediaResponse,
  type SimplePostMetric,
} from 'instagram-graph-api';
import { DAY_MS, MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS, SANDBOX_PAGES, startOfUtcDay } from '../../../src/sandbox/graph/data.js';
import { NOW, startGraphSandbox, type GraphSandbox } from '../../insights/graph-sandbox.js';

let graph: GraphSandbox;
const apiUrl = Constants.API_URL;
/** Where the package sends its calls: its one constant (readonly in its types, a plain static property). */
const pointAt = (url: string) => ((Constants as unknown as { API_URL: string }).API_URL = url);

beforeAll(async () => {
  graph = await startGraphSandbox({ media: 60 });
  pointAt(graph.url.replace(/\/graph$/, '/facebook'));
});
afterAll(async () => {
  // Test files share a module graph: the package's constant goes back as it was.
  pointAt(apiUrl);
  await graph.close();
});

/** Day insights as totals over the range: the package's request, with the parameter Meta wants for these metrics. */
class TotalValueInsightsRequest extends GetPageDayInsightsRequest {
  constructor(accessToken: string, pageId: string, ...metrics: DayMetric[]) {
    super(accessToken, pageId, ...metrics);
    // Params has no metric_type; the package sends every param it holds.
    (this.params as typeof this.params & { metric_type?: string }).metric_type = 'total_value';
  }
}

describe('instagram-graph-api against the sandbox', () => {
  it("finds the account through the user's pages (graph.facebook.com), with the pages' default fields", async () => {
    const pages = (await new GetAuthorizedFacebookPagesRequest(SANDBOX_GRAPH_TOKENS.user).execute()).getAuthorizedFacebookPages();
    expect(pages.map((page) => page.id)).toEqual([SANDBOX_PAGES.main, SANDBOX_PAGES.second, SANDBOX_PAGES.unlinked]);
    expect(pages[0]).toMatchObject({ name: 'Sandbox Studio Page', access_token: SANDBOX_GRAPH_TOKENS.page });
    const linked = await new GetLinkedInstagramAccountRequest(SANDBOX_GRAPH_TOKENS.user, pages[0]!.id).execute();
    expect(linked.getInstagramPageId()).toBe(MAIN_ACCOUNT_ID);
  });

  it('reads the account with its default fields, at graph.facebook.com and at graph.instagram.com (`me`)', async () => {
    const account = graph.data.account(MAIN_ACCOUNT_ID)!;
    const info = await new Client(SANDBOX_GRAPH_TOKENS.page, MAIN_ACCOUNT_ID).newGetPageInfoRequest().execute();
    expect(info.getData()).toEqual({
      id: MAIN_ACCOUNT_ID,
      biography: account.biography,
      ig_id: account.igId,
      followers_count: account.followersCount,
      follows_count: account.followsCount,
      media_count: 60,
      name: account.name,
      profile_picture_url: account.profilePictureUrl,
      username: account.username,
    });
    pointAt(graph.url.replace(/\/graph$/, '/instagram'));
    try {
      expect((await new GetPageInfoRequest(SANDBOX_GRAPH_TOKENS.page, 'me').execute()).getData()).toEqual(info.getData());
    } finally {
      pointAt(graph.url.replace(/\/graph$/, '/facebook'));
    }
  });

  it('reads every media item with its default fields, page by page to the end', async () => {
    const client = new Client(SANDBOX_GRAPH_TOKENS.page, MAIN_ACCOUNT_ID);
    const pages: GetPageMediaResponse[] = [await client.newGetPageMediaRequest().execute()];
    while (pages.at(-1)!.getPaging().getNext()) {
      const after = pages.at(-1)!.getPaging().getAfter()!;
      pages.push(await client.newGetPageMediaRequest().withPaging({ option: PageOption.AFTER, value: after }).execute());
    }
    const media = graph.data.account(MAIN_ACCOUNT_ID)!.media;
    expect(pages).toHaveLength(3);
    expect(pages.flatMap((page) => page.getIds())).toEqual(media.map((item) => item.id));
    const first = pages[0]!;
    expect(first.getMediaOwnerIds().every((id) => id === MAIN_ACCOUNT_ID)).toBe(true);
    expect(first.getShortcodes()[0]).toBe(media[0]!.fields.shortcode);
    const album = media.find((item) => item.kind === 'CAROUSEL_ALBUM')!;
    expect(first.getChildrenMap().get(album.id)).toEqual({ data: album.children!.map((child) => ({ id: child.id })) });
  });

  it('reads one media item with its default fields, and its insights', async () => {
    const client = new Client(SANDBOX_GRAPH_TOKENS.page, MAIN_ACCOUNT_ID);
    const item = graph.data.account(MAIN_ACCOUNT_ID)!.media.find((m) => m.kind === 'IMAGE')!;
    const info = await client.newGetMediaInfoRequest(item.id).execute();
    expect(info.getId()).toBe(item.id);
    expect(info.getCaption()).toBe(item.fields.caption);
    expect(info.getOwnerId()).toBe(MAIN_ACCOUNT_ID);
    expect(info.getTimestamp()).toEqual(new Date(String(item.fields.timestamp).replace('+0000', 'Z')));
    // The package's default post metrics (engagement, impressions) are retired at the version that serves an
    // unversioned call today: these are what Meta answers now.
    const metrics = ['reach', 'saved', 'views', 'total_interactions'] as SimplePostMetric[];
    const insights = await client.newGetSimplePostMediaInsightsRequest(item.id, ...metrics).execute();
    expect(insights.getMetrics().map((metric) => [metric.getMetricName(), metric.getMetricValues()[0]!.value])).toEqual(
      metrics.map((metric) => [metric, item.insights[metric]]),
    );
  });

  it('reads account insights over since..until, by day and as totals', async () => {
    const until = startOfUtcDay(NOW);
    const since = until - 14 * DAY_MS;
    const daily = await new Client(SANDBOX_GRAPH_TOKENS.page, MAIN_ACCOUNT_ID)
      .newGetPageDayInsightsRequest('reach' as DayMetric, 'follower_count' as DayMetric)
      .withRange(new Date(since), new Date(until))
      .execute();
    const reach = daily.getMetricByName('reach')!;
    expect(reach.getMetricValues()).toHaveLength(14);
    expect(reach.getMetricValues()[0]!.value).toBe(graph.data.daily(MAIN_ACCOUNT_ID, 'reach', since));

    const metrics = ['views', 'accounts_engaged', 'total_interactions', 'profile_views'];
    const totals = await new TotalValueInsightsRequest(SANDBOX_GRAPH_TOKENS.page, MAIN_ACCOUNT_ID, ...(metrics as DayMetric[]))
      .withRange(new Date(since), new Date(until))
      .execute();
    const sum = (metric: string) =>
      Array.from({ length: 14 }, (_, i) => graph.data.daily(MAIN_ACCOUNT_ID, metric, since + i * DAY_MS)).reduce((a, b) => a + b, 0);
    expect(
      totals.getMetrics().map((metric) => [metric.getMetricName(), (metric.getMetricData() as { total_value?: { value: number } }).total_value?.value]),
    ).toEqual(metrics.map((metric) => [metric, sum(metric)]));
  });
});
