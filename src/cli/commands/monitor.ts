/**
 * `miniapp monitor ...`: serve's own metrics and log lines, live, and the
 * operators' room, over monitoring.v1.MonitoringService (admin token).
 * Commander wiring and rendering; the client is src/monitoring/client.ts.
 */
import { printable } from '../render/printable.js';
import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { RefusedError, UsageError } from '../../errors.js';
import { parseDuration } from '../../duration.js';
import { connectionOf, reconnectNotice, withConnection, type ConnectionFlags } from '../connect/grpc-connection.js';
import { destroyInput, linesOf } from '../terminal/input.js';
import { parseWholeNumber } from '../flags.js';
import type { ChatMessage, LogEntry, LogLevelEnum, MetricData, MonitoringClient } from '../../monitoring/client.js';
import type { MetricsRequest } from '../../monitoring/service.js';
import type { LightStreamEnd } from '../../grpc/client/light-call.js';
import type { Timestamp } from '../../grpc/protos.js';

/** A tail of every line serve keeps, however many it keeps (the server sends at most that many; an int32). */
const ALL_KEPT = 2 ** 31 - 1;

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
type Level = (typeof LEVELS)[number];
const SERVICE = 'the monitoring service';

const HELP = `
Every monitor command needs the admin token of \`miniapp serve\` (the
profile's grpc-token after \`miniapp serve\` ran, or --token) and takes the
connection flags of \`miniapp users\`. Exit codes: 4 missing or rejected
token (a user token is PERMISSION_DENIED, exit 1); 5 serve unreachable.`;

const collect = (value: string, all: string[]) => [
  ...all,
  ...value
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean),
];

export function registerMonitor(program: Command, bind: Bind): void {
  const monitor = program
    .command('monitor')
    .description(
      "Watch a running `miniapp serve`: its metrics as they change (as a table, JSON lines or a full-screen dashboard), its log lines as they are written, and the operators' chat room.",
    )
    .addHelpText('after', HELP);

  withConnection(
    monitor
      .command('metrics')
      .description("serve's metrics every --interval: a live table on a terminal (value and rate per second), JSON lines when piped or with --json")
      .option('--interval <duration>', 'time between snapshots (100ms to 1h)', '5s')
      .option('--name <prefix>', 'only series whose name starts so (repeatable, or comma-separated)', collect, [] as string[])
      .option('--count <n>', 'stop after this many snapshots')
      .option('--buckets', 'also show the _bucket series of histograms in the table (JSON has them always)'),
    'time limit of connecting',
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp monitor metrics\n  miniapp monitor metrics --name miniapp_http_,miniapp_grpc_server_handled --interval 2s\n  miniapp monitor metrics --count 1 --json | jq .metrics',
    )
    .action(bind(runMetrics));

  withConnection(
    monitor
      .command('dashboard')
      .description(
        'a full-screen live view of serve on a terminal, redrawn every --interval: request rate and p99 latency of HTTP and gRPC as ' +
          'sparklines, errors by status, requests in flight, orders and payments a minute, webhook deliveries, readiness, and the last log lines; ' +
          '`q` or Ctrl-C quits. Follows serve across restarts.',
      )
      .option('--interval <duration>', 'time between redraws (250ms to 1m)', '2s'),
    'time limit of connecting',
  )
    .addHelpText('after', '\nExamples:\n  miniapp monitor dashboard\n  miniapp monitor dashboard --interval 1s --addr 127.0.0.1:50051')
    .action(bind(runDashboard));

  withConnection(
    monitor
      .command('logs')
      .description("serve's log lines (redacted as the log itself): the last ones kept, then with -f new ones as they come, like `kubectl logs -f`")
      .option('--level <level>', `lowest level: ${LEVELS.join(', ')}`, 'info')
      .option('--component <name>', 'only these components: http, grpc, webhooks, serve (repeatable, or comma-separated)', collect, [] as string[])
      .option('--tail <n>', 'how many of the kept lines to show first (serve keeps 1000); default all kept')
      .option('-f, --follow', 'keep streaming new lines until Ctrl-C'),
    'time limit of connecting',
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp monitor logs --tail 20\n  miniapp monitor logs -f --level warn\n  miniapp monitor logs -f --component grpc --json',
    )
    .action(bind(runLogs));

  withConnection(
    monitor
      .command('chat')
      .description("join the operators' room: each line of stdin is a message; prints what the others say; ends with stdin or Ctrl-C")
      .option('--name <name>', 'your name in the room (default: $USER)'),
    'time limit of connecting',
  )
    .addHelpText('after', '\nExamples:\n  miniapp monitor chat --name alice\n  echo "deploying v2 now" | miniapp monitor chat')
    .action(bind(runChat));
}

async function connect(cc: CommandContext, flags: ConnectionFlags): Promise<MonitoringClient> {
  const connection = await connectionOf(cc, flags, { service: SERVICE });
  const [{ MonitoringClient }, { quietGrpcLogs }] = await Promise.all([import('../../monitoring/client.js'), import('../connect/grpc-logging.js')]);
  await quietGrpcLogs(cc.env);
  return new MonitoringClient(connection);
}

/**
 * Follows a stream across restarts of serve (or another instance behind the
 * same address): on UNAVAILABLE or a lost connection, a fresh connection
 * after a back-off, `run` again (it knows what it has seen), and a note on
 * stderr. Until the stream is done, or Ctrl-C / SIGTERM (a normal end, exit 0).
 */
async function following(
  cc: CommandContext,
  flags: ConnectionFlags,
  run: (client: MonitoringClient, signal: AbortSignal, reconnected: boolean) => Promise<'done' | 'again'>,
  lostBefore?: string,
): Promise<void> {
  const connection = await connectionOf(cc, flags, { service: SERVICE });
  const [{ MonitoringClient }, { quietGrpcLogs }, { withReconnects }] = await Promise.all([
    import('../../monitoring/client.js'),
    import('../connect/grpc-logging.js'),
    import('../../grpc/client/reconnect.js'),
  ]);
  await quietGrpcLogs(cc.env);
  const controller = new AbortController();
  void cc.waitForShutdown().then(() => controller.abort());
  let reconnected = false;
  try {
    await withReconnects({
      signal: controller.signal,
      lostBefore,
      connect: () => {
        const client = new MonitoringClient(connection);
        return { client, ready: () => client.ready(connection.deadlineMs ?? 10_000), close: () => client.close() };
      },
      run: ({ client }, signal) => run(client, signal, reconnected),
      onConnected: (info) => {
        // Connected, the stream runs until stopped: warnings are written as they come from now on, --json or not.
        cc.out.releaseWarnings();
        reconnected = info.reconnected;
        if (info.reconnected) cc.out.info(`reconnected to ${connection.address}`);
      },
      onRetry: (retry) => cc.out.warn(reconnectNotice('stream', retry)),
    });
  } finally {
    controller.abort();
  }
}

/** Runs a streaming command until it ends or Ctrl-C / SIGTERM (which is a normal end, exit 0). */
async function untilStopped(cc: CommandContext, client: MonitoringClient, run: (signal: AbortSignal) => Promise<void>): Promise<void> {
  const controller = new AbortController();
  void cc.waitForShutdown().then(() => controller.abort());
  try {
    await run(controller.signal);
  } finally {
    controller.abort();
    client.close();
  }
}

function iso(ts: Timestamp | null | undefined): string {
  if (!ts) return '';
  return new Date(Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1_000_000)).toISOString();
}

// ------------------------------------------------------------------ metrics

async function runMetrics(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { interval: string; name: string[]; count?: string; buckets?: boolean }>();
  const interval = parseDuration(flags.interval, '--interval');
  if (interval < 100 || interval > 3_600_000) throw new UsageError(`--interval must be from 100ms to 1h; got "${flags.interval}"`);
  const snapshots = flags.count === undefined ? undefined : parseWholeNumber(flags.count, '--count', 1);
  const screen = cc.out.human ? await import('../views/metrics-screen.js') : undefined;
  let previous: { at: number; metrics: Record<string, number> } | undefined;
  let received = 0;
  const request = () => ({ name_prefixes: flags.name, interval_ms: interval, count: snapshots === undefined ? 0 : snapshots - received });
  const show = (data: MetricData) => {
    received++;
    if (!screen) {
      cc.out.line(JSON.stringify({ service: data.service_name, timestamp: iso(data.timestamp), metrics: data.metrics }));
      return;
    }
    const at = Date.parse(iso(data.timestamp)) || Date.now();
    const stdout = cc.io.stdout as { columns?: number; rows?: number };
    const lines = screen.metricsFrame({
      data,
      at,
      previous,
      intervalMs: interval,
      buckets: Boolean(flags.buckets),
      width: stdout.columns || 100,
      height: stdout.rows || undefined,
      color: cc.out.color,
    });
    // Redrawn in place, like `watch`.
    cc.out.write(screen.frameText(lines, previous === undefined));
    previous = { at, metrics: data.metrics };
  };
  // A bounded stream (--count) is first asked for on the light path, without grpc-js; grpc-js follows it on where that
  // cannot (TLS, tracing, serve not reached) or the stream ends or breaks before the count is reached.
  // Broken after the last snapshot wanted, before the server's end: done (asked again, it would be for 0, no limit).
  const enough = () => snapshots !== undefined && received >= snapshots;
  let lostBefore: string | undefined;
  if (snapshots !== undefined) {
    const end = await lightMetricsShown(cc, flags, request(), show).catch((error: unknown) => {
      if (enough()) return { kind: 'ended' } as const;
      throw error;
    });
    if (end.kind === 'aborted' || (end.kind !== 'unreached' && enough())) return;
    // Lost once connected: followed on as grpc-js's own stream would be, after the same notice and wait.
    if (end.kind === 'lost') lostBefore = end.reason;
  }
  // Across reconnections, --count counts every snapshot shown; a stream the server ends before then is followed again.
  await following(
    cc,
    flags,
    async (client, signal) => {
      try {
        await client.metrics(request(), show, signal);
      } catch (error) {
        if (!enough()) throw error;
      }
      return enough() ? 'done' : 'again';
    },
    lostBefore,
  );
}

/**
 * StreamMetrics on the light path (monitoring/client-light.ts), the snapshots
 * shown as they come, until the server ends the stream or Ctrl-C / SIGTERM
 * (a normal end, 'aborted'); 'unreached' when grpc-js must make the call
 * (also on TLS or tracing); a status that ends following throws as grpc-js's would.
 */
async function lightMetricsShown(
  cc: CommandContext,
  flags: ConnectionFlags,
  request: Partial<MetricsRequest>,
  show: (data: MetricData) => void,
): Promise<LightStreamEnd> {
  const connection = await connectionOf(cc, flags, { service: SERVICE });
  const [{ lightPathServes }, { lightMetrics }] = await Promise.all([import('../../grpc/client/light-call.js'), import('../../monitoring/client-light.js')]);
  if (!lightPathServes(connection)) return { kind: 'unreached' };
  let released = false;
  const controller = new AbortController();
  void cc.waitForShutdown().then(() => controller.abort());
  const end = await lightMetrics(
    connection,
    request,
    (data) => {
      // Connected, the stream runs: warnings are written as they come from now on, as following() does.
      if (!released) cc.out.releaseWarnings();
      released = true;
      show(data);
    },
    connection.deadlineMs ?? 10_000,
    controller.signal,
  );
  if (end.kind !== 'unreached' && !released) cc.out.releaseWarnings();
  return end;
}

// ------------------------------------------------------------------ dashboard

async function runDashboard(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { interval: string }>();
  if (!cc.out.human || !cc.io.stdout.isTTY) {
    throw new RefusedError('monitor dashboard draws on a terminal; piped or as JSON, use `miniapp monitor metrics --json`');
  }
  const interval = parseDuration(flags.interval, '--interval');
  if (interval < 250 || interval > 60_000) throw new UsageError(`--interval must be from 250ms to 1m; got "${flags.interval}"`);
  const connection = await connectionOf(cc, flags, { service: SERVICE });
  const [{ MonitoringClient }, { quietGrpcLogs }, { runDashboard: run }] = await Promise.all([
    import('../../monitoring/client.js'),
    import('../connect/grpc-logging.js'),
    import('../views/dashboard.js'),
  ]);
  await quietGrpcLogs(cc.env);
  await run(cc, {
    address: connection.address,
    intervalMs: interval,
    client: () => new MonitoringClient(connection),
    connectMs: connection.deadlineMs ?? 10_000,
  });
}

// ------------------------------------------------------------------ logs

const LEVEL_ENUM: Record<Level, LogLevelEnum> = {
  trace: 'LOG_LEVEL_TRACE',
  debug: 'LOG_LEVEL_DEBUG',
  info: 'LOG_LEVEL_INFO',
  warn: 'LOG_LEVEL_WARN',
  error: 'LOG_LEVEL_ERROR',
  fatal: 'LOG_LEVEL_FATAL',
};

function levelOf(entry: LogEntry): Level {
  return (entry.level.replace('LOG_LEVEL_', '').toLowerCase() as Level) || 'info';
}

async function runLogs(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { level: string; component: string[]; tail?: string; follow?: boolean }>();
  const level = flags.level.toLowerCase() as Level;
  if (!LEVELS.includes(level)) throw new UsageError(`--level must be one of ${LEVELS.join(', ')}; got "${flags.level}"`);
  const tail = flags.tail === undefined ? ALL_KEPT : parseWholeNumber(flags.tail, '--tail', 0);
  const { LogFormatter } = await import('../render/log-format.js');
  const formatter = new LogFormatter({ color: cc.out.color, fullTime: true });
  // The time of the last line shown. With -f, a reconnection (to serve restarted, or another instance) asks for every
  // kept line and shows those written after it: the lines logged while disconnected, none twice.
  let lastShown = -Infinity;
  await following(cc, flags, async (client, signal, reconnected) => {
    await client.logs(
      { min_level: LEVEL_ENUM[level], components: flags.component, tail: reconnected ? ALL_KEPT : tail, follow: Boolean(flags.follow) },
      (entry) => {
        const at = Date.parse(iso(entry.time));
        if (reconnected && !(at > lastShown)) return;
        if (at > lastShown) lastShown = at;
        const fields = safeFields(entry.fields_json);
        if (cc.out.json) {
          cc.out.line(
            JSON.stringify({
              sequence: Number(entry.sequence),
              time: iso(entry.time),
              level: levelOf(entry),
              component: entry.component,
              message: entry.message,
              fields,
            }),
          );
          return;
        }
        const text = formatter.format({
          sequence: Number(entry.sequence),
          time: new Date(iso(entry.time) || Date.now()),
          level: 0,
          levelName: levelOf(entry),
          component: entry.component,
          message: entry.message,
          fields,
        });
        if (text !== undefined) cc.out.line(text);
      },
      signal,
    );
    return flags.follow ? 'again' : 'done';
  });
}

function safeFields(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text || '{}');
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

// ------------------------------------------------------------------ chat

async function runChat(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { name?: string }>();
  const sender = (flags.name ?? cc.env.USER ?? 'operator').trim() || 'operator';
  if ([...sender].length > 64) throw new UsageError('--name must be at most 64 characters');
  const client = await connect(cc, flags);
  const lines = (async function* () {
    for await (const { text } of linesOf(cc.io.stdin)) if (text.trim()) yield text;
  })();
  try {
    if (cc.io.stdin.isTTY && !cc.out.json)
      cc.out.info(cc.out.errColor.dim(`joined the operators' room as ${sender}; type a line to send it, Ctrl-D or Ctrl-C to leave`));
    await untilStopped(cc, client, (signal) =>
      client.chat({
        sender,
        lines,
        signal,
        onMessage: (message: ChatMessage) => {
          if (cc.out.json) cc.out.line(JSON.stringify({ sender: message.sender, text: message.text, sent_at: iso(message.sent_at) }));
          else cc.out.line(`${cc.out.color.bold(printable(message.sender))}: ${printable(message.text)}`);
        },
      }),
    );
  } finally {
    destroyInput(cc.io.stdin);
  }
}
