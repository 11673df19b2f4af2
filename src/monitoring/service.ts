/**
 * monitoring.v1.MonitoringService (spec 002): serve's own metrics and log
 * lines as streams, and an operators' chat room. Admin token only.
 */
import * as grpc from '@grpc/grpc-js';
import type { Registry } from 'prom-client';
import type { Principal } from '../auth/tokens.js';
import type { CallAuth } from '../grpc/call-auth.js';
import { ChatHub } from '../grpc/chat-hub.js';
import { toTimestamp, type Timestamp } from '../grpc/protos.js';
import { failStream, RpcError, SHUTTING_DOWN, unavailableStatus } from '../grpc/status.js';
import { LOG_LEVELS, matches, type LogFilter, type LogHub, type LogRecord } from './log-hub.js';

const { status: Status } = grpc;

const DEFAULT_INTERVAL_MS = 5_000;
const MIN_INTERVAL_MS = 100;
const MAX_INTERVAL_MS = 3_600_000;
const MAX_PREFIXES = 20;
const MAX_PREFIX_LENGTH = 200;
const MAX_COMPONENTS = 20;
const MAX_COMPONENT_LENGTH = 64;
const MAX_CHAT_TEXT = 4096;
const MAX_SENDER = 64;
/** Log lines queued for one StreamLogs reader before further lines are dropped for it (gaps in `sequence`). */
const MAX_QUEUED_LOG_LINES = 1000;
const OPERATORS_ROOM = 'operators';

const LOG_LEVEL_NAMES = [
  'LOG_LEVEL_UNSPECIFIED',
  'LOG_LEVEL_TRACE',
  'LOG_LEVEL_DEBUG',
  'LOG_LEVEL_INFO',
  'LOG_LEVEL_WARN',
  'LOG_LEVEL_ERROR',
  'LOG_LEVEL_FATAL',
] as const;
export type LogLevelEnum = (typeof LOG_LEVEL_NAMES)[number];

export interface MetricsRequest {
  name_prefixes: string[];
  interval_ms: number;
  count: number;
}

export interface MetricData {
  service_name: string;
  metrics: Record<string, number>;
  timestamp: Timestamp;
}

export interface LogRequest {
  min_level: LogLevelEnum;
  components: string[];
  tail: number;
  follow: boolean;
}

export interface LogEntry {
  sequence: string;
  time: Timestamp;
  level: LogLevelEnum;
  component: string;
  message: string;
  fields_json: string;
}

export interface ChatMessage {
  sender: string;
  text: string;
  sent_at: Timestamp | null;
}

export interface MonitoringOptions {
  /** The principal behind a call's metadata; rejects with UNAUTHENTICATED. */
  /** The calls' tokens; each stream holds the admin role for as long as it is open (call-auth.ts). */
  auth: CallAuth;
  /** The operators' room (started and stopped by the caller); local to this instance when not given. */
  chat?: ChatHub<ChatMessage> | undefined;
  metrics: Registry;
  logs: LogHub;
  /** MetricData.service_name (known once serve listens). */
  serviceName: () => string;
  now: () => Date;
}

/** `name{a="1",b="2"}` with the labels sorted, or `name`. */
function seriesKey(name: string, labels: Record<string, string | number>): string {
  const keys = Object.keys(labels).sort();
  if (keys.length === 0) return name;
  const escapeLabel = (value: string | number) => String(value).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
  return `${name}{${keys.map((key) => `${key}="${escapeLabel(labels[key]!)}"`).join(',')}}`;
}

/** Every series of the registry whose metric name starts with one of `prefixes` (all when empty). */
async function snapshot(registry: Registry, prefixes: readonly string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const wanted = (name: string) => prefixes.length === 0 || prefixes.some((prefix) => name.startsWith(prefix));
  for (const metric of await registry.getMetricsAsJSON()) {
    if (!wanted(metric.name)) continue;
    for (const value of metric.values as { value: number; labels: Record<string, string | number>; metricName?: string }[]) {
      out[seriesKey(value.metricName ?? metric.name, value.labels)] = value.value;
    }
  }
  return out;
}

function levelEnum(level: number): LogLevelEnum {
  const names: [number, LogLevelEnum][] = [
    [LOG_LEVELS.fatal, 'LOG_LEVEL_FATAL'],
    [LOG_LEVELS.error, 'LOG_LEVEL_ERROR'],
    [LOG_LEVELS.warn, 'LOG_LEVEL_WARN'],
    [LOG_LEVELS.info, 'LOG_LEVEL_INFO'],
    [LOG_LEVELS.debug, 'LOG_LEVEL_DEBUG'],
  ];
  return names.find(([value]) => level >= value)?.[1] ?? 'LOG_LEVEL_TRACE';
}

const LEVEL_NUMBERS: Record<LogLevelEnum, number> = {
  LOG_LEVEL_UNSPECIFIED: LOG_LEVELS.info,
  LOG_LEVEL_TRACE: LOG_LEVELS.trace,
  LOG_LEVEL_DEBUG: LOG_LEVELS.debug,
  LOG_LEVEL_INFO: LOG_LEVELS.info,
  LOG_LEVEL_WARN: LOG_LEVELS.warn,
  LOG_LEVEL_ERROR: LOG_LEVELS.error,
  LOG_LEVEL_FATAL: LOG_LEVELS.fatal,
};

function logEntry(record: LogRecord): LogEntry {
  return {
    sequence: String(record.sequence),
    time: toTimestamp(record.time),
    level: levelEnum(record.level),
    component: record.component,
    message: record.message,
    fields_json: JSON.stringify(record.fields),
  };
}

function checkList(values: readonly string[] | undefined, field: string, most: number, longest: number): string[] {
  const list = values ?? [];
  if (list.length > most) throw new RpcError(Status.INVALID_ARGUMENT, `${field} takes at most ${most} values; got ${list.length}`);
  for (const value of list) {
    if (!value) throw new RpcError(Status.INVALID_ARGUMENT, `${field} must not hold an empty value`);
    if (value.length > longest) throw new RpcError(Status.INVALID_ARGUMENT, `each of ${field} is at most ${longest} characters`);
  }
  return [...list];
}

export class MonitoringServiceImpl {
  readonly #chat: ChatHub<ChatMessage>;
  /** Streams that never end by themselves; ended by `endStreams` at shutdown. */
  readonly #open = new Set<{ emit(event: 'error', error: grpc.ServerErrorResponse): boolean }>();

  constructor(private readonly options: MonitoringOptions) {
    this.#chat = options.chat ?? new ChatHub<ChatMessage>();
  }

  endStreams(): void {
    // UNAVAILABLE, not OK: the stream did not end by itself, and clients retry UNAVAILABLE (on another instance).
    for (const call of this.#open) failStream(call, SHUTTING_DOWN);
    this.#open.clear();
  }

  handlers(): grpc.UntypedServiceImplementation {
    return {
      StreamMetrics: (call: grpc.ServerWritableStream<MetricsRequest, MetricData>) => this.#guard(call, () => this.#streamMetrics(call)),
      StreamLogs: (call: grpc.ServerWritableStream<LogRequest, LogEntry>) => this.#guard(call, () => this.#streamLogs(call)),
      Chat: (call: grpc.ServerDuplexStream<ChatMessage, ChatMessage>) => this.#guard(call, () => this.#chatStream(call)),
    };
  }

  /** Admin only, for as long as the stream lives; any failure before the stream runs ends it with its status. */
  async #guard(call: grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>, run: () => void): Promise<void> {
    try {
      // A user with the admin role who loses it (or is deactivated) while streaming is cut off then.
      await this.options.auth.open(call, { require: requireAdmin });
      if (call.cancelled) return;
      run();
    } catch (error) {
      failStream(
        call,
        error instanceof RpcError
          ? { code: error.code, details: error.message }
          : (unavailableStatus(error) ?? { code: Status.INTERNAL, details: 'internal error' }),
      );
    }
  }

  /** Registers a stream that ends by itself only on cancel, and how to let go of it. */
  #hold(call: grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>, release: () => void): void {
    this.#open.add(call);
    let released = false;
    const once = () => {
      if (released) return;
      released = true;
      this.#open.delete(call);
      release();
    };
    call.once('cancelled', once);
    call.once('close', once);
    call.once('error', once);
    call.once('finish', once);
  }

  #streamMetrics(call: grpc.ServerWritableStream<MetricsRequest, MetricData>): void {
    const request = call.request;
    const prefixes = checkList(request.name_prefixes, 'name_prefixes', MAX_PREFIXES, MAX_PREFIX_LENGTH);
    const interval = request.interval_ms || DEFAULT_INTERVAL_MS;
    if (interval < MIN_INTERVAL_MS || interval > MAX_INTERVAL_MS) {
      throw new RpcError(
        Status.INVALID_ARGUMENT,
        `interval_ms must be ${MIN_INTERVAL_MS} to ${MAX_INTERVAL_MS} (0 means ${DEFAULT_INTERVAL_MS}); got ${interval}`,
      );
    }
    if (request.count < 0) throw new RpcError(Status.INVALID_ARGUMENT, 'count must not be negative');
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    let busy = false;
    const send = async () => {
      // A snapshot still being written (a slow reader) is not followed by another.
      if (busy || call.writableLength > 0) return;
      busy = true;
      try {
        const metrics = await snapshot(this.options.metrics, prefixes);
        if (call.destroyed || call.writableEnded) return;
        call.write({ service_name: this.options.serviceName(), metrics, timestamp: toTimestamp(this.options.now()) });
        sent++;
        if (request.count && sent >= request.count) {
          clearInterval(timer);
          call.end();
        }
      } finally {
        busy = false;
      }
    };
    timer = setInterval(() => void send(), interval);
    this.#hold(call, () => clearInterval(timer));
    void send();
  }

  #streamLogs(call: grpc.ServerWritableStream<LogRequest, LogEntry>): void {
    const request = call.request;
    // proto-loader gives an enum value the proto does not name as its number (min_level: 99): refused, not read as info.
    const named = String(request.min_level);
    const minLevel = Object.hasOwn(LEVEL_NUMBERS, named) ? LEVEL_NUMBERS[named as LogLevelEnum] : undefined;
    if (minLevel === undefined) {
      throw new RpcError(Status.INVALID_ARGUMENT, `min_level ${named} is not a LogLevel: give one of ${LOG_LEVEL_NAMES.join(', ')} (0 to 6)`);
    }
    const filter: LogFilter = {
      minLevel,
      components: checkList(request.components, 'components', MAX_COMPONENTS, MAX_COMPONENT_LENGTH),
    };
    if (request.tail < 0) throw new RpcError(Status.INVALID_ARGUMENT, 'tail must not be negative');
    // Subscribed before the tail is read, so that no line falls between the two.
    const pending: LogRecord[] = [];
    let tailSent = false;
    let unsubscribe: (() => void) | undefined;
    if (request.follow) {
      unsubscribe = this.options.logs.subscribe((record) => {
        if (!matches(record, filter)) return;
        if (!tailSent) {
          pending.push(record);
          return;
        }
        // A reader that does not keep up loses lines (the sequence shows the gap), never the server's memory.
        if (call.writableLength >= MAX_QUEUED_LOG_LINES) return;
        call.write(logEntry(record));
      });
      this.#hold(call, () => unsubscribe?.());
    }
    const tail = this.options.logs.recent(Math.min(request.tail, this.options.logs.capacity), filter);
    for (const record of tail) call.write(logEntry(record));
    const last = tail.at(-1)?.sequence ?? 0;
    for (const record of pending) if (record.sequence > last) call.write(logEntry(record));
    pending.length = 0;
    tailSent = true;
    if (!request.follow) call.end();
  }

  #chatStream(call: grpc.ServerDuplexStream<ChatMessage, ChatMessage>): void {
    let sender = 'operator';
    let named = false;
    this.#chat.join(OPERATORS_ROOM, call);
    this.#hold(call, () => this.#chat.leave(call));
    call.on('data', (message: ChatMessage) => {
      if ([...(message.sender ?? '')].length > MAX_SENDER || [...(message.text ?? '')].length > MAX_CHAT_TEXT) {
        this.#chat.leave(call);
        failStream(call, { code: Status.INVALID_ARGUMENT, details: `sender is at most ${MAX_SENDER} characters and text at most ${MAX_CHAT_TEXT}` });
        return;
      }
      if (!named && message.sender?.trim()) {
        sender = message.sender.trim();
        named = true;
      }
      if (!message.text) return;
      const sent = this.#chat.send(OPERATORS_ROOM, call, { sender, text: message.text, sent_at: toTimestamp(this.options.now()) });
      if (!sent) return;
      // Through the database to the other instances: the next message is read once this one is on its way, so they keep their order.
      call.pause();
      sent.then(
        () => call.resume(),
        (error: unknown) => {
          this.#chat.leave(call);
          failStream(call, unavailableStatus(error) ?? { code: Status.INTERNAL, details: 'internal error' });
        },
      );
    });
    call.on('end', () => {
      this.#chat.leave(call);
      call.end();
    });
  }

  chatParticipants(): number {
    return this.#chat.size();
  }
}

function requireAdmin(principal: Principal): void {
  if (!principal.isAdmin) throw new RpcError(Status.PERMISSION_DENIED, 'the monitoring service needs the admin token of `miniapp serve`');
}
