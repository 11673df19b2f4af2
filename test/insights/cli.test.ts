/**
 * `miniapp insights ...` run in-process against a real graph sandbox on
 * 127.0.0.1:0: the acceptance points of the issue, checked against the
 * sandbox's data and its request counter.
 */
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { readTrace } from '../helpers/launcher.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { plain } from '../helpers/cli.js';
import { SandboxClock } from '../../src/sandbox/clock.js';
import { MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS, SECOND_ACCOUNT_ID } from '../../src/sandbox/graph/data.js';
import { DEFAULT_MEDIA_FIELDS } from '../../src/insights/media.js';
import { NOW, parseCsv, useGraphCli } from './graph-sandbox.js';

const DAY = 86_400_000;
const TODAY = Math.floor(NOW / DAY) * DAY;
const TOKEN = SANDBOX_GRAPH_TOKENS.page;

const cli = useGraphCli();

const start = cli.start;

function run(argv: string[], env: Record<string, string> = {}, tty = false) {
  return cli.sb.run(['insights', ...argv], {
    env: { MINIAPP_GRAPH_URL: cli.graph.url, MINIAPP_GRAPH_TOKEN: TOKEN, ...env },
    now: new Date(NOW),
    tty,
  });
}

function expectNoToken(...texts: string[]): void {
  for (const text of texts) {
    expect(text).not.toContain('sandbox-graph-token');
    expect(text).not.toContain('access_token=');
  }
}

/** A cell as cellText renders it. */
const cell = (value: unknown) => (value === undefined || value === null ? '' : String(value));

describe('miniapp insights media', () => {
  it('exports all 250 media as CSV with the values of the sandbox, in at most 4 calls', async () => {
    await start({ media: 250 });
    const result = await run(['media', '--metrics', 'reach', '--all', '--format', 'csv']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const [header, ...records] = parseCsv(result.stdout);
    expect(header).toEqual([...DEFAULT_MEDIA_FIELDS, 'reach']);
    const media = cli.graph.data.account(MAIN_ACCOUNT_ID)!.media;
    expect(records).toHaveLength(250);
    records.forEach((record, i) => {
      const item = media[i]!;
      expect(record).toEqual([...DEFAULT_MEDIA_FIELDS.map((f) => cell(item.fields[f])), String(item.insights.reach)]);
    });
    // The account lookup and three pages of 100.
    expect(await cli.graph.graphCalls()).toBe(4);
  });

  it('quotes captions with commas, quotes and line breaks (RFC 4180, CRLF records)', async () => {
    await start({ media: 12 });
    const result = await run(['media', '--fields', 'caption', '--no-metrics', '--format', 'csv']);
    expect(result.code).toBe(0);
    expect(result.stdout.startsWith('id,caption\r\n')).toBe(true);
    expect(result.stdout).toContain('"She said ""this is the one"", and it was (#2)"');
    expect(result.stdout).toContain('"Line one of 3\nline two, with a comma"');
    expect(result.stdout).toContain('"Menu: coffee, cake, ""the usual""\r\nOpen 9-5 (6)"');
    const records = parseCsv(result.stdout).slice(1);
    const media = cli.graph.data.account(MAIN_ACCOUNT_ID)!.media;
    expect(records).toEqual(media.map((m) => [m.id, cell(m.fields.caption)]));
    expect(records.some(([, caption]) => caption === '')).toBe(true);
  });

  it('leaves empty cells for metrics a type lacks, with one warning naming them', async () => {
    await start({ media: 20 });
    const result = await run(['media', '--fields', 'id,media_type', '--metrics', 'reach,video_views', '--json', '--account', MAIN_ACCOUNT_ID]);
    expect(result.code).toBe(0);
    const warnings = result.stderr.split('\n').filter((line) => line.startsWith('warning:'));
    expect(warnings).toEqual([
      'warning: empty cells where the media type does not answer the metric: IMAGE (8 items) lacks video_views; CAROUSEL_ALBUM (4 items) lacks video_views; REELS (2 items) lacks video_views',
    ]);
    const rows = JSON.parse(result.stdout) as { id: string; media_type: string; insights: Record<string, number | null> }[];
    expect(rows).toHaveLength(20);
    for (const row of rows) {
      const item = cli.graph.data.media(row.id)!;
      expect(row.insights).toEqual({ reach: item.insights.reach, video_views: item.kind === 'VIDEO' ? item.insights.video_views : null });
    }
  });

  it('prints a table on a TTY and tab-separated rows when piped, 25 by default', async () => {
    await start({ media: 40 });
    const piped = await run(['media', '--account', MAIN_ACCOUNT_ID]);
    expect(piped.code).toBe(0);
    const lines = piped.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(25);
    const first = cli.graph.data.account(MAIN_ACCOUNT_ID)!.media[0]!;
    expect(lines[0]!.split('\t')).toEqual([
      ...DEFAULT_MEDIA_FIELDS.map((f) => cell(first.fields[f])),
      ...['reach', 'saved', 'shares'].map((m) => String(first.insights[m])),
    ]);

    const tty = await run(['media', '--account', MAIN_ACCOUNT_ID, '--limit', '3'], {}, true);
    expect(tty.code).toBe(0);
    const text = plain(tty.stdout);
    // At 120 columns IDs, types and numbers are whole; the caption and the link are left out, and named.
    expect(text).toMatch(/│ id +│ media_type +│ timestamp +│ like_count +│ comments_count +│ reach +│ saved +│ shares +│/);
    expect(plain(tty.stderr)).toContain('(not shown at 120 columns: caption, permalink;');
    expect(text).toContain(first.id);
  });

  it('writes --output atomically with a note on stderr, and leaves nothing behind on failure', async () => {
    await start({ media: 30 });
    const file = join(cli.sb.root, 'media.csv');
    const result = await run(['media', '--all', '--output', file, '--account', MAIN_ACCOUNT_ID]);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(`wrote 30 media rows to ${file}\n`);
    expect(parseCsv(readFileSync(file, 'utf8'))).toHaveLength(31);
    expect(readdirSync(cli.sb.root).filter((name) => name.endsWith('.tmp'))).toEqual([]);

    const json = join(cli.sb.root, 'media.json');
    expect((await run(['media', '--limit', '2', '--output', json, '--account', MAIN_ACCOUNT_ID])).code).toBe(0);
    expect(JSON.parse(readFileSync(json, 'utf8'))).toHaveLength(2);

    const missingDir = join(cli.sb.root, 'nope', 'media.csv');
    const failed = await run(['media', '--output', missingDir, '--account', MAIN_ACCOUNT_ID]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain(`cannot write ${missingDir}`);
    expect(existsSync(join(cli.sb.root, 'nope'))).toBe(false);

    const table = await run(['media', '--format', 'table', '--output', file]);
    expect(table.code).toBe(2);
  });

  it('lists the accounts and says how to choose when the token reaches several', async () => {
    await start({ media: 5 });
    const accounts = await run(['accounts', '--json'], { MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.user });
    expect(JSON.parse(accounts.stdout)).toEqual([
      { id: MAIN_ACCOUNT_ID, name: 'Sandbox Studio' },
      { id: SECOND_ACCOUNT_ID, name: 'Sandbox Shop' },
    ]);
    const choose = await run(['media'], { MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.user });
    expect(choose.code).toBe(2);
    expect(choose.stderr).toContain(`${SECOND_ACCOUNT_ID}  Sandbox Shop`);
    expect(choose.stderr).toContain('--account ID');
    expect(choose.stderr).toContain('miniapp config set graph-account ID');
    const chosen = await run(['media', '--json'], { MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.user, MINIAPP_GRAPH_ACCOUNT: SECOND_ACCOUNT_ID });
    expect(JSON.parse(chosen.stdout)).toHaveLength(12);
  });

  it('waits when throttled, resumes and completes a 10-page export with every row', async () => {
    // A window of 5 calls per 150 ms of sandbox time, which moves 25 ms at each look (one per graph call), however
    // fast or loaded the machine is: five calls fill the window, the sixth is refused with error 17, and the client's
    // first retry (after a 40 ms base back-off instead of 60 s, in real time) comes 25 ms later and is let through.
    let sandboxTime = NOW;
    await start({ media: 1000, rateLimit: { calls: 5, windowMs: 150 } }, new SandboxClock(() => (sandboxTime += 25)));
    const result = await run(['media', '--all', '--fields', 'id', '--metrics', 'reach', '--json', '--account', MAIN_ACCOUNT_ID], {
      MINIAPP_GRAPH_BACKOFF_MS: '40',
    });
    expect(result.code, result.stderr).toBe(0);
    const rows = JSON.parse(result.stdout) as { id: string; insights: { reach: number } }[];
    const media = cli.graph.data.account(MAIN_ACCOUNT_ID)!.media;
    expect(rows.map((r) => r.id)).toEqual(media.map((m) => m.id));
    expect(rows.every((r, i) => r.insights.reach === media[i]!.insights.reach)).toBe(true);
    expect(result.stderr).toContain('warning: graph API usage is at 80% of the rate limit');
    expect(result.stderr).toMatch(/warning: rate limited by the graph API \(code 17\); retry 1 of 3 in \d+ms/);
    // Ten pages, plus the calls refused with error 17.
    expect(await cli.graph.graphCalls()).toBeGreaterThan(10);
  });
});

describe('miniapp insights errors', () => {
  it('gives 190, 200, 17 and the personal-account error their own message and exit code, never the token', async () => {
    await start({ media: 5, rateLimit: { calls: 1, windowMs: 3_600_000 } });
    const cases = [
      { token: SANDBOX_GRAPH_TOKENS.expired, code: 4, message: 'the graph API token has expired', hint: 'create a new token' },
      {
        token: SANDBOX_GRAPH_TOKENS.noPermission,
        code: 4,
        message: 'lacks the pages_read_engagement permission',
        hint: 'add pages_read_engagement to the app',
      },
      {
        token: SANDBOX_GRAPH_TOKENS.personal,
        code: 1,
        message: 'not a business or creator account',
        hint: 'convert the account to business or creator and link it to a page',
      },
    ];
    for (const expected of cases) {
      const result = await run(['media', '--metrics', 'reach', '--all', '--format', 'csv', '--debug'], { MINIAPP_GRAPH_TOKEN: expected.token });
      expect(result.code, expected.token).toBe(expected.code);
      expect(result.stdout).toBe('');
      expect(result.stderr).toContain(expected.message);
      expect(result.stderr).toContain(expected.hint);
      expectNoToken(result.stdout, result.stderr);
    }
    // One call an hour: the lookup passes, the first page is throttled until the retries run out.
    const throttled = await run(['media', '--all', '--max-retries', '1', '--debug'], { MINIAPP_GRAPH_BACKOFF_MS: '1' });
    expect(throttled.code).toBe(5);
    expect(throttled.stderr).toContain('error: the graph API rate limit is still exceeded after 1 retry (code 17: (#17) User request limit reached)');
    expect(throttled.stderr).toContain('the API expects access again in about 60 min');
    expectNoToken(throttled.stdout, throttled.stderr);
  });

  it('keeps the token out of --debug request lines, paging links included', async () => {
    await start({ media: 250 });
    const result = await run(['media', '--all', '--format', 'csv', '--debug']);
    expect(result.code).toBe(0);
    const requests = result.stderr.split('\n').filter((line) => line.startsWith('GET '));
    expect(requests).toHaveLength(4);
    expect(requests[2]).toMatch(/\/media\?.*after=.* -> 200 in \d+ms$/);
    expectNoToken(result.stderr);
  });

  it('names a retired metric the API rejects and its successor, and goes on', async () => {
    await start({ media: 10 });
    const result = await run(['media', '--metrics', 'impressions,reach', '--json', '--account', MAIN_ACCOUNT_ID], { MINIAPP_GRAPH_VERSION: 'v22.0' });
    expect(result.code).toBe(0);
    expect(result.stderr).toBe(
      'warning: the graph API rejected impressions: retired; ask for the successor instead (views for impressions); its column stays empty\n',
    );
    const rows = JSON.parse(result.stdout) as { insights: Record<string, number | null> }[];
    expect(rows.every((r) => r.insights.impressions === null && typeof r.insights.reach === 'number')).toBe(true);

    const only = await run(['post', cli.graph.data.account(MAIN_ACCOUNT_ID)!.media[0]!.id, '--metrics', 'impressions'], { MINIAPP_GRAPH_VERSION: 'v22.0' });
    expect(only.code).toBe(2);
    expect(only.stderr).toContain('error: the graph API rejected the metric impressions');
    expect(only.stderr).toContain('ask for the successors instead: impressions -> views');
  });

  it('asks for the token when none is set, and times out on a silent API', async () => {
    await start({ media: 1 });
    const none = await cli.sb.run(['insights', 'accounts'], { env: { MINIAPP_GRAPH_URL: cli.graph.url } });
    expect(none.code).toBe(4);
    expect(none.stderr).toContain('graph-token is not set');
    expect(none.stderr).toContain('MINIAPP_GRAPH_TOKEN');
    const unreachable = await cli.sb.run(['insights', 'accounts'], { env: { MINIAPP_GRAPH_URL: 'http://127.0.0.1:9/graph', MINIAPP_GRAPH_TOKEN: TOKEN } });
    expect(unreachable.code).toBe(5);
    expectNoToken(unreachable.stderr);
  });
});

describe('miniapp insights account', () => {
  it('walks 90 days back in three windows and prints 90 dated rows', async () => {
    await start({ media: 1 });
    for (const since of ['90d', new Date(TODAY - 90 * DAY).toISOString().slice(0, 10)]) {
      const before = await cli.graph.graphCalls();
      const result = await run(['account', '--metrics', 'reach,follower_count', '--since', since]);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      const lines = result.stdout.trimEnd().split('\n');
      expect(lines).toHaveLength(90);
      lines.forEach((line, i) => {
        const day = TODAY - (90 - i) * DAY;
        expect(line.split('\t')).toEqual([
          new Date(day).toISOString().slice(0, 10),
          String(cli.graph.data.daily(MAIN_ACCOUNT_ID, 'reach', day)),
          String(cli.graph.data.daily(MAIN_ACCOUNT_ID, 'follower_count', day)),
        ]);
      });
      // The account lookup and one call per 30-day window.
      expect((await cli.graph.graphCalls()) - before).toBe(4);
    }
  });

  it('writes a date-by-metric CSV and JSON', async () => {
    await start({ media: 1 });
    const csv = await run(['account', '--account', MAIN_ACCOUNT_ID, '--since', '2026-11-01', '--until', '2026-11-03', '--format', 'csv']);
    expect(csv.code).toBe(0);
    const records = parseCsv(csv.stdout);
    expect(records[0]).toEqual(['date', 'reach', 'impressions', 'follower_count', 'profile_views']);
    expect(records.slice(1).map((r) => r[0])).toEqual(['2026-11-01', '2026-11-02', '2026-11-03']);
    const json = await run(['account', '--account', MAIN_ACCOUNT_ID, '--metrics', 'reach', '--since', '7d', '--json']);
    const body = JSON.parse(json.stdout);
    expect(body).toMatchObject({ account: MAIN_ACCOUNT_ID, period: 'day', since: '2026-11-14', until: '2026-11-20' });
    expect(body.days).toHaveLength(7);
    expect(body.days[6]).toEqual({ date: '2026-11-20', reach: cli.graph.data.daily(MAIN_ACCOUNT_ID, 'reach', TODAY - DAY) });
  });

  it('prints audience distributions as sorted top-N tables and as key/value rows in CSV', async () => {
    await start({ media: 1 });
    const country = Object.entries(cli.graph.data.audience(MAIN_ACCOUNT_ID, 'audience_country')).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    const tty = await run(['account', '--account', MAIN_ACCOUNT_ID, '--metrics', 'audience_country', '--top', '3'], {}, true);
    expect(tty.code).toBe(0);
    const text = plain(tty.stdout);
    expect(text).toContain(`audience_country (top 3 of ${country.length})`);
    const shown = [...text.matchAll(/│ ([A-Z]{2}) +│ (\d+) +│/g)].map((m) => [m[1], Number(m[2])]);
    expect(shown).toEqual(country.slice(0, 3));

    const csv = await run(['account', '--account', MAIN_ACCOUNT_ID, '--metrics', 'audience_country,audience_gender_age', '--format', 'csv']);
    const records = parseCsv(csv.stdout);
    expect(records[0]).toEqual(['metric', 'key', 'value']);
    expect(records.slice(1, 1 + country.length)).toEqual(country.map(([key, value]) => ['audience_country', key, String(value)]));
    expect(records.filter((r) => r[0] === 'audience_gender_age')).toHaveLength(21);

    const period = await run(['account', '--account', MAIN_ACCOUNT_ID, '--period', 'month']);
    expect(period.code).toBe(2);
    expect(period.stderr).toContain(
      'the graph API refused a parameter: graph API error 100: (#100) Param period must be one of {day, week, days_28, lifetime}',
    );
    // week is a period of reach and impressions only, as Meta has it.
    const weekly = await run(['account', '--account', MAIN_ACCOUNT_ID, '--period', 'week']);
    expect(weekly.code).toBe(2);
    expect(weekly.stderr).toContain('(#100) The following metrics (follower_count,profile_views) should be specified with parameter period=day');

    const mixed = await run(['account', '--metrics', 'reach,audience_city', '--format', 'csv']);
    expect(mixed.code).toBe(2);
    expect(mixed.stderr).toContain('a CSV holds one table');
  });
});

describe('miniapp insights post|story|reel|media-item', () => {
  it('reads one object with the spec defaults, narrowed to what a post type answers', async () => {
    await start({ media: 12 });
    const account = cli.graph.data.account(MAIN_ACCOUNT_ID)!;
    const image = account.media.find((m) => m.kind === 'IMAGE')!;
    const before = await cli.graph.graphCalls();
    const post = await run(['post', image.id, '--json']);
    expect(post.code).toBe(0);
    expect(JSON.parse(post.stdout)).toEqual({
      id: image.id,
      insights: Object.fromEntries(['impressions', 'reach', 'saved', 'shares', 'engagement', 'likes', 'comments'].map((m) => [m, image.insights[m]])),
    });
    expect((await cli.graph.graphCalls()) - before).toBe(2);

    const story = account.stories[0]!;
    const storyResult = await run(['story', story.id]);
    expect(storyResult.stdout.split('\n')[2]).toBe(`exits\t${story.insights.exits}\tExits`);

    const reel = account.media.find((m) => m.kind === 'REELS')!;
    const reelResult = await run(['reel', reel.id, '--metrics', 'plays,reach', '--json']);
    expect(JSON.parse(reelResult.stdout).insights).toEqual({ plays: reel.insights.plays, reach: reel.insights.reach });

    const item = await run(['media-item', image.id, '--fields', 'caption,like_count']);
    expect(item.stdout).toBe(`id\t${image.id}\ncaption\t${cell(image.fields.caption).replace(/[\r\n]+/g, ' ')}\nlike_count\t${image.fields.like_count}\n`);

    // An ID that would change the request's path or query is a usage error, and nothing is asked of the API.
    const calls = await cli.graph.graphCalls();
    for (const argv of [
      ['post', `${image.id}#x`],
      ['story', `${story.id}?y=1`],
      ['reel', '../me'],
      ['media-item', 'me/accounts?x='],
    ]) {
      const refused = await run(argv);
      expect(refused.code, argv.join(' ')).toBe(2);
      expect(refused.stderr).toContain('must be a graph object ID');
      expect(refused.stdout).toBe('');
    }
    expect(await cli.graph.graphCalls()).toBe(calls);
  });
});

describe('start-up', () => {
  it('insights --help loads neither undici nor the insights client', () => {
    const root = fileURLToPath(new URL('../..', import.meta.url));
    if (!existsSync(join(root, 'dist', 'cli', 'commands', 'insights.js'))) throw new Error('dist/ is stale or missing: run `npm run build` (npm test does)');
    const home = mkdtempSync(join(tmpdir(), 'miniapp-insights-'));
    try {
      const trace = join(home, 'trace.txt');
      const result = spawnSync(
        process.execPath,
        ['--import', join(root, 'test', 'fixtures', 'trace-loads.mjs'), join(root, 'bin', 'miniapp.cjs'), 'insights', '--help'],
        {
          encoding: 'utf8',
          env: { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), MINIAPP_TRACE_LOADS: trace },
        },
      );
      expect(result.status, result.stderr).toBe(0);
      expect(result.stdout).toContain('Usage: miniapp insights');
      expect(result.stdout).toContain('media-item');
      const loaded = readTrace(trace);
      expect(loaded.some((url) => url.includes('dist/cli/commands/insights.js'))).toBe(true);
      expect(
        loaded.filter((url) => /node_modules\/undici\/|dist\/insights\/(client|media|account|throttle)\.js|node_modules\/(chalk|ora|cli-table3)\//.test(url)),
      ).toEqual([]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
