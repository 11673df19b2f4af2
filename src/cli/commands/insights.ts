/**
 * `miniapp insights ...`: media and account insights from the graph API
 * (spec 001) as tables, CSV or JSON.
 *
 * Only commander wiring and rendering live here; undici and the insights
 * modules load inside the actions, so `miniapp insights --help` stays
 * light. The metric catalogue is the exception: it is plain data with no
 * imports, and the help text lists it.
 */
import { Option, type Command } from '../commander.js';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import type { Column } from '../render/output.js';
import { wholeNumber } from '../flags.js';
import { emit, formatOf, type Format } from '../terminal/export.js';
import { accountOf, discoveryHint, rememberShape, withGraphSession } from '../connect/graph-session.js';
import { InterruptedError, UsageError } from '../../errors.js';
import {
  ACCOUNT_METRICS,
  DEFAULT_ACCOUNT_METRICS,
  DEFAULT_MEDIA_METRICS,
  METRICS_BY_KIND,
  RETIRED_METRICS,
  defaultMetricsFor,
  isAudienceMetric,
  isKnownAccountMetric,
  isKnownMediaMetric,
  isTotalValueMetric,
  parseMetricList,
  CURRENT_ACCOUNT_METRICS,
} from '../../insights/metrics.js';

/** Same list as DEFAULT_MEDIA_FIELDS in insights/media.ts, kept here so that help loads nothing. */
const MEDIA_FIELDS_DEFAULT = ['id', 'media_type', 'timestamp', 'caption', 'like_count', 'comments_count', 'permalink'];
const DEFAULT_LIMIT = 25;
const DEFAULT_TOP = 10;

const GROUP_HELP = `
Metrics by media type (spec names; retired ones are still sent as asked):
${Object.entries(METRICS_BY_KIND)
  .map(([kind, metrics]) => `  ${kind.padEnd(15)} ${metrics.join(', ')}`)
  .join('\n')}
  account         ${ACCOUNT_METRICS.join(', ')}
  account today   ${CURRENT_ACCOUNT_METRICS.join(', ')}
                  (views, accounts_engaged, total_interactions, likes, ... come as window totals: metric_type=total_value)

Retired by the real API, with their successors:
${Object.entries(RETIRED_METRICS)
  .map(([metric, successors]) => `  ${metric.padEnd(20)} -> ${successors.join(', ')}`)
  .join('\n')}

Settings: graph-url (MINIAPP_GRAPH_URL), graph-version (MINIAPP_GRAPH_VERSION),
graph-token (MINIAPP_GRAPH_TOKEN), graph-account (MINIAPP_GRAPH_ACCOUNT),
graph-shape (MINIAPP_GRAPH_SHAPE: how the account is found; auto by default).
The token travels only as the access_token query parameter and is never printed.
Throttled calls are retried with a back-off of 60 s doubled per retry
(--max-retries); from 80 % of the rate limit the client slows down.
MINIAPP_GRAPH_BACKOFF_MS shortens the 60 s base (a test aid).

Examples:
  miniapp insights accounts
  miniapp insights media --all --metrics reach,saved,shares --format csv --output media.csv
  miniapp insights post 17900000000000001
  miniapp insights account --metrics reach,follower_count --since 90d`;

function withGraphOptions(command: Command): Command {
  return command
    .addOption(new Option('--max-retries <n>', 'retries when throttled, each waiting twice as long').default(3).argParser(wholeNumber('--max-retries', 0)))
    .addOption(new Option('--timeout <duration>', 'time-out of each request').default('10s'));
}

function withFormat(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--format <format>',
        'output format; html is one self-contained page of charts and tables (default: table; with --output, from the file name)',
      ).choices(['table', 'csv', 'json', 'html']),
    )
    .option('--output <file>', 'write the data to FILE (atomically) instead of stdout');
}

export function registerInsights(program: Command, bind: Bind): void {
  const insights = program
    .command('insights')
    .summary('media and account insights from the graph API, as tables, terminal charts, CSV, JSON or an HTML report')
    .description(
      'Read media, media insights and account insights of a business or creator account from the graph API ' +
        '(GET {graph-url}/{graph-version}/{object}). Insights of a media list come in the same request as the list ' +
        '(field expansion), so exporting 250 media costs 3 or 4 calls of the 200 an hour a developer app gets.',
    )
    .addHelpText('after', GROUP_HELP);

  withGraphOptions(
    insights
      .command('accounts')
      .description(
        'business accounts the token reaches, as id and name: /me/social_business_accounts (the spec), /me/accounts (graph.facebook.com) or /me (graph.instagram.com), see graph-shape',
      )
      .addHelpText('after', '\nExamples:\n  miniapp insights accounts\n  miniapp insights accounts --json'),
  ).action(bind(runAccounts));

  withFormat(
    withGraphOptions(
      insights
        .command('media')
        .description(
          'One row per media item: its fields, then one column per metric. A metric the media type does not answer ' +
            'is an empty cell (one warning on stderr says which).',
        )
        .option('--account <id>', 'business account ID (default: graph-account, or the only account the token reaches)')
        .option('--fields <list>', `media fields, comma-separated; id always first (default ${MEDIA_FIELDS_DEFAULT.join(',')})`)
        .option('--metrics <list>', `metrics, comma-separated (default ${DEFAULT_MEDIA_METRICS.join(',')})`)
        .option('--no-metrics', 'fields only, no insights')
        .addOption(new Option('--limit <n>', `at most N media, newest first (default ${DEFAULT_LIMIT})`).argParser(wholeNumber('--limit')).conflicts('all'))
        .option('--all', 'every media item')
        .option('--since <date>', 'only media posted on or after DATE (2026-08-23, an ISO time, or 90d ago)')
        .option('--until <date>', 'only media posted on or before DATE (a date includes that day)')
        .option('--chart <metric>', 'a bar chart of the top media by METRIC, fitted to the terminal (with --format html: the metric of its chart)'),
    ),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp insights media\n  miniapp insights media --all --metrics reach,saved,shares --format csv > media.csv\n' +
        '  miniapp insights media --since 30d --metrics reach,video_views --json\n  miniapp insights media --all --output media.json\n' +
        '  miniapp insights media --chart reach\n  miniapp insights media --all --metrics reach,saved --format html --output media.html',
    )
    .action(bind(runMedia));

  for (const kind of ['post', 'story', 'reel'] as const) {
    withGraphOptions(
      insights
        .command(kind)
        .description(
          `lifetime insights of one ${kind}${kind === 'post' ? ' (the default metrics are narrowed to what its media type answers: one more call)' : ''}`,
        )
        .argument('<id>', `${kind} ID`)
        .option('--metrics <list>', `metrics, comma-separated (default ${defaultMetricsFor(kind).join(',')})`)
        .addHelpText('after', `\nExamples:\n  miniapp insights ${kind} ID\n  miniapp insights ${kind} ID --metrics reach --json`),
    ).action(bind((cc, command) => runObjectInsights(cc, command, kind)));
  }

  withGraphOptions(
    insights
      .command('media-item')
      .description('the fields of one media item')
      .argument('<id>', 'media ID')
      .option('--fields <list>', `fields, comma-separated (default ${MEDIA_FIELDS_DEFAULT.join(',')})`)
      .addHelpText('after', '\nExamples:\n  miniapp insights media-item ID\n  miniapp insights media-item ID --fields id,caption,media_url --json'),
  ).action(bind(runMediaItem));

  withFormat(
    withGraphOptions(
      insights
        .command('account')
        .description(
          'Account insights: a date-by-metric table of daily metrics (ranges longer than 30 days are read in 30-day windows), ' +
            'and audience_* distributions as sorted tables (key/value rows in CSV).',
        )
        .option('--account <id>', 'business account ID (default: graph-account, or the only account the token reaches)')
        .option('--metrics <list>', `metrics, comma-separated (default ${DEFAULT_ACCOUNT_METRICS.join(',')})`)
        .option('--period <period>', 'period of the daily metrics', 'day')
        .option('--since <date>', 'first day (2026-08-23, or 90d for 90 days ago; default 30d)')
        .option('--until <date>', 'last day, included (default yesterday)')
        .option('--breakdown <dimension>', 'breakdown of follower_demographics: country, city, age, gender or age,gender', 'country')
        .addOption(new Option('--top <n>', 'entries of each distribution in a table').default(DEFAULT_TOP).argParser(wholeNumber('--top')))
        .option('--chart', 'draw the daily metrics as line charts fitted to the terminal (colours follow NO_COLOR, --color and --no-color)'),
    ),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp insights account --metrics reach,follower_count --since 90d\n' +
        '  miniapp insights account --metrics audience_country,audience_city --top 5\n' +
        '  miniapp insights account --since 2026-01-01 --until 2026-03-31 --format csv --output q1.csv\n' +
        '  miniapp insights account --chart --since 60d\n  miniapp insights account --format html --output report.html',
    )
    .action(bind(runAccount));
}

/* ---------------------------------------------------------------- helpers */

function metricsFlag(text: string | undefined, fallback: readonly string[]): string[] {
  if (text === undefined) return [...fallback];
  const metrics = parseMetricList(text);
  if (metrics.length === 0) throw new UsageError('--metrics needs at least one metric name');
  return metrics;
}

function warnUnknown(cc: CommandContext, metrics: readonly string[], known: (metric: string) => boolean): void {
  const unknown = metrics.filter((m) => !known(m));
  if (unknown.length > 0) {
    cc.out.warn(`${unknown.join(', ')} ${unknown.length === 1 ? 'is' : 'are'} not in miniapp's metric catalogue; sending as asked`);
  }
}

/* ---------------------------------------------------------------- actions */

async function runAccounts(cc: CommandContext, command: Command): Promise<void> {
  const accounts = await withGraphSession(cc, command, 'reading business accounts', async (session) => {
    const { discoverAccounts } = await import('../../insights/accounts.js');
    const hint = await discoveryHint(cc, session);
    const found = await discoverAccounts(session.client, hint);
    await rememberShape(cc, session, hint, found.shape);
    return found.accounts;
  });
  cc.out.table(
    accounts,
    [
      { header: 'id', value: (a) => a.id },
      { header: 'name', value: (a) => a.name ?? '' },
    ],
    accounts.map((a) => ({ id: a.id, name: a.name ?? null })),
  );
}

interface MediaFlags {
  account?: string;
  fields?: string;
  metrics?: string | false;
  limit?: number;
  all?: boolean;
  since?: string;
  until?: string;
  format?: Format;
  output?: string;
  chart?: string;
}

function fieldsFlag(text: string | undefined): string[] {
  if (text === undefined) return [...MEDIA_FIELDS_DEFAULT];
  const fields = [
    ...new Set(
      text
        .split(',')
        .map((f) => f.trim())
        .filter(Boolean),
    ),
  ];
  const bad = fields.find((f) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(f));
  if (bad !== undefined) {
    throw new UsageError(`--fields takes plain field names; got "${bad}"`, {
      hint: bad.startsWith('insights') ? 'ask for insights with --metrics' : undefined,
    });
  }
  return ['id', ...fields.filter((f) => f !== 'id')];
}

async function runMedia(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<MediaFlags>();
  const charts = flags.chart === undefined ? undefined : await import('../views/insights-charts.js');
  if (charts && flags.format !== 'html') charts.checkChartable(cc, flags, '--chart');
  const format = formatOf(cc, flags.format, flags.output);
  const chartMetric = flags.chart === undefined ? undefined : chartMetricFlag(flags.chart, flags.metrics);
  const fields = fieldsFlag(flags.fields);
  // A chart names its media by caption (else ID) and type: those fields are read even when --fields leaves them out.
  const readFields = chartMetric !== undefined || format === 'html' ? [...new Set([...fields, 'caption', 'media_type'])] : fields;
  const asked = flags.metrics === false ? [] : metricsFlag(flags.metrics, chartMetric === undefined ? DEFAULT_MEDIA_METRICS : []);
  const metrics = chartMetric === undefined || asked.includes(chartMetric) ? asked : [...asked, chartMetric];
  const now = cc.now().getTime();
  const { sinceOf, untilOf } = await import('../../insights/dates.js');
  const since = flags.since === undefined ? undefined : sinceOf(flags.since, now);
  const until = flags.until === undefined ? undefined : untilOf(flags.until, now) - 1;
  if (since !== undefined && until !== undefined && since > until) throw new UsageError('--since must be before --until');
  warnUnknown(cc, metrics, isKnownMediaMetric);

  const limit = flags.all ? undefined : (flags.limit ?? DEFAULT_LIMIT);
  // Ctrl-C stops the reading rather than the process: how far it got is said before it ends.
  const stopped = cc.waitForShutdown();
  let account = '';
  const result = await withGraphSession(cc, command, 'reading media', async (session) => {
    const { client, activity } = session;
    let read = { rows: 0, pages: 0 };
    const reading = (async () => {
      account = await accountOf(cc, session, flags.account);
      const { countMedia, exportMedia, mediaPageSize } = await import('../../insights/media.js');
      const pageSize = mediaPageSize(limit);
      // The total costs a call: asked only where someone watches a job of several pages that a date range does not narrow.
      const count =
        activity.live && since === undefined && until === undefined && (limit === undefined || limit > pageSize)
          ? await countMedia(client, account)
          : undefined;
      const expected = count === undefined ? undefined : Math.min(count, limit ?? Infinity);
      activity.progress({ unit: 'pages', total: expected === undefined ? undefined : Math.max(1, Math.ceil(expected / pageSize)), label: 'reading media' });
      return exportMedia(client, {
        account,
        fields: readFields,
        metrics,
        limit,
        since,
        until,
        onProgress: (rows, pages) => {
          read = { rows, pages };
          activity.update({ done: pages, counts: { media: rows, calls: client.calls } });
        },
        onWarn: (message) => activity.warn(message),
      });
    })();
    // From the account's lookup on: a wait for the rate limit may be long, and Ctrl-C ends it too.
    const outcome = await Promise.race([reading.then((done) => ({ done })), stopped.then((signal) => ({ signal }))]);
    if ('done' in outcome) return outcome.done;
    // The calls in flight fail as the connections close; what they say after that is of no interest.
    reading.catch(() => undefined);
    await session.abort();
    const counted = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;
    throw new InterruptedError(
      `interrupted (${outcome.signal}) after reading ${counted(read.pages, 'page')} of media (${counted(read.rows, 'item')}, ${counted(client.calls, 'call')}): ` +
        'nothing was written, since it would have been partial',
      { hint: `run it again to read ${limit === undefined ? 'every media item' : `the ${limit} newest`}; --since or a smaller --limit reads fewer` },
    );
  });

  const { unsupportedWarning } = await import('../../insights/media.js');
  const unsupported = unsupportedWarning(result.unsupported);
  if (unsupported) cc.out.warn(unsupported);
  if (result.failed.length > 0) {
    const sample = result.failed
      .slice(0, 5)
      .map((f) => `${f.id} (${f.reason})`)
      .join(', ');
    cc.out.warn(
      `insights of ${result.failed.length} item${result.failed.length === 1 ? '' : 's'} failed and stay empty: ${sample}${result.failed.length > 5 ? ', ...' : ''}`,
    );
  }
  if (cc.debug) cc.out.info(cc.out.errColor.dim(`${result.rows.length} media in ${result.calls} calls`));

  if (format === 'html') {
    const { writeMediaReport } = charts ?? (await import('../views/insights-charts.js'));
    const range = [flags.since === undefined ? '' : `posted since ${flags.since}`, flags.until === undefined ? '' : `until ${flags.until}`]
      .filter(Boolean)
      .join(' ');
    const newest = limit === undefined ? 'every media item' : `the ${limit} newest media`;
    await writeMediaReport(cc, flags.output, { account, range: range ? `${newest} ${range}` : newest, rows: result.rows, fields, metrics, chart: chartMetric });
    return;
  }
  if (charts && chartMetric !== undefined) {
    charts.drawMediaChart(cc, result.rows, chartMetric);
    return;
  }

  type Row = (typeof result.rows)[number];
  const columns: Column<Row>[] = [
    ...fields.map((field) => ({
      header: field,
      value: (row: Row) => row.fields[field],
      // On a narrow terminal captions give way first, then links; IDs, types and numbers stay whole, and when they do
      // not fit, the caption and links go first, then the other fields, then the type; the id and metrics go last.
      ...(field === 'caption'
        ? { shrink: 2, drop: 5 }
        : field === 'permalink' || field === 'media_url' || field === 'thumbnail_url'
          ? { shrink: 1, drop: 4 }
          : {}),
      ...(field === 'id' ? {} : field === 'media_type' ? { drop: 1 } : field === 'caption' || /_url$|^permalink$/.test(field) ? {} : { drop: 2 }),
    })),
    ...metrics.map((metric) => ({ header: metric, value: (row: Row) => row.metrics[metric] })),
  ];
  const json = result.rows.map((row) => ({
    ...Object.fromEntries(fields.map((field) => [field, row.fields[field] ?? null])),
    ...(metrics.length > 0 ? { insights: row.metrics } : {}),
  }));
  await emit(cc, { format, output: flags.output, rows: result.rows, columns, json, what: 'media rows' });
}

/** The metric of --chart: one name, sent even when --metrics leaves it out (and refused with --no-metrics). */
function chartMetricFlag(text: string, metrics: string | false | undefined): string {
  const names = parseMetricList(text);
  if (names.length !== 1) throw new UsageError(`--chart takes one metric name; got "${text}"`);
  if (metrics === false) throw new UsageError('--chart needs a metric: leave out --no-metrics');
  return names[0]!;
}

/**
 * A graph object's ID as the API gives them (digits, or parts joined by
 * "_"): anything else would change the request's path ("#x" cut the
 * `/insights` off it, "?y=1" added a query) and answer another object's
 * fields, or none, with exit 0.
 */
function graphId(id: string, what: string): string {
  if (!/^[A-Za-z0-9_]{1,128}$/.test(id))
    throw new UsageError(`${what} must be a graph object ID (digits, letters and "_", as the API lists them); got "${id.slice(0, 64)}"`);
  return id;
}

async function runObjectInsights(cc: CommandContext, command: Command, kind: 'post' | 'story' | 'reel'): Promise<void> {
  const id = graphId((command.processedArgs as [string])[0], `the ${kind} ID`);
  const flags = command.opts<{ metrics?: string }>();
  const explicit = flags.metrics === undefined ? undefined : metricsFlag(flags.metrics, []);
  if (explicit) warnUnknown(cc, explicit, isKnownMediaMetric);
  const result = await withGraphSession(cc, command, `reading insights of ${kind} ${id}`, async ({ client, activity }) => {
    const { readMediaKind, readObjectInsights } = await import('../../insights/media.js');
    let metrics = explicit ?? [...defaultMetricsFor(kind)];
    if (!explicit && kind === 'post') {
      // Not every post answers every post metric: ask only what its type answers.
      const { supports } = await import('../../insights/metrics.js');
      const mediaKind = await readMediaKind(client, id);
      metrics = metrics.filter((m) => supports(mediaKind, m));
    }
    return readObjectInsights(client, id, metrics, (message) => activity.warn(message));
  });
  cc.out.table(
    result.metrics,
    [
      { header: 'metric', value: (m) => m.name },
      { header: 'value', value: (m) => m.value },
      { header: 'title', value: (m) => m.title ?? '' },
    ],
    { id: result.id, insights: Object.fromEntries(result.metrics.map((m) => [m.name, m.value])) },
  );
}

async function runMediaItem(cc: CommandContext, command: Command): Promise<void> {
  const id = graphId((command.processedArgs as [string])[0], 'the media ID');
  const fields = fieldsFlag(command.opts<{ fields?: string }>().fields);
  const item = await withGraphSession(cc, command, `reading media ${id}`, async ({ client }) => {
    const { readMediaItem } = await import('../../insights/media.js');
    return readMediaItem(client, id, fields);
  });
  cc.out.record(
    fields.map((field) => [field, item[field]] as const),
    item,
  );
}

interface AccountFlags {
  account?: string;
  metrics?: string;
  period: string;
  since?: string;
  until?: string;
  breakdown: string;
  top: number;
  format?: Format;
  output?: string;
  chart?: boolean;
}

async function runAccount(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<AccountFlags>();
  const charts = flags.chart || flags.format === 'html' ? await import('../views/insights-charts.js') : undefined;
  if (charts && flags.chart) charts.checkChartable(cc, flags, '--chart');
  const format = formatOf(cc, flags.format, flags.output);
  const metrics = metricsFlag(flags.metrics, DEFAULT_ACCOUNT_METRICS);
  const rangeAsked = metrics.some((m) => !isAudienceMetric(m));
  const dailyAsked = metrics.some((m) => !isAudienceMetric(m) && !isTotalValueMetric(m));
  const audienceAsked = metrics.some((m) => isAudienceMetric(m));
  if (flags.chart && !dailyAsked) {
    throw new UsageError('--chart draws daily metrics; audience_* metrics and totals (views, accounts_engaged, ...) print as tables without --chart');
  }
  if (format === 'csv' && rangeAsked && audienceAsked) {
    throw new UsageError('a CSV holds one table: ask for daily metrics or audience_* metrics, not both, with --format csv', {
      hint: 'run the command twice, once with each kind of metric',
    });
  }
  warnUnknown(cc, metrics, isKnownAccountMetric);
  const now = cc.now().getTime();
  const { sinceOf, untilOf, startOfUtcDay } = await import('../../insights/dates.js');
  const until = flags.until === undefined ? startOfUtcDay(now) : untilOf(flags.until, now);
  const since = flags.since === undefined ? startOfUtcDay(now) - 30 * 86_400_000 : sinceOf(flags.since, now);
  if (rangeAsked && since >= until) throw new UsageError('--since must be before --until');

  const result = await withGraphSession(cc, command, 'reading account insights', async (session) => {
    const account = await accountOf(cc, session, flags.account);
    const { readAccountInsights, windowsOf } = await import('../../insights/account.js');
    if (rangeAsked) session.activity.progress({ unit: 'windows', total: windowsOf(since, until).length, label: 'reading account insights' });
    return readAccountInsights(session.client, {
      account,
      metrics,
      period: flags.period,
      since,
      until,
      breakdown: flags.breakdown,
      onWarn: (message) => session.activity.warn(message),
      onProgress: (done) => session.activity.update({ done, counts: { calls: session.client.calls } }),
    });
  });
  if (cc.debug) cc.out.info(cc.out.errColor.dim(`${result.days.length} days in ${result.windows} windows, ${result.calls} calls`));

  type Day = (typeof result.days)[number];
  const dayColumns: Column<Day>[] = [
    { header: 'date', value: (d) => d.date },
    ...result.dailyMetrics.map((metric) => ({ header: metric, value: (d: Day) => d.values[metric] })),
  ];
  const hasDays = result.dailyMetrics.length > 0;
  const json = {
    account: result.account,
    period: result.period,
    ...(rangeAsked ? { since: result.since, until: result.until } : {}),
    ...(hasDays ? { days: result.days.map((d) => ({ date: d.date, ...d.values })) } : {}),
    ...(result.totals.length > 0 ? { totals: result.totals } : {}),
    ...(audienceAsked ? { audience: Object.fromEntries(result.distributions.map((d) => [d.metric, d.entries])) } : {}),
  };
  type Total = (typeof result.totals)[number];
  const totalColumns: Column<Total>[] = [
    { header: 'metric', value: (t) => t.metric },
    { header: 'since', value: (t) => t.since },
    { header: 'until', value: (t) => t.until },
    { header: 'value', value: (t) => t.value },
  ];
  if (result.totals.length > 0 && hasDays && (format === 'csv' || flags.chart || format === 'html')) {
    cc.out.warn(
      `the API answered ${[...new Set(result.totals.map((t) => t.metric))].join(', ')} with window totals, not daily values; see them with --format json or as a table`,
    );
  }

  if (charts && format === 'html') {
    await charts.writeAccountReport(cc, flags.output, result);
    return;
  }
  if (charts && flags.chart) {
    if (audienceAsked) cc.out.warn('--chart draws the daily metrics only; run without --chart for the audience_* tables');
    charts.drawAccountCharts(cc, result);
    return;
  }

  type Entry = { metric: string; key: string; value: number };
  const entryColumns: Column<Entry>[] = [
    { header: 'metric', value: (e) => e.metric },
    { header: 'key', value: (e) => e.key },
    { header: 'value', value: (e) => e.value },
  ];
  if (format === 'json' || format === 'csv' || flags.output !== undefined) {
    if (hasDays || format === 'json') {
      await emit(cc, { format, output: flags.output, rows: result.days, columns: dayColumns, json, what: 'days' });
    } else if (rangeAsked) {
      await emit(cc, { format, output: flags.output, rows: result.totals, columns: totalColumns, json, what: 'totals' });
    } else {
      const entries = result.distributions.flatMap((d) => d.entries.map((e) => ({ metric: d.metric, ...e })));
      await emit(cc, { format, output: flags.output, rows: entries, columns: entryColumns, json, what: 'entries' });
    }
    return;
  }

  // Tables: the days, the window totals, then each distribution's top entries, largest first.
  if (hasDays) cc.out.table(result.days, dayColumns, json);
  if (result.totals.length > 0) {
    if (hasDays && cc.out.isTTY) cc.out.line(`\n${cc.out.color.bold('totals')} (metric_type=total_value, per window of at most 30 days)`);
    cc.out.table(result.totals, totalColumns, json);
  }
  for (const distribution of result.distributions) {
    const total = distribution.entries.reduce((sum, e) => sum + e.value, 0);
    const top = distribution.entries.slice(0, flags.top);
    if (cc.out.isTTY) {
      const shown = top.length < distribution.entries.length ? `top ${top.length} of ${distribution.entries.length}` : `${top.length} entries`;
      cc.out.line(`\n${cc.out.color.bold(distribution.metric)} (${shown})`);
      cc.out.table(top, [
        { header: 'key', value: (e) => e.key },
        { header: 'value', value: (e) => e.value },
        { header: 'share', value: (e) => (total > 0 ? `${((e.value / total) * 100).toFixed(1)}%` : '') },
      ]);
    } else {
      cc.out.table(
        top.map((e) => ({ metric: distribution.metric, ...e })),
        entryColumns,
      );
    }
  }
}
