/**
 * Daily metrics as terminal line charts (asciichart), fitted to a
 * terminal: one chart per metric, stacked, sharing one date axis at the
 * bottom, every line at most `width - 1` cells (so that nothing wraps) and
 * the whole at most `height - 3` lines (a note on stderr, such as which
 * account was read, and the prompt keep theirs).
 *
 * asciichart draws one column per value, so the days are resampled to the
 * columns there are (linearly between days), and the date labels are put
 * under the columns their days landed on.
 */
import { createRequire } from 'node:module';
import type { ChalkInstance } from 'chalk';
import { textWidth, truncateToWidth } from '../render/text-width.js';
import { compactNumber, shortDate } from './numbers.js';

const asciichart = createRequire(import.meta.url)('asciichart') as typeof import('asciichart');

interface LineSeries {
  name: string;
  /** One value a day, in the order of `dates`; undefined where the day has none. */
  values: readonly (number | undefined)[];
}

export interface LineChartOptions {
  /** `YYYY-MM-DD`, one a day. */
  dates: readonly string[];
  series: readonly LineSeries[];
  /** The terminal's size in cells. */
  width: number;
  height: number;
  color: ChalkInstance;
}

/** The lines each chart takes besides its plot (its title), and the shared axis below them all. */
const TITLE_LINES = 1;
const AXIS_LINES = 2;
/** Lines for a note before the charts (which account was read: two rows on a narrow terminal), and one for the prompt after them. */
const KEPT_LINES = 3;
/** Fewer plot rows than this and a chart says nothing: it then scrolls rather than shrinks. */
const MIN_PLOT_ROWS = 3;
/** Enough room for a chart: the labels, the axis and a few days. */
const MIN_WIDTH = 20;

const PALETTE = ['cyan', 'green', 'yellow', 'magenta', 'blue', 'red'] as const;

/** Days without a value take their nearest neighbour's, so that the line stays whole; undefined when none has one. */
function filled(values: readonly (number | undefined)[]): number[] | undefined {
  const known = values.flatMap((value, i) => (value === undefined || !Number.isFinite(value) ? [] : [i]));
  if (known.length === 0) return undefined;
  return values.map((value, i) => {
    if (value !== undefined && Number.isFinite(value)) return value;
    const nearest = known.reduce((best, k) => (Math.abs(k - i) < Math.abs(best - i) ? k : best), known[0]!);
    return values[nearest]!;
  });
}

/**
 * `values` (one a day) over `columns` columns: each day on the column the
 * date axis puts it on, the columns between two days linear between them
 * (so every day's value, peaks included, is drawn as it is); more days
 * than columns, each column the largest of its days.
 */
export function resample(values: readonly number[], columns: number): number[] {
  if (values.length === 0 || columns <= 0) return [];
  if (values.length === 1) return Array.from({ length: columns }, () => values[0]!);
  if (values.length > columns) {
    return Array.from({ length: columns }, (_, j) => {
      const from = Math.floor((j * values.length) / columns);
      const to = Math.max(from + 1, Math.floor(((j + 1) * values.length) / columns));
      return Math.max(...values.slice(from, to));
    });
  }
  const out = new Array<number>(columns);
  for (let day = 0; day < values.length - 1; day++) {
    const start = columnOf(day, values.length, columns);
    const end = columnOf(day + 1, values.length, columns);
    for (let j = start; j <= end; j++) out[j] = values[day]! + ((values[day + 1]! - values[day]!) * (j - start)) / Math.max(1, end - start);
  }
  return out;
}

/** The column (0-based, from the axis) a day lands on. */
function columnOf(day: number, days: number, columns: number): number {
  if (days <= 1) return 0;
  if (days > columns) return Math.min(columns - 1, Math.floor((day * columns) / days));
  return Math.round((day * (columns - 1)) / (days - 1));
}

/** The axis row's value labels of a plot from `min` to `max` over `rows` rows, top first. */
function rowLabels(min: number, max: number, rows: number): string[] {
  // Rows a whole unit or more apart are labelled in whole numbers: counts of people read 34, not 34.4.
  const whole = rows > 1 && (max - min) / (rows - 1) >= 1;
  return Array.from({ length: rows }, (_, r) => {
    const value = rows === 1 ? max : max - (r * (max - min)) / (rows - 1);
    return compactNumber(whole ? Math.round(value) : value);
  });
}

/** Steps between labelled days that read well: every day, every other, ..., weekly, fortnightly, monthly. */
const DAY_STEPS = [1, 2, 3, 4, 5, 7, 14, 28, 56, 91, 182, 364];

/**
 * The date axis under the plots: a rule with ticks, and the dates under
 * their ticks, every so many days (as many as fit without touching), the
 * first and the last day always.
 */
function dateAxis(dates: readonly string[], gutter: number, columns: number, width: number): string[] {
  const label = dates.map(shortDate);
  const widest = Math.max(...label.map((l) => l.length));
  const perDay = dates.length <= 1 ? columns : (columns - 1) / (dates.length - 1);
  const step = DAY_STEPS.find((days) => days * perDay >= widest + 2) ?? Math.ceil((widest + 2) / perDay);
  const picked: number[] = [];
  for (let day = 0; day < dates.length; day += step) picked.push(day);
  const lastDay = dates.length - 1;
  if (picked.at(-1) !== lastDay) {
    // The last day replaces the labelled day before it when they would touch.
    if ((lastDay - picked.at(-1)!) * perDay < widest + 2 && picked.length > 1) picked.pop();
    picked.push(lastDay);
  }
  const rule = [...'─'.repeat(columns)];
  const under = Array.from({ length: gutter + columns }, () => ' ');
  let free = 0;
  for (const day of picked) {
    const column = columnOf(day, dates.length, columns);
    const text = label[day]!;
    const start = Math.min(Math.max(gutter - 1 + column - Math.floor(text.length / 2), free), width - 1 - text.length);
    if (start < free) continue;
    rule[column] = column === 0 ? '┼' : '┬';
    for (let i = 0; i < text.length; i++) under[start + i] = text[i]!;
    free = start + text.length + 2;
  }
  if (rule[0] === '─') rule[0] = '└';
  return [`${' '.repeat(gutter - 1)}${rule.join('')}`.trimEnd(), under.join('').trimEnd()];
}

/** The charts as lines of text, with colour codes when `color` has a level. */
export function lineCharts({ dates, series, width, height, color }: LineChartOptions): string[] {
  const usable = Math.max(MIN_WIDTH, width - 1);
  if (dates.length === 0 || series.length === 0) return [color.dim('(no days to chart)')];
  const perChart = Math.floor((height - KEPT_LINES - AXIS_LINES) / series.length) - TITLE_LINES;
  const rows = Math.max(MIN_PLOT_ROWS, perChart);
  const plots = series.map((s) => {
    const values = filled(s.values);
    if (!values) return { s, values, min: 0, max: 0 };
    let min = Math.min(...values);
    let max = Math.max(...values);
    // A flat line sits in the middle of a band around its value, not on a plot of no height.
    if (min === max) [min, max] = max === 0 ? [0, 1] : [min - Math.abs(min) * 0.1, max + Math.abs(max) * 0.1];
    return { s, values, min, max };
  });
  // One gutter for every chart, so that their axes line up with the date axis.
  const labelWidth = Math.max(...plots.map((p) => Math.max(...rowLabels(p.min, p.max, rows).map((l) => l.length))));
  const gutter = labelWidth + 2; // the label, a space, the axis
  const columns = Math.max(2, usable - gutter);
  const lines: string[] = [];
  plots.forEach((plot, index) => {
    const { s, values } = plot;
    const known = s.values.filter((v): v is number => v !== undefined && Number.isFinite(v));
    const last = known.at(-1);
    const summary =
      known.length === 0 ? 'no values' : `last ${compactNumber(last!)} · min ${compactNumber(Math.min(...known))} · max ${compactNumber(Math.max(...known))}`;
    const title = `${s.name}  ${summary}`;
    const cut = textWidth(title) > usable ? truncateToWidth(title, usable) : title;
    const name = cut.slice(0, s.name.length);
    lines.push(`${color.bold(name)}${color.dim(cut.slice(name.length))}`);
    if (!values) {
      for (let r = 0; r < rows; r++) lines.push(r === Math.floor(rows / 2) ? `${' '.repeat(gutter)}${color.dim('(no values in these days)')}` : '');
      return;
    }
    const labels = rowLabels(plot.min, plot.max, rows);
    const hue = PALETTE[index % PALETTE.length]!;
    // Scaled to the rows first, so that asciichart's rounding gives exactly `rows` rows, one label each.
    const top = rows - 1;
    const scaled = resample(values, columns).map((v) => ((v - plot.min) / (plot.max - plot.min)) * top);
    const chart = asciichart.plot(scaled, {
      min: 0,
      max: top,
      height: top,
      offset: 2,
      // asciichart marks its top row and the first value with a cross; a plain tick reads better on every row.
      symbols: ['┤', '┤', '╶', '╴', '─', '╰', '╭', '╮', '╯', '│'],
      colors: color.level > 0 ? [asciichart[hue]] : [],
      format: (_value, row) => `${(labels[row] ?? labels.at(-1)!).padStart(labelWidth)} `,
    });
    for (const line of chart.split('\n')) lines.push(line.trimEnd());
  });
  lines.push(...dateAxis(dates, gutter, columns, usable + 1));
  return lines;
}
