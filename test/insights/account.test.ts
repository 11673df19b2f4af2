import { afterEach, describe, expect, it } from 'vitest';
import { GraphClient } from '../../src/insights/client.js';
import { readAccountInsights, windowsOf } from '../../src/insights/account.js';
import { MetricRejectedError } from '../../src/insights/errors.js';
import { MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS } from '../../src/sandbox/graph/data.js';
import { NOW, startGraphSandbox } from './graph-sandbox.js';

const DAY = 86_400_000;
const TODAY = Math.floor(NOW / DAY) * DAY;

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (closers.length > 0) await closers.pop()!();
});

async function setup(version = 'v18.0') {
  const sb = await startGraphSandbox({ media: 5 });
  closers.push(sb.close);
  const client = new GraphClient({ baseUrl: sb.url, version, token: SANDBOX_GRAPH_TOKENS.page, sleep: async () => {} });
  closers.push(() => client.close());
  return { sb, client };
}

describe('windowsOf', () => {
  it('cuts a range into windows of at most 30 days', () => {
    expect(windowsOf(0, 90 * DAY)).toEqual([
      { since: 0, until: 30 * DAY },
      { since: 30 * DAY, until: 60 * DAY },
      { since: 60 * DAY, until: 90 * DAY },
    ]);
    expect(windowsOf(0, 31 * DAY)).toHaveLength(2);
    expect(windowsOf(0, DAY)).toEqual([{ since: 0, until: DAY }]);
  });
});

describe('readAccountInsights', () => {
  it('walks 90 days in three windows, one call each, with one row per day equal to the sandbox data', async () => {
    const { sb, client } = await setup();
    const since = TODAY - 90 * DAY;
    const result = await readAccountInsights(client, { account: MAIN_ACCOUNT_ID, metrics: ['reach', 'follower_count'], since, until: TODAY });
    expect(result.windows).toBe(3);
    // paging.next of these answers never ends; it is not followed.
    expect(result.calls).toBe(3);
    expect(await sb.graphCalls()).toBe(3);
    expect(result.days).toHaveLength(90);
    expect(result.since).toBe(new Date(since).toISOString().slice(0, 10));
    expect(result.until).toBe(new Date(TODAY - DAY).toISOString().slice(0, 10));
    result.days.forEach((day, i) => {
      const start = since + i * DAY;
      expect(day.date).toBe(new Date(start).toISOString().slice(0, 10));
      expect(day.values).toEqual({
        reach: sb.data.daily(MAIN_ACCOUNT_ID, 'reach', start),
        follower_count: sb.data.daily(MAIN_ACCOUNT_ID, 'follower_count', start),
      });
    });
  });

  it('reads audience distributions in one more call, sorted, and demographics with a breakdown', async () => {
    const { sb, client } = await setup();
    const result = await readAccountInsights(client, {
      account: MAIN_ACCOUNT_ID,
      metrics: ['reach', 'audience_country', 'follower_demographics'],
      since: TODAY - 7 * DAY,
      until: TODAY,
      breakdown: 'city',
    });
    expect(result.calls).toBe(3);
    expect(result.dailyMetrics).toEqual(['reach']);
    expect(result.distributions.map((d) => d.metric)).toEqual(['audience_country', 'follower_demographics']);
    const country = sb.data.audience(MAIN_ACCOUNT_ID, 'audience_country');
    const entries = result.distributions[0]!.entries;
    expect(entries).toHaveLength(Object.keys(country).length);
    expect(entries[0]!.value).toBe(Math.max(...Object.values(country)));
    expect(entries.every((e, i) => i === 0 || entries[i - 1]!.value >= e.value)).toBe(true);
    expect(result.distributions[1]!.entries.map((e) => e.key)).toContain('Seoul, Seoul');
  });

  it('drops retired metrics the API rejects, and fails when nothing is left', async () => {
    const { client } = await setup('v22.0');
    const warnings: string[] = [];
    const result = await readAccountInsights(client, {
      account: MAIN_ACCOUNT_ID,
      metrics: ['impressions', 'reach', 'audience_city'],
      since: TODAY - 40 * DAY,
      until: TODAY,
      onWarn: (m) => warnings.push(m),
    });
    expect(result.dropped).toEqual(['impressions', 'audience_city']);
    expect(result.days.every((d) => d.values.impressions === null && typeof d.values.reach === 'number')).toBe(true);
    expect(warnings).toEqual([
      'the graph API rejected impressions: retired; ask for the successor instead (views for impressions)',
      'the graph API rejected audience_city: retired; ask for the successor instead (follower_demographics (breakdown city) for audience_city)',
    ]);
    await expect(readAccountInsights(client, { account: MAIN_ACCOUNT_ID, metrics: ['impressions'], since: TODAY - DAY, until: TODAY })).rejects.toBeInstanceOf(
      MetricRejectedError,
    );
  });
});
