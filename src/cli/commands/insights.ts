/**
 * `miniapp insights ...`: media and account insights from the graph API
 * (spec 001) as tables, CSV or JSON.
 *
 * Only commander wiring and rendering live here; undici and the insights
 * modules load inside the actions, so `miniapp insights --help` stays
 * light. The metric catalogue is the exception: it is plain data with no
 * imports, and the help text lists it.
 */
import { randomBytes } from 'node:crypto';
import { Option, type Command } from 'commander';
import type { Bind } from '../main.js';
import type { CommandContext } from '../context.js';
import type { Column, Spinner } from '../output.js';
import { ConfigError, MiniappError, UsageError } from '../../errors.js';
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
  parseMetricList,
} from '../../insights/metrics.js';
import type { GraphClient } from '../../insights/client.js';
import type { Sleep } from '../../insights/throttle.js';

/** Same list as DEFAULT_MEDIA_FIELDS in insights/media.ts, kept here so that help loads nothing. */
const MEDIA_FIELDS_DEFAULT = ['id', 'media_type', 'timestamp', 'caption', 'like_count', 'comments_count', 'permalink'];
const DEFAULT_LIMIT = 25;
const DEFAULT_TOP = 10;

type Format = 'table' | 'csv' | 'json';

interface GraphOptions {
  maxRetries: number;
  timeout: string;
}

const GROUP_HELP = `
Metrics by media type (spec names; retired ones are still sent as asked):
${Object.entries(METRICS_BY_KIND)
  .map(([kind, metrics]) => `  ${kind.padEnd(15)} ${metrics.join(', ')}`)
  .join('\n')}
  account         ${[...ACCOUNT_METRICS, 'follower_demographics'].join(', ')}

Retired by the real API, with their successors:
${Object.entries(RETIRED_METRICS)
  .map(([metric, successors]) => `  ${metric.padEnd(20)} -> ${successors.join(', ')}`)
  .join('\n')}

Settings: graph-url (MINIAPP_GRAPH_URL), graph-version (MINIAPP_GRAPH_VERSION),
graph-token (MINIAPP_GRAPH_TOKEN), graph-account (MINIAPP_GRAPH_ACCOUNT).
The token travels only as the access_token query parameter and is never printed.
Throttled calls are retried with a back-off of 60 s doubled per retry
(--max-retries); from 80 % of the rate limit the client slows down.
MINIAPP_GRAPH_BACKOFF_MS shortens the 60 s base (a test aid).

Examples:
  miniapp insights accounts
  miniapp insights media --all --metrics reach,saved,shares --format csv --output media.csv
  miniapp insights post 17900000000000001
  miniapp insights account --metrics reach,follower_count --since 90d`;

function positiveInt(name: string, min = 1) {
  return (text: string): number => {
    const value = Number(text);
    if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min) {
      throw new UsageError(`${name} must be a whole number of at least ${min}; got "${text}"`);
    }
    return value;
  };
}

function withGraphOptions(command: Command): Command {
  return command
    .addOption(new Option('--max-retries <n>', 'retries when throttled, each waiting twice as long').default(3).argParser(positiveInt('--max-retries', 0)))
    .addOption(new Option('--timeout <duration>', 'time-out of each request').default('10s'));
}

function withFormat(command: Command): Command {
  return command
    .addOption(new Option('--format <format>', 'output format (default: table; with --output, from the file name)').choices(['table', 'csv', 'json']))
    .option('--output <file>', 'write the data to FILE (atomically) instead of stdout');
}

export function registerInsights(program: Command, bind: Bind): void {
  const insights = program
    .command('insights')
    .summary('media and account insights from the graph API, as tables, CSV or JSON')
    .description(
      'Read media, media insights and account insights of a business or creator account from the graph API ' +
        '(GET {graph-url}/{graph-version}/{object}). Insights of a media list come in the same request as the list ' +
        '(field expansion), so exporting 250 media costs 3 or 4 calls of the 200 an hour a developer app gets.',
    )
    .addHelpText('after', GROUP_HELP);

  withGraphOptions(
    insights
      .command('accounts')
      .description('business accounts the token reaches (/me/social_business_accounts), as id and name')
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
        .addOption(new Option('--limit <n>', `at most N media, newest first (default ${DEFAULT_LIMIT})`).argParser(positiveInt('--limit')).conflicts('all'))
        .option('--all', 'every media item')
        .option('--since <date>', 'only media posted on or after DATE (2026-08-23, an ISO time, or 90d ago)')
        .option('--until <date>', 'only media posted on or before DATE (a date includes that day)'),
    ),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp insights media\n  miniapp insights media --all --metrics reach,saved,shares --format csv > media.csv\n' +
        '  miniapp insights media --since 30d --metrics reach,video_views --json\n  miniapp insights media --all --output media.json',
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
        .addOption(new Option('--top <n>', 'entries of each distribution in a table').default(DEFAULT_TOP).argParser(positiveInt('--top'))),
    ),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp insights account --metrics reach,follower_count --since 90d\n' +
        '  miniapp insights account --metrics audience_country,audience_city --top 5\n' +
        '  miniapp insights account --since 2026-01-01 --until 2026-03-31 --format csv --output q1.csv',
    )
    .action(bind(runAccount));
}

/* ----------------------------------------------------------------- client */

interface Session {
  client: GraphClient;
  activity: Activity;
  close(): Promise<void>;
}

/**
 * The spinner of a command and the countdown of a throttled wait. On a
 * TTY (and not under --json) waits count down in the spinner; otherwise
 * each back-off is one warning line and pacing is silent.
 */
class Activity {
  #base: string;
  #waiting = false;

  constructor(
    private readonly cc: CommandContext,
    private readonly spinner: Spinner,
    readonly live: boolean,
    text: string,
  ) {
    this.#base = text;
  }

  static async start(cc: CommandContext, text: string): Promise<Activity> {
    const live = Boolean(cc.io.stderr.isTTY) && !cc.out.json;
    return new Activity(cc, await cc.out.spinner(text), live, text);
  }

  text(text: string): void {
    this.#base = text;
    if (!this.#waiting) this.spinner.text(text);
  }

  readonly sleep: Sleep = async (ms, why) => {
    const { formatDuration } = await import('../../duration.js');
    const label =
      why.reason === 'throttled'
        ? `rate limited by the graph API (code ${why.code ?? '?'}); retry ${why.attempt} of ${why.maxRetries}`
        : `graph API usage at ${Math.round(why.percent ?? 0)}%; pacing`;
    if (!this.live) {
      if (why.reason === 'throttled') this.cc.out.warn(`${label} in ${formatDuration(ms)}`);
      await new Promise((resolve) => setTimeout(resolve, ms));
      return;
    }
    const end = Date.now() + ms;
    const show = () => this.spinner.text(`${label} in ${formatDuration(Math.max(0, end - Date.now()))}`);
    this.#waiting = true;
    show();
    const timer = setInterval(show, 1000);
    try {
      await new Promise((resolve) => setTimeout(resolve, ms));
    } finally {
      clearInterval(timer);
      this.#waiting = false;
      this.spinner.text(this.#base);
    }
  };

  stop(): void {
    this.spinner.stop();
  }
}

async function openSession(cc: CommandContext, command: Command, spinnerText: string): Promise<Session> {
  const options = command.opts<GraphOptions>();
  const { parseDuration } = await import('../../duration.js');
  const timeoutMs = parseDuration(options.timeout, '--timeout');
  if (timeoutMs <= 0) throw new UsageError('--timeout must be more than 0');
  const baseUrl = (await cc.settings.get('graph-url')).value!;
  const version = (await cc.settings.get('graph-version')).value!;
  const token = await cc.settings.require('graph-token');
  const backoffText = cc.env.MINIAPP_GRAPH_BACKOFF_MS?.trim();
  let backoffMs: number | undefined;
  if (backoffText) {
    backoffMs = Number(backoffText);
    if (!/^\d+$/.test(backoffText)) throw new ConfigError(`MINIAPP_GRAPH_BACKOFF_MS must be a whole number of milliseconds; got "${backoffText}"`);
  }
  const { GraphClient } = await import('../../insights/client.js');
  const activity = await Activity.start(cc, spinnerText);
  const client = new GraphClient({
    baseUrl,
    version,
    token,
    timeoutMs,
    maxRetries: options.maxRetries,
    ...(backoffMs === undefined ? {} : { backoffMs }),
    sleep: activity.sleep,
    onWarn: (message) => cc.out.warn(message),
    ...(cc.debug
      ? {
          onRequest: (log) =>
            cc.out.info(cc.out.errColor.dim(`GET ${log.url} -> ${log.status ?? 'no answer'} in ${Math.round(log.ms)}ms${log.attempt ? ` (retry ${log.attempt})` : ''}`)),
        }
      : {}),
    userAgent: `miniapp/${cc.version}`,
  });
  return {
    client,
    activity,
    close: async () => {
      activity.stop();
      await client.close();
    },
  };
}

async function withSession<T>(cc: CommandContext, command: Command, spinnerText: string, work: (session: Session) => Promise<T>): Promise<T> {
  const session = await openSession(cc, command, spinnerText);
  try {
    return await work(session);
  } finally {
    await session.close();
  }
}

async function accountOf(cc: CommandContext, session: Session, flag: string | undefined): Promise<string> {
  const { resolveAccount } = await import('../../insights/accounts.js');
  const account = await resolveAccount(session.client, { flag, setting: flag ? undefined : (await cc.settings.get('graph-account')).value });
  if (account.source === 'lookup' && cc.io.stderr.isTTY) {
    cc.out.info(cc.out.errColor.dim(`using ${account.id}${account.name ? ` (${account.name})` : ''}, the only business account this token reaches`));
  }
  return account.id;
}

/* ----------------------------------------------------------------- output */

function formatOf(cc: CommandContext, format: Format | undefined, output: string | undefined): Format {
  if (cc.out.json) {
    if (format !== undefined && format !== 'json') throw new UsageError(`--json and --format ${format} contradict each other; give one of them`);
    return 'json';
  }
  if (format !== undefined) {
    if (format === 'table' && output !== undefined) throw new UsageError('a table is for the terminal: use --format csv or json with --output');
    return format;
  }
  if (output !== undefined) return /\.json$/i.test(output) ? 'json' : 'csv';
  return 'table';
}

/** Writes next to the target, then renames: a failure never leaves half a file. */
async function writeAtomically(file: string, text: string): Promise<void> {
  const { writeFile, rename, rm } = await import('node:fs/promises');
  const { basename, dirname, join } = await import('node:path');
  const temp = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await writeFile(temp, text, { flag: 'wx' });
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw new MiniappError(`cannot write ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, {
      hint: 'check that the directory exists and is writable',
    });
  }
}

interface Emit<Row> {
  format: Format;
  output: string | undefined;
  rows: readonly Row[];
  columns: readonly Column<Row>[];
  json: unknown;
  what: string;
}

/** Data to stdout in the chosen format, or to --output with a one-line note on stderr. */
async function emit<Row>(cc: CommandContext, { format, output, rows, columns, json, what }: Emit<Row>): Promise<void> {
  if (output !== undefined) {
    await writeAtomically(output, format === 'json' ? `${JSON.stringify(json, null, 2)}\n` : cc.out.csv(rows, columns));
    cc.out.info(`wrote ${rows.length} ${what} to ${output}`);
    return;
  }
  if (format === 'csv') cc.out.write(cc.out.csv(rows, columns));
  else if (format === 'json') cc.out.printJson(json);
  else cc.out.table(rows, columns, json);
}

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
  const accounts = await withSession(cc, command, 'reading business accounts', async ({ client }) => {
    const { listBusinessAccounts } = await import('../../insights/accounts.js');
    return listBusinessAccounts(client);
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
}

function fieldsFlag(text: string | undefined): string[] {
  if (text === undefined) return [...MEDIA_FIELDS_DEFAULT];
  const fields = [...new Set(text.split(',').map((f) => f.trim()).filter(Boolean))];
  const bad = fields.find((f) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(f));
  if (bad !== undefined) {
    throw new UsageError(`--fields takes plain field names; got "${bad}"`, { hint: bad.startsWith('insights') ? 'ask for insights with --metrics' : undefined });
  }
  return ['id', ...fields.filter((f) => f !== 'id')];
}

async function runMedia(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<MediaFlags>();
  const format = formatOf(cc, flags.format, flags.output);
  const fields = fieldsFlag(flags.fields);
  const metrics = flags.metrics === false ? [] : metricsFlag(flags.metrics, DEFAULT_MEDIA_METRICS);
  const now = cc.now().getTime();
  const { sinceOf, untilOf } = await import('../../insights/dates.js');
  const since = flags.since === undefined ? undefined : sinceOf(flags.since, now);
  const until = flags.until === undefined ? undefined : untilOf(flags.until, now) - 1;
  if (since !== undefined && until !== undefined && since > until) throw new UsageError('--since must be before --until');
  warnUnknown(cc, metrics, isKnownMediaMetric);

  const result = await withSession(cc, command, 'reading media', async (session) => {
    const account = await accountOf(cc, session, flags.account);
    const { exportMedia } = await import('../../insights/media.js');
    return exportMedia(session.client, {
      account,
      fields,
      metrics,
      limit: flags.all ? undefined : (flags.limit ?? DEFAULT_LIMIT),
      since,
      until,
      onProgress: (rows) => session.activity.text(`reading media: ${rows} so far (${session.client.calls} calls)`),
      onWarn: (message) => cc.out.warn(message),
    });
  });

  const { unsupportedWarning } = await import('../../insights/media.js');
  const unsupported = unsupportedWarning(result.unsupported);
  if (unsupported) cc.out.warn(unsupported);
  if (result.failed.length > 0) {
    const sample = result.failed.slice(0, 5).map((f) => `${f.id} (${f.reason})`).join(', ');
    cc.out.warn(`insights of ${result.failed.length} item${result.failed.length === 1 ? '' : 's'} failed and stay empty: ${sample}${result.failed.length > 5 ? ', ...' : ''}`);
  }
  if (cc.debug) cc.out.info(cc.out.errColor.dim(`${result.rows.length} media in ${result.calls} calls`));

  type Row = (typeof result.rows)[number];
  const columns: Column<Row>[] = [
    ...fields.map((field) => ({
      header: field,
      value: (row: Row) => row.fields[field],
      // On a narrow terminal captions give way first, then links; IDs, types and numbers stay whole.
      ...(field === 'caption' ? { shrink: 2 } : field === 'permalink' || field === 'media_url' || field === 'thumbnail_url' ? { shrink: 1 } : {}),
    })),
    ...metrics.map((metric) => ({ header: metric, value: (row: Row) => row.metrics[metric] })),
  ];
  const json = result.rows.map((row) => ({
    ...Object.fromEntries(fields.map((field) => [field, row.fields[field] ?? null])),
    ...(metrics.length > 0 ? { insights: row.metrics } : {}),
  }));
  await emit(cc, { format, output: flags.output, rows: result.rows, columns, json, what: 'media rows' });
}

async function runObjectInsights(cc: CommandContext, command: Command, kind: 'post' | 'story' | 'reel'): Promise<void> {
  const [id] = command.processedArgs as [string];
  const flags = command.opts<{ metrics?: string }>();
  const explicit = flags.metrics === undefined ? undefined : metricsFlag(flags.metrics, []);
  if (explicit) warnUnknown(cc, explicit, isKnownMediaMetric);
  const result = await withSession(cc, command, `reading insights of ${kind} ${id}`, async ({ client }) => {
    const { readMediaKind, readObjectInsights } = await import('../../insights/media.js');
    let metrics = explicit ?? [...defaultMetricsFor(kind)];
    if (!explicit && kind === 'post') {
      // Not every post answers every post metric: ask only what its type answers.
      const { supports } = await import('../../insights/metrics.js');
      const mediaKind = await readMediaKind(client, id);
      metrics = metrics.filter((m) => supports(mediaKind, m));
    }
    return readObjectInsights(client, id, metrics, (message) => cc.out.warn(message));
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
  const [id] = command.processedArgs as [string];
  const fields = fieldsFlag(command.opts<{ fields?: string }>().fields);
  const item = await withSession(cc, command, `reading media ${id}`, async ({ client }) => {
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
}

async function runAccount(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<AccountFlags>();
  const format = formatOf(cc, flags.format, flags.output);
  const metrics = metricsFlag(flags.metrics, DEFAULT_ACCOUNT_METRICS);
  const dailyAsked = metrics.some((m) => !isAudienceMetric(m));
  const audienceAsked = metrics.some((m) => isAudienceMetric(m));
  if (format === 'csv' && dailyAsked && audienceAsked) {
    throw new UsageError('a CSV holds one table: ask for daily metrics or audience_* metrics, not both, with --format csv', {
      hint: 'run the command twice, once with each kind of metric',
    });
  }
  warnUnknown(cc, metrics, isKnownAccountMetric);
  const now = cc.now().getTime();
  const { sinceOf, untilOf, startOfUtcDay } = await import('../../insights/dates.js');
  const until = flags.until === undefined ? startOfUtcDay(now) : untilOf(flags.until, now);
  const since = flags.since === undefined ? startOfUtcDay(now) - 30 * 86_400_000 : sinceOf(flags.since, now);
  if (dailyAsked && since >= until) throw new UsageError('--since must be before --until');

  const result = await withSession(cc, command, 'reading account insights', async (session) => {
    const account = await accountOf(cc, session, flags.account);
    const { readAccountInsights } = await import('../../insights/account.js');
    return readAccountInsights(session.client, {
      account,
      metrics,
      period: flags.period,
      since,
      until,
      breakdown: flags.breakdown,
      onWarn: (message) => cc.out.warn(message),
      onProgress: (done, windows) => session.activity.text(`reading account insights: window ${done} of ${windows}`),
    });
  });
  if (cc.debug) cc.out.info(cc.out.errColor.dim(`${result.days.length} days in ${result.windows} windows, ${result.calls} calls`));

  type Day = (typeof result.days)[number];
  const dayColumns: Column<Day>[] = [
    { header: 'date', value: (d) => d.date },
    ...result.dailyMetrics.map((metric) => ({ header: metric, value: (d: Day) => d.values[metric] })),
  ];
  const json = {
    account: result.account,
    period: result.period,
    ...(dailyAsked ? { since: result.since, until: result.until, days: result.days.map((d) => ({ date: d.date, ...d.values })) } : {}),
    ...(result.totals.length > 0 ? { totals: result.totals } : {}),
    ...(audienceAsked ? { audience: Object.fromEntries(result.distributions.map((d) => [d.metric, d.entries])) } : {}),
  };
  if (result.totals.length > 0 && format !== 'json') {
    cc.out.warn(
      `the API answered ${[...new Set(result.totals.map((t) => t.metric))].join(', ')} with window totals, not daily values; see them with --format json`,
    );
  }

  type Entry = { metric: string; key: string; value: number };
  const entryColumns: Column<Entry>[] = [
    { header: 'metric', value: (e) => e.metric },
    { header: 'key', value: (e) => e.key },
    { header: 'value', value: (e) => e.value },
  ];
  if (format === 'json' || format === 'csv' || flags.output !== undefined) {
    if (dailyAsked || format === 'json') {
      await emit(cc, { format, output: flags.output, rows: result.days, columns: dayColumns, json, what: 'days' });
    } else {
      const entries = result.distributions.flatMap((d) => d.entries.map((e) => ({ metric: d.metric, ...e })));
      await emit(cc, { format, output: flags.output, rows: entries, columns: entryColumns, json, what: 'entries' });
    }
    return;
  }

  // Tables: the days, then each distribution's top entries, largest first.
  if (dailyAsked) cc.out.table(result.days, dayColumns, json);
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
