/**
 * `miniapp monitor dashboard`: a full-screen live view of a running serve,
 * like btop or k9s. Two streams of monitoring.v1 (metric snapshots every
 * --interval, and the log followed), each followed across restarts of
 * serve; the numbers come from dashboard-model.ts, the sparklines from
 * sparkly. The screen is the terminal's alternate buffer, redrawn in
 * place; `q` or Ctrl-C (read in raw mode), SIGTERM or a closed terminal
 * end it and give the terminal back as it was: main buffer, cursor shown,
 * cooked mode.
 */
import type { ChalkInstance } from 'chalk';
import type { CommandContext } from '../context.js';
import type { LogEntry, MonitoringClient } from '../../monitoring/client.js';
import { formatDuration } from '../../duration.js';
import { reconnectNotice } from '../connect/grpc-connection.js';
import { LogFormatter } from '../render/log-format.js';
import { textWidth, truncateToWidth } from '../render/text-width.js';
import { compactNumber } from '../charts/numbers.js';
import { DashboardModel, type DashboardState } from './dashboard-model.js';

export interface DashboardOptions {
  /** What the header names: serve's gRPC address. */
  address: string;
  intervalMs: number;
  /** A fresh client of serve's monitoring service per connection. */
  client: () => MonitoringClient;
  /** Time limit of connecting. */
  connectMs: number;
}

/** How far back the error counts and the sparklines reach at most. */
const WINDOW_MS = 5 * 60_000;
/** Log lines kept for the bottom of the screen (a tall terminal shows more). */
const KEPT_LOG_LINES = 200;
const LABEL = 15;
const VALUE = 9;

type Status = { state: 'connecting' } | { state: 'live' } | { state: 'reconnecting'; note: string };

interface Terminal {
  write(chunk: string): unknown;
  columns?: number | undefined;
  rows?: number | undefined;
  on?(event: 'resize', listener: () => void): unknown;
  off?(event: 'resize', listener: () => void): unknown;
}

interface Keys {
  isTTY?: boolean | undefined;
  setRawMode?(raw: boolean): unknown;
  on?(event: 'data', listener: (chunk: Buffer | string) => void): unknown;
  off?(event: 'data', listener: (chunk: Buffer | string) => void): unknown;
  resume?(): unknown;
  pause?(): unknown;
}

const rate = (value: number | undefined) => (value === undefined ? '-' : value < 10 ? value.toFixed(1) : compactNumber(value));
const latency = (seconds: number | undefined) =>
  seconds === undefined ? '-' : seconds < 1 ? `${(seconds * 1000).toFixed(seconds < 0.01 ? 1 : 0)}ms` : `${seconds.toFixed(2)}s`;

function counts(map: Map<string, number>): string {
  return (
    [...map]
      .sort((a, b) => b[1] - a[1])
      .map(([key, n]) => `${key}×${n}`)
      .join(' ') || 'none'
  );
}

/** The screen's lines for a state, each at most `width - 1` cells, `height` lines in all. */
function dashboardLines(options: {
  state: DashboardState;
  logs: readonly string[];
  status: Status;
  address: string;
  intervalMs: number;
  width: number;
  height: number;
  color: ChalkInstance;
  spark: (values: readonly (number | '')[]) => string;
}): string[] {
  const { state, status, color: c } = options;
  const width = Math.max(40, options.width - 1);
  const height = Math.max(10, options.height);
  const clip = (line: string) => (textWidth(line) > width ? truncateToWidth(line, width) : line);
  const statusText =
    status.state === 'live' ? c.green('live') : status.state === 'connecting' ? c.yellow('connecting') : c.yellow.bold(`reconnecting · ${status.note}`);
  const title = `${c.bold('miniapp serve')} ${options.address} · every ${formatDuration(options.intervalMs)} · ${statusText}`;
  const help = c.dim('q quits');
  const gap = width - textWidth(title) - textWidth(help);
  const lines = [clip(gap >= 1 ? `${title}${' '.repeat(gap)}${help}` : title)];

  const sparkWidth = Math.max(8, width - LABEL - VALUE - 2);
  const shown = state.history.slice(-sparkWidth);
  const span = shown.length > 1 ? shown.at(-1)!.at - shown[0]!.at + options.intervalMs : 0;
  const last = state.history.at(-1);
  lines.push(c.dim(`${''.padEnd(LABEL)}${'now'.padStart(VALUE)}  ${span > 0 ? `the last ${formatDuration(span)}` : 'waiting for a second snapshot'}`));
  const row = (label: string, value: string, values: (number | undefined)[]) =>
    clip(`${label.padEnd(LABEL)}${value.padStart(VALUE)}  ${c.cyan(options.spark(values.map((v) => (v === undefined ? '' : v))))}`);
  // Each sparkline: its label, how its latest value reads, and the field of a point it plots.
  const sparklines = [
    ['HTTP req/s', rate, 'httpRate'],
    ['HTTP p99', latency, 'httpP99'],
    ['gRPC req/s', rate, 'grpcRate'],
    ['gRPC p99', latency, 'grpcP99'],
    ['orders/min', rate, 'ordersPerMinute'],
    ['payments/min', rate, 'paymentsPerMinute'],
  ] as const;
  for (const [label, format, field] of sparklines) {
    const values = shown.map((p) => p[field]);
    lines.push(row(label, format(last?.[field]), values));
  }
  const window = state.spanMs > 0 ? formatDuration(state.spanMs) : formatDuration(options.intervalMs);
  const n = (value: number | undefined) => (value === undefined ? '-' : String(value));
  lines.push(clip(`${'in flight'.padEnd(LABEL)}HTTP ${n(state.httpInFlight)} · gRPC ${n(state.grpcInFlight)}`));
  const errors = `HTTP ${counts(state.httpErrors)} · gRPC ${counts(state.grpcErrors)}`;
  lines.push(clip(`${`errors ${window}`.padEnd(LABEL)}${state.httpErrors.size + state.grpcErrors.size > 0 ? c.red(errors) : errors}`));
  const failing = `${state.webhooksFailing} failing (${window})`;
  lines.push(clip(`${'webhooks'.padEnd(LABEL)}${n(state.webhooksPending)} pending · ${state.webhooksFailing > 0 ? c.red(failing) : failing}`));
  const ready = state.ready === undefined ? c.dim('unknown') : state.ready ? c.green('ready') : c.red.bold('NOT READY');
  lines.push(clip(`${'database'.padEnd(LABEL)}${ready}`));
  lines.push(c.dim(`── log ${'─'.repeat(width - 7)}`));
  const room = Math.max(0, height - lines.length);
  const logs = options.logs.slice(-room).map(clip);
  return [...lines, ...logs];
}

/** Runs until `q`, Ctrl-C or SIGTERM; rejects (after restoring the terminal) when serve cannot be reached at all. */
export async function runDashboard(cc: CommandContext, options: DashboardOptions): Promise<void> {
  const [{ default: sparkly }, { withReconnects }] = await Promise.all([import('sparkly'), import('../../grpc/client/reconnect.js')]);
  const screen = cc.io.stdout as Terminal;
  const keys = cc.io.stdin as Keys;
  const model = new DashboardModel(WINDOW_MS);
  const formatter = new LogFormatter({ color: cc.out.color });
  const logs: string[] = [];
  let status: Status = { state: 'connecting' };
  const controller = new AbortController();
  const stop = () => controller.abort();
  void cc.waitForShutdown().then(stop);

  let scheduled: NodeJS.Timeout | undefined;
  // A failure while drawing ends the view like `q` does, and is thrown once the terminal is given back.
  let failure: unknown;
  const draw = () => {
    try {
      paint();
    } catch (error) {
      failure ??= error;
      stop();
    }
  };
  const paint = () => {
    if (scheduled) clearTimeout(scheduled);
    scheduled = undefined;
    if (controller.signal.aborted) return;
    const lines = dashboardLines({
      state: model.state(),
      logs,
      status,
      address: options.address,
      intervalMs: options.intervalMs,
      width: screen.columns || 80,
      height: screen.rows || 24,
      color: cc.out.color,
      spark: (values) => sparkly(values, { minimum: 0 }),
    });
    // Home, each line cleared to its end, the rest of the screen cleared: no flicker, no leftovers after a resize.
    screen.write(`\x1b[H${lines.map((line) => `${line}\x1b[K`).join('\r\n')}\x1b[J`);
  };
  const soon = () => {
    scheduled ??= setTimeout(draw, 100);
  };
  const onKey = (chunk: Buffer | string) => {
    const text = chunk.toString();
    if (text.includes('q') || text.includes('Q') || text.includes('\x03')) stop();
  };

  const raw = Boolean(keys.isTTY && keys.setRawMode);
  screen.write('\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J');
  if (raw) keys.setRawMode!(true);
  keys.on?.('data', onKey);
  keys.resume?.();
  screen.on?.('resize', draw);
  draw();

  let lastLog = -Infinity;
  const follow = (run: (client: MonitoringClient, signal: AbortSignal) => Promise<void>, main: boolean) =>
    withReconnects({
      signal: controller.signal,
      connect: () => {
        const client = options.client();
        return { client, ready: () => client.ready(options.connectMs), close: () => client.close() };
      },
      run: async ({ client }, signal) => {
        await run(client, signal);
        return 'again';
      },
      onConnected: ({ reconnected }) => {
        if (!main) return;
        if (reconnected) model.restart();
        status = { state: 'live' };
        draw();
      },
      onRetry: (retry) => {
        if (!main) return;
        status = { state: 'reconnecting', note: reconnectNotice('stream', retry).replace(/^stream lost /, '') };
        draw();
      },
    });

  try {
    await Promise.all([
      follow(
        (client, signal) =>
          client.metrics(
            { interval_ms: options.intervalMs },
            (data) => {
              const at = Number(data.timestamp.seconds) * 1000 + Math.floor(data.timestamp.nanos / 1e6);
              model.add(at || Date.now(), data.metrics);
              draw();
            },
            signal,
          ),
        true,
      ),
      follow(
        (client, signal) =>
          client.logs(
            { min_level: 'LOG_LEVEL_INFO', tail: KEPT_LOG_LINES, follow: true },
            (entry) => {
              // After a reconnection the kept lines come again: only those after the last one shown are new.
              const at = timeOf(entry);
              if (at < lastLog) return;
              lastLog = at;
              const text = logLine(formatter, entry);
              if (text === undefined) return;
              logs.push(text);
              if (logs.length > KEPT_LOG_LINES) logs.splice(0, logs.length - KEPT_LOG_LINES);
              soon();
            },
            signal,
          ),
        false,
      ).catch((error: unknown) => {
        // The log is the lesser half: without it (an old serve) the numbers still show.
        if (!controller.signal.aborted) logs.push(cc.out.color.dim(`(the log cannot be followed: ${error instanceof Error ? error.message : String(error)})`));
      }),
    ]);
  } finally {
    controller.abort();
    if (scheduled) clearTimeout(scheduled);
    screen.off?.('resize', draw);
    keys.off?.('data', onKey);
    if (raw) keys.setRawMode!(false);
    keys.pause?.();
    screen.write('\x1b[?25h\x1b[?1049l');
  }
  if (failure !== undefined) throw failure;
}

function timeOf(entry: LogEntry): number {
  return Number(entry.time.seconds) * 1000 + Math.floor(entry.time.nanos / 1e6);
}

function logLine(formatter: LogFormatter, entry: LogEntry): string | undefined {
  let fields: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(entry.fields_json || '{}');
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) fields = parsed as Record<string, unknown>;
  } catch {
    // a line without readable fields is still a line
  }
  return formatter.format({
    sequence: Number(entry.sequence),
    time: new Date(timeOf(entry)),
    level: 0,
    levelName: entry.level.replace('LOG_LEVEL_', '').toLowerCase() as 'info',
    component: entry.component,
    message: entry.message,
    fields,
  });
}
