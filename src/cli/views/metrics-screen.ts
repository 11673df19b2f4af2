/**
 * `miniapp monitor metrics` on a terminal: one screen, redrawn in place
 * like `watch`, never taller or wider than the terminal.
 *
 *   miniapp http://127.0.0.1:3000
 *   2026-12-07T04:47:38.006Z · every 5s · Ctrl-C stops
 *   series                                              value    per second
 *   miniapp_http_requests_in_flight                         0
 *   miniapp_http_requests_total
 *     {method="GET",route="/health",status="200"}           12           2.4
 *
 * A metric with labels is its name on a line, then a line for each label
 * set under it: a series name is never cut (two label sets cut alike would
 * look like one series), and a label set too long for its column takes
 * lines of its own, broken after a comma. What the screen cannot hold is
 * counted on its last line rather than scrolled off, which would leave a
 * copy of the table in the terminal's history at every redraw.
 */
import type { ChalkInstance } from 'chalk';
import type { MetricData } from '../../monitoring/client.js';
import { formatDuration } from '../../duration.js';

/** Series whose value only grows, where a rate per second says more than the value. */
const CUMULATIVE = /(_total|_count|_sum|_bucket|_created)(\{|$)/;

export interface Snapshot {
  at: number;
  metrics: Record<string, number>;
}

export interface MetricsFrameOptions {
  data: MetricData;
  /** When `data` was taken (ms). */
  at: number;
  previous: Snapshot | undefined;
  intervalMs: number;
  buckets: boolean;
  width: number;
  /** Rows of the terminal; undefined: as many lines as it takes. */
  height: number | undefined;
  color: ChalkInstance;
}

const number = (value: number) => (Number.isInteger(value) ? String(value) : value.toPrecision(6).replace(/\.?0+$/, ''));

/** The lines of one frame, each narrower than `width`, at most `height - 1` of them. */
export function metricsFrame({ data, at, previous, intervalMs, buckets, width, height, color: c }: MetricsFrameOptions): string[] {
  const usable = Math.max(20, width - 1);
  const seconds = previous ? Math.max((at - previous.at) / 1000, 0.001) : undefined;
  const series = Object.keys(data.metrics)
    .filter((key) => buckets || !/_bucket(\{|$)/.test(key))
    .sort();
  // Each series as its metric's name and its label set ('' for none), in order; a name is a heading once.
  const rows = series.map((key) => {
    const brace = key.indexOf('{');
    return { key, name: brace < 0 ? key : key.slice(0, brace), labels: brace < 0 ? '' : key.slice(brace) };
  });
  const numbers = 2 + 12 + 2 + 12;
  const widest = Math.max(6, ...rows.map((row) => (row.labels ? 2 + row.labels.length : row.name.length)));
  const nameWidth = Math.max(12, Math.min(usable - numbers, widest));
  const lines = [...title(data.service_name, [new Date(at).toISOString(), `every ${formatDuration(intervalMs)}`, 'Ctrl-C stops'], usable, c)];
  lines.push(c.bold(`${'series'.padEnd(nameWidth)}  ${'value'.padStart(12)}  ${'per second'.padStart(12)}`));
  const shownValue = (key: string) => {
    const value = data.metrics[key]!;
    const before = previous?.metrics[key];
    const rate = seconds !== undefined && before !== undefined && CUMULATIVE.test(key) ? number((value - before) / seconds) : '';
    return `  ${number(value).padStart(12)}  ${rate.padStart(12)}`.trimEnd();
  };
  let heading: string | undefined;
  for (const row of rows) {
    const text = row.labels ? row.labels : row.name;
    if (row.labels && heading !== row.name) lines.push(...wrapSeries(row.name, usable));
    heading = row.labels ? row.name : undefined;
    const indent = row.labels ? '  ' : '';
    const parts = wrapSeries(`${indent}${text}`, indent ? nameWidth : usable, indent);
    const last = parts.pop()!;
    lines.push(...parts);
    if (last.length <= nameWidth) lines.push(`${last.padEnd(nameWidth)}${shownValue(row.key)}`);
    else lines.push(last, `${''.padEnd(nameWidth)}${shownValue(row.key)}`);
  }
  if (series.length === 0) lines.push(c.dim('(no series match --name)'));
  if (height === undefined || lines.length <= height - 1) return lines;
  const shown = Math.max(1, height - 2);
  const rest = lines.length - shown;
  return [...lines.slice(0, shown), c.dim(`… ${rest} more line${rest === 1 ? '' : 's'} (a taller terminal, --name or --json shows them)`.slice(0, usable))];
}

/** The service's name, then when and how often, on one line where they fit, else on as few as they fit on. */
function title(service: string, notes: readonly string[], width: number, c: ChalkInstance): string[] {
  const whole = `${service}  ${notes.join(' · ')}`;
  if (whole.length <= width) return [`${c.bold(service)}  ${c.dim(notes.join(' · '))}`];
  const lines = [c.bold(service)];
  let current = '';
  for (const note of notes) {
    if (current && current.length + 3 + note.length > width) {
      lines.push(c.dim(current));
      current = note;
    } else current = current ? `${current} · ${note}` : note;
  }
  lines.push(c.dim(current));
  return lines;
}

/** A series name in lines of at most `width` characters, broken after a label's comma where it can be; the lines after the first indented by `indent` and two more. */
function wrapSeries(key: string, width: number, indent = ''): string[] {
  const lines: string[] = [];
  const more = `${indent}  `;
  let rest = key;
  while (rest.length > width) {
    const comma = rest.lastIndexOf(',', width - 1);
    const at = comma > more.length ? comma + 1 : width;
    lines.push(rest.slice(0, at));
    rest = `${more}${rest.slice(at)}`;
  }
  lines.push(rest);
  return lines;
}

/**
 * What draws a frame over the last one: home, each line cleared to its end,
 * and the rest of the screen cleared after. Only the first frame clears the
 * whole screen (a terminal may keep what a clear-screen removed, tmux among
 * them, and a clear at each redraw would leave a copy each time).
 */
export function frameText(lines: readonly string[], first: boolean): string {
  return `${first ? '\x1b[H\x1b[2J' : '\x1b[H'}${lines.map((line) => `${line}\x1b[K`).join('\n')}\n\x1b[J`;
}
