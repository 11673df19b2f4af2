/**
 * The graph emulator through Fastify inject(): tokens, paging, field
 * expansion, metric support, account insights, the rate limit and the
 * request counter.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { buildSandbox, type Sandbox } from '../../../src/sandbox/server.js';
import { SandboxClock } from '../../../src/sandbox/clock.js';
import { DAY_MS, MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS, SECOND_ACCOUNT_ID, createGraphData, startOfUtcDay } from '../../../src/sandbox/graph/data.js';

const NOW = Date.parse('2026-11-21T12:00:00Z');
const TOKEN = SANDBOX_GRAPH_TOKENS.page;

let sandbox: Sandbox | undefined;
afterEach(async () => {
  await sandbox?.app.close();
  sandbox = undefined;
});

async function build(graph: { media?: number; rateLimit?: { calls: number; windowMs: number } } = {}, clock = new SandboxClock(() => NOW)) {
  sandbox = await buildSandbox({ key: randomBytes(32), aad: randomBytes(8), clock, graph });
  return sandbox;
}

async function get(path: string, query: Record<string, string | undefined> = {}, version = 'v18.0') {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries({ access_token: TOKEN, ...query })) if (value !== undefined) params.set(name, value);
  const response = await sandbox!.app.inject({ method: 'GET', url: `/graph/${version}${path}?${params}` });
  return { status: response.statusCode, headers: response.headers, body: response.json() as Record<string, any> };
}

describe('graph sandbox: data', () => {
  it('is deterministic for an anchor, with the three post types, reels and stories', () => {
    const a = createGraphData({ now: NOW, media: 250 });
    const b = createGraphData({ now: NOW, media: 250 });
    expect(JSON.stringify(a.accounts)).toBe(JSON.stringify(b.accounts));
    const main = a.account(MAIN_ACCOUNT_ID)!;
    expect(main.media).toHaveLength(250);
    expect(new Set(main.media.map((m) => m.fields.media_type))).toEqual(new Set(['IMAGE', 'VIDEO', 'CAROUSEL_ALBUM']));
    expect(main.media.filter((m) => m.kind === 'REELS').length).toBe(25);
    expect(main.stories.length).toBeGreaterThan(0);
    expect(a.accounts.map((account) => account.id)).toEqual([MAIN_ACCOUNT_ID, SECOND_ACCOUNT_ID]);
    // Captions that CSV must quote, and some without a caption at all.
    const captions = main.media.map((m) => m.fields.caption);
    expect(captions.some((c) => typeof c === 'string' && c.includes('"') && c.includes(','))).toBe(true);
    expect(captions.some((c) => typeof c === 'string' && c.includes('\n'))).toBe(true);
    expect(captions.some((c) => c === undefined)).toBe(true);
    expect(a.daily(MAIN_ACCOUNT_ID, 'reach', startOfUtcDay(NOW))).toBe(b.daily(MAIN_ACCOUNT_ID, 'reach', startOfUtcDay(NOW)));
  });
});

describe('graph sandbox: routes', () => {
  it('counts every request, failed ones included, in /__sandbox/stats', async () => {
    const sb = await build({ media: 10 });
    await get('/me/social_business_accounts');
    await get('/me/social_business_accounts', { access_token: 'nope' });
    await sb.app.inject({ method: 'GET', url: '/graph/nowhere' });
    const stats = (await sb.app.inject({ method: 'GET', url: '/__sandbox/stats' })).json();
    expect(stats.graphCalls).toBe(3);
  });

  it('lists one business account for the page token and both for the user token', async () => {
    await build({ media: 10 });
    expect((await get('/me/social_business_accounts')).body.data).toEqual([{ id: MAIN_ACCOUNT_ID, name: 'Sandbox Studio' }]);
    const both = await get('/me/social_business_accounts', { access_token: SANDBOX_GRAPH_TOKENS.user });
    expect(both.body.data.map((a: { id: string }) => a.id)).toEqual([MAIN_ACCOUNT_ID, SECOND_ACCOUNT_ID]);
  });

  it('answers each token kind with its error', async () => {
    await build({ media: 10 });
    const expired = await get('/me/social_business_accounts', { access_token: SANDBOX_GRAPH_TOKENS.expired });
    expect(expired.status).toBe(400);
    expect(expired.body.error).toMatchObject({ type: 'OAuthException', code: 190, error_subcode: 463 });
    expect(expired.body.error.fbtrace_id).toEqual(expect.any(String));
    const noperm = await get(`/${MAIN_ACCOUNT_ID}/media`, { access_token: SANDBOX_GRAPH_TOKENS.noPermission });
    expect(noperm.body.error).toMatchObject({ code: 200 });
    expect(noperm.body.error.message).toContain('pages_read_engagement');
    const personal = await get(`/${MAIN_ACCOUNT_ID}/media`, { access_token: SANDBOX_GRAPH_TOKENS.personal });
    expect(personal.body.error.message).toMatch(/business or creator account/);
    const bogus = await get('/me/social_business_accounts', { access_token: 'made-up' });
    expect(bogus.body.error).toMatchObject({ code: 190 });
    const missing = await get('/me/social_business_accounts', { access_token: '' });
    expect(missing.body.error).toMatchObject({ code: 2500 });
  });

  it('pages with cursors and limit (max 100) until paging.next is absent', async () => {
    await build({ media: 250 });
    const ids: string[] = [];
    let query: Record<string, string | undefined> = { limit: '500', fields: 'id' };
    let pages = 0;
    for (;;) {
      const { body } = await get(`/${MAIN_ACCOUNT_ID}/media`, query);
      pages++;
      ids.push(...body.data.map((m: { id: string }) => m.id));
      expect(body.paging.cursors.after).toEqual(expect.any(String));
      if (!body.paging.next) break;
      const next = new URL(body.paging.next);
      expect(next.searchParams.get('access_token')).toBe(TOKEN);
      query = Object.fromEntries(next.searchParams);
    }
    expect(pages).toBe(3);
    expect(ids).toEqual(
      createGraphData({ now: NOW, media: 250 })
        .account(MAIN_ACCOUNT_ID)!
        .media.map((m) => m.id),
    );
  });

  it('expands insights.metric(...) on every item of a page, and refuses insights{...}', async () => {
    await build({ media: 20 });
    const data = createGraphData({ now: NOW, media: 20 });
    const { body } = await get(`/${MAIN_ACCOUNT_ID}/media`, { fields: 'id,caption,media_type,insights.metric(reach,saved)', limit: '5' });
    expect(body.data).toHaveLength(5);
    for (const item of body.data) {
      const expected = data.media(item.id)!;
      expect(item.insights.data.map((i: { name: string; values: { value: number }[] }) => [i.name, i.values[0]!.value])).toEqual([
        ['reach', expected.insights.reach],
        ['saved', expected.insights.saved],
      ]);
      expect(item.insights.data[0].period).toBe('lifetime');
    }
    const braces = await get(`/${MAIN_ACCOUNT_ID}/media`, { fields: 'id,insights{reach}' });
    expect(braces.body.error).toMatchObject({ code: 100 });
    const field = await get(`/${MAIN_ACCOUNT_ID}/media`, { fields: 'id,colour' });
    expect(field.body.error.message).toContain('nonexisting field (colour)');
  });

  it('fails a page whose items do not all support a metric, with the per-type message', async () => {
    await build({ media: 20 });
    const page = await get(`/${MAIN_ACCOUNT_ID}/media`, { fields: 'id,insights.metric(video_views)' });
    expect(page.body.error).toMatchObject({ code: 100, message: '(#100) The metric video_views is not supported for this media type' });
    const data = createGraphData({ now: NOW, media: 20 });
    const video = data.account(MAIN_ACCOUNT_ID)!.media.find((m) => m.kind === 'VIDEO')!;
    const single = await get(`/${video.id}/insights`, { metric: 'video_views' });
    expect(single.body.data[0]).toMatchObject({ name: 'video_views', period: 'lifetime', values: [{ value: video.insights.video_views }] });
    const unknown = await get(`/${video.id}/insights`, { metric: 'reach,reachh' });
    expect(unknown.body.error.message).toMatch(/^\(#100\) metric\[1\] must be one of the following values: /);
  });

  it('rejects retired metric names from v22.0 on and answers their successors', async () => {
    await build({ media: 20 });
    const id = createGraphData({ now: NOW, media: 20 }).account(MAIN_ACCOUNT_ID)!.media[0]!.id;
    expect((await get(`/${id}/insights`, { metric: 'impressions,reach' })).body.data).toHaveLength(2);
    const v22 = await get(`/${id}/insights`, { metric: 'impressions,reach' }, 'v22.0');
    expect(v22.body.error).toMatchObject({ code: 100 });
    expect(v22.body.error.message).toContain('impressions');
    expect((await get(`/${id}/insights`, { metric: 'views,reach' }, 'v22.0')).body.data).toHaveLength(2);
  });

  it('answers account insights by day over at most 30 days, with end_time at the end of each day', async () => {
    await build({ media: 5 });
    const data = createGraphData({ now: NOW, media: 5 });
    const until = startOfUtcDay(NOW);
    const since = until - 30 * DAY_MS;
    const { body } = await get(`/${MAIN_ACCOUNT_ID}/insights`, {
      metric: 'reach,follower_count',
      period: 'day',
      since: String(since / 1000),
      until: String(until / 1000),
    });
    expect(body.data.map((d: { name: string }) => d.name)).toEqual(['reach', 'follower_count']);
    const reach = body.data[0];
    expect(reach.values).toHaveLength(30);
    expect(reach.values[0]).toEqual({ value: data.daily(MAIN_ACCOUNT_ID, 'reach', since), end_time: expect.stringMatching(/T00:00:00\+0000$/) });
    expect(Date.parse(reach.values[0].end_time.replace('+0000', 'Z'))).toBe(since + DAY_MS);
    expect(body.paging.next).toEqual(expect.any(String));

    const tooLong = await get(`/${MAIN_ACCOUNT_ID}/insights`, {
      metric: 'reach',
      period: 'day',
      since: String((until - 31 * DAY_MS) / 1000),
      until: String(until / 1000),
    });
    expect(tooLong.body.error.message).toBe('(#100) There cannot be more than 30 days (2592000 s) between since and until');

    const totals = await get(`/${MAIN_ACCOUNT_ID}/insights`, {
      metric: 'follower_count',
      period: 'day',
      metric_type: 'total_value',
      since: String(since / 1000),
      until: String(until / 1000),
    });
    expect(totals.body.data[0].total_value.value).toBe(
      Array.from({ length: 30 }, (_, i) => data.daily(MAIN_ACCOUNT_ID, 'follower_count', since + i * DAY_MS)).reduce((a, b) => a + b, 0),
    );
  });

  it('answers audience distributions with period=lifetime and demographics with a breakdown', async () => {
    await build({ media: 5 });
    const data = createGraphData({ now: NOW, media: 5 });
    const { body } = await get(`/${MAIN_ACCOUNT_ID}/insights`, { metric: 'audience_country', period: 'lifetime' });
    expect(body.data[0].values[0].value).toEqual(data.audience(MAIN_ACCOUNT_ID, 'audience_country'));
    const mixed = await get(`/${MAIN_ACCOUNT_ID}/insights`, { metric: 'reach,audience_city', period: 'day' });
    expect(mixed.body.error.message).toContain('audience_city');
    const demo = await get(`/${MAIN_ACCOUNT_ID}/insights`, {
      metric: 'follower_demographics',
      period: 'lifetime',
      metric_type: 'total_value',
      breakdown: 'country',
    });
    expect(demo.body.data[0].total_value.breakdowns[0].results).toContainEqual({
      dimension_values: ['KR'],
      value: data.audience(MAIN_ACCOUNT_ID, 'audience_country').KR,
    });
  });

  it('hides the second account from the page token and stories after 24 hours', async () => {
    let now = NOW;
    await build({ media: 5 }, new SandboxClock(() => now));
    expect((await get(`/${SECOND_ACCOUNT_ID}/media`)).body.error).toMatchObject({ code: 100, error_subcode: 33 });
    expect((await get(`/${SECOND_ACCOUNT_ID}/media`, { access_token: SANDBOX_GRAPH_TOKENS.user })).body.data).toHaveLength(12);
    const stories = (await get(`/${MAIN_ACCOUNT_ID}/stories`)).body.data as { id: string }[];
    expect(stories).toHaveLength(5);
    expect((await get(`/${stories[0]!.id}/insights`, { metric: 'exits,taps_forward' })).body.data).toHaveLength(2);
    now += DAY_MS;
    expect((await get(`/${stories[0]!.id}/insights`, { metric: 'exits' })).body.error).toMatchObject({ code: 100, error_subcode: 33 });
  });

  it('limits calls per token with error 17 and reports usage in the headers', async () => {
    let now = NOW;
    await build({ media: 5, rateLimit: { calls: 5, windowMs: 60_000 } }, new SandboxClock(() => now));
    const usages: number[] = [];
    for (let i = 0; i < 5; i++) {
      const response = await get(`/${MAIN_ACCOUNT_ID}/media`);
      expect(response.status).toBe(200);
      usages.push(JSON.parse(response.headers['x-app-usage'] as string).call_count);
    }
    expect(usages).toEqual([20, 40, 60, 80, 100]);
    const throttled = await get(`/${MAIN_ACCOUNT_ID}/media`);
    expect(throttled.status).toBe(400);
    expect(throttled.body.error).toMatchObject({ code: 17, type: 'OAuthException' });
    const buc = JSON.parse(throttled.headers['x-business-use-case-usage'] as string);
    expect(buc[MAIN_ACCOUNT_ID][0]).toMatchObject({ call_count: 100, estimated_time_to_regain_access: 1 });
    // Another token has its own budget; the window rolls.
    expect((await get(`/${MAIN_ACCOUNT_ID}/media`, { access_token: SANDBOX_GRAPH_TOKENS.user })).status).toBe(200);
    now += 60_001;
    expect((await get(`/${MAIN_ACCOUNT_ID}/media`)).status).toBe(200);
  });
});
