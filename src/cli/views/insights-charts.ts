/**
 * Insights as pictures: `insights account --chart` (line charts fitted to
 * the terminal), `insights media --chart METRIC` (a bar chart of the top
 * media), and `--format html` of both (one self-contained page). Loaded
 * only by those flags, so the table paths never load asciichart or uPlot.
 */
import type { CommandContext } from '../context.js';
import type { AccountInsights } from '../../insights/account.js';
import type { MediaRow } from '../../insights/media.js';
import { RefusedError, UsageError } from '../../errors.js';
import { writeAtomically } from '../terminal/files.js';
import { barChart } from '../charts/bar-chart.js';
import { lineCharts } from '../charts/line-chart.js';
import { htmlReport, type Report, type ReportChart } from '../charts/html-report.js';

/** The size to fit: the terminal's, or 80x24 when it does not say. */
function terminalSize(cc: CommandContext): { width: number; height: number } {
  const stdout = cc.io.stdout as { columns?: number; rows?: number };
  return { width: stdout.columns || 80, height: stdout.rows || 24 };
}

/** What a refused --chart says, in one line: where its picture can go instead. */
export function checkChartable(cc: CommandContext, flags: { format?: string | undefined; output?: string | undefined }, flag: string): void {
  if (cc.out.json || flags.format !== undefined || flags.output !== undefined) {
    throw new UsageError(`${flag} draws on the terminal; leave out --json, --format and --output (for a file, use --format html --output report.html)`);
  }
  if (!cc.io.stdout.isTTY) {
    throw new RefusedError(`${flag} draws on a terminal; piped or redirected, use --format html --output report.html, or --format csv for the data`);
  }
}

export function drawAccountCharts(cc: CommandContext, result: AccountInsights): void {
  const { width, height } = terminalSize(cc);
  const lines = lineCharts({
    dates: result.days.map((d) => d.date),
    series: result.dailyMetrics.map((metric) => ({ name: metric, values: result.days.map((d) => d.values[metric] ?? undefined) })),
    width,
    height,
    color: cc.out.color,
  });
  cc.out.write(`${lines.join('\n')}\n`);
}

/** The media with the largest `metric` first (those without a value last), as many as fit under the title. */
export function drawMediaChart(cc: CommandContext, rows: readonly MediaRow[], metric: string): void {
  const { width, height } = terminalSize(cc);
  // The title, the bars, a note before them (which account was read: two rows on a narrow terminal) and the prompt.
  const top = topMedia(rows, metric).slice(0, Math.max(3, height - 4));
  const lines = barChart({
    title: `top ${top.length} of ${rows.length} media by ${metric}`,
    bars: top.map((row) => ({ label: captionOf(row), note: mediaType(row), value: row.metrics[metric] ?? undefined })),
    width,
    color: cc.out.color,
  });
  cc.out.write(`${lines.join('\n')}\n`);
}

function topMedia(rows: readonly MediaRow[], metric: string): MediaRow[] {
  return [...rows].sort((a, b) => (b.metrics[metric] ?? -Infinity) - (a.metrics[metric] ?? -Infinity));
}

/** The caption's first line, else the ID. */
function captionOf(row: MediaRow): string {
  const caption = typeof row.fields.caption === 'string' ? row.fields.caption.split(/\r?\n/)[0]!.trim() : '';
  return caption || row.id;
}

function mediaType(row: MediaRow): string {
  return typeof row.fields.media_type === 'string' ? row.fields.media_type : (row.kind ?? '');
}

/** The report to --output, or to stdout when that is not a terminal. */
async function writeReport(cc: CommandContext, output: string | undefined, report: Report): Promise<void> {
  const html = htmlReport(report);
  if (output === undefined) {
    if (cc.io.stdout.isTTY) throw new UsageError('an HTML report is for a file: add --output report.html (or redirect stdout)');
    cc.out.write(html);
    return;
  }
  await writeAtomically(output, html);
  cc.out.info(`wrote an HTML report of ${report.charts.length} chart${report.charts.length === 1 ? '' : 's'} to ${output}`);
}

export async function writeAccountReport(cc: CommandContext, output: string | undefined, result: AccountInsights): Promise<void> {
  const charts: ReportChart[] = result.dailyMetrics.map((metric) => ({
    kind: 'line',
    title: metric,
    dates: result.days.map((d) => d.date),
    values: result.days.map((d) => d.values[metric] ?? null),
  }));
  const tables = [];
  if (result.days.length > 0) {
    tables.push({
      title: 'days',
      headers: ['date', ...result.dailyMetrics],
      rows: result.days.map((d) => [d.date, ...result.dailyMetrics.map((m) => d.values[m] ?? null)]),
    });
  }
  for (const distribution of result.distributions) {
    tables.push({ title: distribution.metric, headers: ['key', 'value'], rows: distribution.entries.map((e) => [e.key, e.value]) });
  }
  await writeReport(cc, output, {
    title: 'Account insights',
    account: result.account,
    range: result.days.length > 0 ? `${result.since} to ${result.until} (${result.period})` : result.period,
    generatedAt: cc.now().toISOString(),
    charts,
    tables,
  });
}

export async function writeMediaReport(
  cc: CommandContext,
  output: string | undefined,
  options: { account: string; range: string; rows: readonly MediaRow[]; fields: readonly string[]; metrics: readonly string[]; chart: string | undefined },
): Promise<void> {
  const { rows, fields, metrics } = options;
  const metric = options.chart ?? metrics[0];
  const charts: ReportChart[] = [];
  if (metric !== undefined) {
    const top = topMedia(rows, metric).slice(0, 25);
    charts.push({
      kind: 'bars',
      title: `top ${top.length} media by ${metric}`,
      labels: top.map(captionOf),
      notes: top.map(mediaType),
      values: top.map((r) => r.metrics[metric] ?? null),
    });
  }
  await writeReport(cc, output, {
    title: 'Media insights',
    account: options.account,
    range: options.range,
    generatedAt: cc.now().toISOString(),
    charts,
    tables: [
      {
        title: `${rows.length} media`,
        headers: [...fields, ...metrics],
        rows: rows.map((r) => [...fields.map((f) => r.fields[f] ?? null), ...metrics.map((m) => r.metrics[m] ?? null)]),
      },
    ],
  });
}
