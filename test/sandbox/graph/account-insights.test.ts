/**
 * The graph sandbox's insights as Meta serves them today (issue 40, item 9):
 * the account metrics of now (views, accounts_engaged, total_interactions,
 * ...) as totals with metric_type=total_value, the periods day, week,
 * days_28 and lifetime, breakdowns of a total, and retired metrics refused
 * version by version with Meta's words, on Meta's mounts from the version
 * Meta retired them at and on the spec's from v22.0.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { buildSandbox, type Sandbox } from '../../../src/sandbox/server.js';
import { SandboxClock } from '../../../src/sandbox/clock.js';
import { DAY_MS, MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS, createGraphData, startOfUtcDay } from '../../../src/sandbox/graph/data.js';

const NOW = Date.parse('2026-11-21T12:00:00Z');
/** A day when v17.0 to v25.0 were all still usable (v17.0 retired on 2025-09-12): each version serves itself. */
const EARLIER = Date.parse('2025-06-01T12:00:00Z');

let sandbox: Sandbox | undefined;
afterEach(async () => {
  await sandbox?.app.close();
  sandbox = undefined;
});

async function get(path: string, query: Record<string, string>, options: { mount?: string; version?: string; now?: number } = {}) {
  const now = options.now ?? NOW;
  sandbox ??= await buildSandbox({ key: randomBytes(32), aad: randomBytes(8), clock: new SandboxClock(() => now), graph: { media: 20 } });
  const params = new URLSearchParams({ access_token: SANDBOX_GRAPH_TOKENS.page, ...query });
  const response = await sandbox.app.inject({ method: 'GET', url: `/${options.mount ?? 'facebook'}/${options.version ?? 'v25.0'}${path}?${params}` });
  return { version: response.headers['facebook-api-version'], body: response.json() as Record<string, any> };
}

const insights = (query: Record<string, string>, options?: Parameters<typeof get>[2]) => get(`/${MAIN_ACCOUNT_ID}/insights`, query, options);
const errorOf = async (query: Record<string, string>, options?: Parameters<typeof get>[2]) =>
  ((await insights(query, options)).body.error ?? {}) as { code?: number; message?: string };

const data = createGraphData({ now: NOW, media: 20 });
const until = startOfUtcDay(NOW);
const since = until - 7 * DAY_MS;
const range = { since: String(since / 1000), until: String(until / 1000) };
const sum = (metric: string, from: number, days: number) =>
  Array.from({ length: days }, (_, i) => data.daily(MAIN_ACCOUNT_ID, metric, from + i * DAY_MS)).reduce((a, b) => a + b, 0);

describe('account insights as Meta serves them today', () => {
  it('answers views, accounts_engaged and total_interactions as totals with metric_type=total_value, and only so', async () => {
    const { body } = await insights({ metric: 'views,accounts_engaged,total_interactions,reach', period: 'day', metric_type: 'total_value', ...range });
    expect(body.data.map((d: { name: string; total_value: { value: number } }) => [d.name, d.total_value.value])).toEqual([
      ['views', sum('views', since, 7)],
      ['accounts_engaged', sum('accounts_engaged', since, 7)],
      ['total_interactions', sum('total_interactions', since, 7)],
      // Unique accounts: a week's reach is less than the sum of its days.
      ['reach', Math.round(sum('reach', since, 7) * 0.6)],
    ]);
    expect(body.data[0]).toMatchObject({ period: 'day', title: 'Views' });
    expect(await errorOf({ metric: 'reach,views,accounts_engaged', period: 'day', ...range })).toEqual(
      expect.objectContaining({
        code: 100,
        message: '(#100) The following metrics (views,accounts_engaged) should be specified with parameter metric_type=total_value',
      }),
    );
    for (const metric of [
      'likes',
      'comments',
      'shares',
      'saves',
      'replies',
      'follows_and_unfollows',
      'profile_links_taps',
      'website_clicks',
      'profile_views',
    ]) {
      const { body: total } = await insights({ metric, period: 'day', metric_type: 'total_value', ...range });
      expect(total.data[0].total_value.value, metric).toBe(sum(metric, since, 7));
    }
  });

  it('splits a total by a breakdown Meta documents for it, and refuses one it does not', async () => {
    const { body } = await insights({ metric: 'views', period: 'day', metric_type: 'total_value', breakdown: 'media_product_type', ...range });
    const total = body.data[0].total_value;
    expect(total.breakdowns[0].dimension_keys).toEqual(['media_product_type']);
    expect(total.breakdowns[0].results.map((r: { dimension_values: string[] }) => r.dimension_values[0])).toEqual(['FEED', 'REELS', 'STORY']);
    expect(total.breakdowns[0].results.reduce((a: number, r: { value: number }) => a + r.value, 0)).toBe(total.value);
    expect((await errorOf({ metric: 'accounts_engaged', period: 'day', metric_type: 'total_value', breakdown: 'media_product_type', ...range })).message).toBe(
      '(#100) The following metrics (accounts_engaged) do not support the breakdown media_product_type',
    );
  });

  it('answers reach and impressions by day, week and days_28, each value covering the days that end with it', async () => {
    for (const [period, days] of [
      ['day', 1],
      ['week', 7],
      ['days_28', 28],
    ] as const) {
      const { body } = await insights({ metric: 'reach,impressions', period, ...range }, { version: 'v21.0' });
      const [reach, impressions] = body.data;
      expect(reach.period).toBe(period);
      expect(reach.values).toHaveLength(7);
      const first = since - (days - 1) * DAY_MS;
      expect(impressions.values[0]).toEqual({ value: sum('impressions', first, days), end_time: expect.stringMatching(/T00:00:00\+0000$/) });
      expect(reach.values[0].value).toBe(days === 1 ? sum('reach', since, 1) : Math.round(sum('reach', first, days) * 0.6));
    }
    expect((await errorOf({ metric: 'reach,follower_count', period: 'week', ...range })).message).toBe(
      '(#100) The following metrics (follower_count) should be specified with parameter period=day',
    );
    expect((await errorOf({ metric: 'reach', period: 'month', ...range })).message).toBe('(#100) Param period must be one of {day, week, days_28, lifetime}');
  });

  it('answers online followers and the demographics of followers, engaged and reached audiences for the lifetime', async () => {
    const { body } = await insights({ metric: 'online_followers', period: 'lifetime' });
    expect(Object.keys(body.data[0].values[0].value)).toHaveLength(24);
    const engaged = await insights({
      metric: 'engaged_audience_demographics',
      period: 'lifetime',
      metric_type: 'total_value',
      breakdown: 'country',
      timeframe: 'this_month',
    });
    const kr = data.audience(MAIN_ACCOUNT_ID, 'audience_country').KR!;
    expect(engaged.body.data[0].total_value.breakdowns[0].results).toContainEqual({ dimension_values: ['KR'], value: Math.round(kr * 0.3) });
    expect((await errorOf({ metric: 'reached_audience_demographics', period: 'lifetime', breakdown: 'country' })).message).toBe(
      '(#100) The following metrics (reached_audience_demographics) should be specified with parameter metric_type=total_value',
    );
    expect((await errorOf({ metric: 'views', period: 'lifetime', metric_type: 'total_value' })).message).toBe(
      '(#100) The following metrics (views) should be specified with parameter period=day',
    );
  });
});

describe('retired metrics, version by version', () => {
  it("on Meta's hosts: audience_* from v18.0, profile_views by day from v21.0, impressions from v22.0", async () => {
    const at = (version: string, query: Record<string, string>) => insights(query, { version, now: EARLIER });
    const audience = { metric: 'audience_country', period: 'lifetime' };
    expect((await at('v17.0', audience)).body.data[0].name).toBe('audience_country');
    expect((await at('v17.0', audience)).version).toBe('v17.0');
    const refused = (await at('v18.0', audience)).body.error;
    expect(refused.code).toBe(100);
    expect(refused.message).toMatch(/^\(#100\) metric\[0\] must be one of the following values: reach, impressions, /);
    expect(refused.message).not.toContain('audience_country');

    const daily = { metric: 'profile_views', period: 'day', ...range };
    expect((await at('v20.0', daily)).body.data[0].values).toHaveLength(7);
    expect((await at('v21.0', daily)).body.error.message).toBe(
      '(#100) The following metrics (profile_views) should be specified with parameter metric_type=total_value',
    );
    expect((await at('v21.0', { ...daily, metric_type: 'total_value' })).body.data[0].total_value.value).toBe(sum('profile_views', since, 7));

    const impressions = { metric: 'impressions,reach', period: 'day', ...range };
    expect((await at('v21.0', impressions)).body.data).toHaveLength(2);
    expect((await at('v22.0', impressions)).body.error.message).toBe(
      '(#100) Starting from version v22.0 and above, the impressions metric is no longer supported',
    );
    expect((await at('v25.0', impressions)).body.error.message).toBe(
      '(#100) Starting from version v22.0 and above, the impressions metric is no longer supported',
    );
  });

  it("on the spec's mount: the spec's own names until v22.0, as the spec (v18.0) names them", async () => {
    const at = (version: string, query: Record<string, string>) => insights(query, { version, now: EARLIER, mount: 'graph' });
    expect((await at('v21.0', { metric: 'audience_country', period: 'lifetime' })).body.data).toHaveLength(1);
    expect((await at('v21.0', { metric: 'profile_views,impressions', period: 'day', ...range })).body.data).toHaveLength(2);
    expect((await at('v22.0', { metric: 'audience_country', period: 'lifetime' })).body.error.code).toBe(100);
    expect((await at('v22.0', { metric: 'profile_views', period: 'day', ...range })).body.error.message).toContain('metric_type=total_value');
  });

  it('a retired version is served, and refuses, as the oldest usable one does', async () => {
    // On 2026-11-21 a call at v18.0 is served at v21.0: on Meta's hosts profile_views by day is gone.
    const answer = await insights({ metric: 'profile_views', period: 'day', ...range }, { version: 'v18.0' });
    expect(answer.version).toBe('v21.0');
    expect(answer.body.error.message).toContain('should be specified with parameter metric_type=total_value');
  });

  it('media insights: engagement from v18.0, video_views from v21.0, impressions from v22.0 in the words Meta uses per media type', async () => {
    const media = data.account(MAIN_ACCOUNT_ID)!.media;
    const image = media.find((m) => m.kind === 'IMAGE')!;
    const video = media.find((m) => m.kind === 'VIDEO')!;
    const at = (version: string, id: string, metric: string) => get(`/${id}/insights`, { metric }, { version, now: EARLIER });
    expect((await at('v17.0', image.id, 'engagement')).body.data[0].values[0].value).toBe(image.insights.engagement);
    const engagement = (await at('v18.0', image.id, 'reach,engagement')).body.error.message as string;
    expect(engagement).toMatch(/^\(#100\) metric\[1\] must be one of the following values: impressions, reach, /);
    expect(engagement).not.toContain('engagement');
    expect(engagement).toContain('total_interactions');
    expect((await at('v20.0', video.id, 'video_views')).body.data).toHaveLength(1);
    expect((await at('v21.0', video.id, 'video_views')).body.error.code).toBe(100);
    expect((await at('v22.0', image.id, 'impressions')).body.error.message).toBe(
      '(#100) Starting from version v22.0 and above, the impressions metric is no longer supported for the queried media',
    );
    expect((await at('v22.0', video.id, 'impressions')).body.error.message).toBe(
      '(#100) The Media Insights API does not support the impressions metric for this media product type',
    );
    expect((await at('v25.0', video.id, 'views,total_interactions')).body.data).toHaveLength(2);
  });
});
