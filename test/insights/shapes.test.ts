/**
 * `insights accounts`, `insights media` and `insights account` against each
 * of the sandbox's three account-discovery shapes (the spec's edge,
 * graph.facebook.com's pages, graph.instagram.com's `me`), without telling
 * the CLI which: it finds out, and remembers the shape in the profile.
 */
import { describe, expect, it } from 'vitest';
import { MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS, SECOND_ACCOUNT_ID } from '../../src/sandbox/graph/data.js';
import { NOW, useGraphCli } from './graph-sandbox.js';

const cli = useGraphCli();
const DAY = 86_400_000;

const mountOf = (shape: string) => cli.graph.url.replace(/\/graph$/, shape === 'spec' ? '/graph' : `/${shape}`);

function run(shape: string, argv: string[], env: Record<string, string> = {}) {
  return cli.sb.run(['insights', ...argv], {
    env: { MINIAPP_GRAPH_URL: mountOf(shape), MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.page, MINIAPP_GRAPH_VERSION: 'v24.0', ...env },
    now: new Date(NOW),
  });
}

describe.each(['spec', 'facebook', 'instagram'])('insights against the %s shape', (shape) => {
  it('accounts, media and account find the account by themselves', async () => {
    await cli.start({ media: 30 });
    const accounts = await run(shape, ['accounts', '--json']);
    expect(accounts.code, accounts.stderr).toBe(0);
    expect(JSON.parse(accounts.stdout)).toEqual([{ id: MAIN_ACCOUNT_ID, name: 'Sandbox Studio' }]);

    const media = await run(shape, ['media', '--all', '--metrics', 'reach', '--json']);
    expect(media.code, media.stderr).toBe(0);
    const rows = JSON.parse(media.stdout) as { id: string; insights: { reach: number } }[];
    const expected = cli.graph.data.account(MAIN_ACCOUNT_ID)!.media;
    expect(rows.map((r) => [r.id, r.insights.reach])).toEqual(expected.map((m) => [m.id, m.insights.reach]));

    const until = Math.floor(NOW / DAY) * DAY;
    const account = await run(shape, ['account', '--metrics', 'reach,follower_count', '--since', '7d', '--json']);
    expect(account.code, account.stderr).toBe(0);
    const report = JSON.parse(account.stdout);
    expect(report.account).toBe(MAIN_ACCOUNT_ID);
    expect(report.days).toHaveLength(7);
    expect(report.days[0].reach).toBe(cli.graph.data.daily(MAIN_ACCOUNT_ID, 'reach', until - 7 * DAY));
  });

  it("account reads today's metrics as window totals, and the spec's defaults as far as v24.0 serves them", async () => {
    await cli.start({ media: 5 });
    const until = Math.floor(NOW / DAY) * DAY;
    const sum = (metric: string) =>
      Array.from({ length: 7 }, (_, i) => cli.graph.data.daily(MAIN_ACCOUNT_ID, metric, until - (7 - i) * DAY)).reduce((a, b) => a + b, 0);
    const before = await cli.graph.graphCalls();
    const today = await run(shape, [
      'account',
      '--account',
      MAIN_ACCOUNT_ID,
      '--metrics',
      'reach,views,accounts_engaged,total_interactions',
      '--since',
      '7d',
      '--json',
    ]);
    expect(today.code, today.stderr).toBe(0);
    // One call for the daily reach, one for the totals.
    expect((await cli.graph.graphCalls()) - before).toBe(2);
    const report = JSON.parse(today.stdout);
    expect(report.days[0]).toEqual({
      date: new Date(until - 7 * DAY).toISOString().slice(0, 10),
      reach: cli.graph.data.daily(MAIN_ACCOUNT_ID, 'reach', until - 7 * DAY),
    });
    const window = { since: report.since, until: report.until };
    expect(report.totals).toEqual([
      { metric: 'views', ...window, value: sum('views') },
      { metric: 'accounts_engaged', ...window, value: sum('accounts_engaged') },
      { metric: 'total_interactions', ...window, value: sum('total_interactions') },
    ]);

    // The defaults (reach, impressions, follower_count, profile_views): impressions is gone at v24.0, profile_views comes as a total.
    const defaults = await run(shape, ['account', '--account', MAIN_ACCOUNT_ID, '--since', '7d']);
    expect(defaults.code, defaults.stderr).toBe(0);
    expect(defaults.stderr).toContain('the graph API rejected impressions: retired; ask for the successor instead (views for impressions)');
    const rows = defaults.stdout
      .trim()
      .split('\n')
      .map((line) => line.split('\t'));
    expect(rows).toHaveLength(8);
    expect(rows[0]).toEqual([
      window.since,
      String(cli.graph.data.daily(MAIN_ACCOUNT_ID, 'reach', until - 7 * DAY)),
      '',
      String(cli.graph.data.daily(MAIN_ACCOUNT_ID, 'follower_count', until - 7 * DAY)),
    ]);
    expect(rows[7]).toEqual(['profile_views', window.since, window.until, String(sum('profile_views'))]);
  });
});

describe('account discovery', () => {
  it('costs one call once the shape is known: the profile remembers it per graph-url', async () => {
    await cli.start({ media: 5 });
    const before = await cli.graph.graphCalls();
    expect((await run('instagram', ['accounts'])).code).toBe(0);
    const first = (await cli.graph.graphCalls()) - before;
    // spec edge, /me/accounts, /me as a page: refused by an IG user; then /me as the IG user.
    expect(first).toBe(4);
    expect((await run('instagram', ['accounts'])).code).toBe(0);
    expect((await cli.graph.graphCalls()) - before - first).toBe(1);
    // graph-shape says it outright: one call from the start.
    const other = await cli.sb.run(['--profile', 'ig', 'insights', 'accounts', '--json'], {
      env: { MINIAPP_GRAPH_URL: mountOf('instagram'), MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.page, MINIAPP_GRAPH_SHAPE: 'instagram' },
      now: new Date(NOW),
    });
    expect(other.code, other.stderr).toBe(0);
    expect((await cli.graph.graphCalls()) - before - first).toBe(2);
  });

  it('lists every linked account of a Facebook Login user token, and skips pages without one', async () => {
    await cli.start({ media: 5 });
    const accounts = await run('facebook', ['accounts', '--json'], { MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.user, MINIAPP_GRAPH_SHAPE: 'facebook' });
    expect(accounts.code, accounts.stderr).toBe(0);
    expect(JSON.parse(accounts.stdout)).toEqual([
      { id: MAIN_ACCOUNT_ID, name: 'Sandbox Studio' },
      { id: SECOND_ACCOUNT_ID, name: 'Sandbox Shop' },
    ]);
  });

  it('refuses a graph-shape that is not one, with exit 2', async () => {
    const bad = await cli.sb.run(['config', 'set', 'graph-shape', 'twitter']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('graph-shape must be auto, spec, facebook or instagram; got "twitter"');
  });
});
