/**
 * serve's log as a stream of records: every line the logger writes (pino
 * JSON, already redacted by the logger) is passed on to the real sink,
 * parsed once, numbered, kept in a ring of the last `capacity` records and
 * handed to subscribers (monitoring.v1 StreamLogs). Nothing here formats or
 * prints.
 */
import { EventEmitter } from 'node:events';

export interface LogSink {
  write(line: string): unknown;
}

/** pino's level numbers and their names. */
export const LOG_LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const;
type LogLevelName = keyof typeof LOG_LEVELS;

export interface LogRecord {
  /** 1, 2, 3, ... in the order the lines were written since the hub was made. */
  sequence: number;
  time: Date;
  level: number;
  levelName: LogLevelName;
  /** Which part of serve wrote it: the record's `component`, "http" for request logs, else "serve". */
  component: string;
  message: string;
  /** Every other field of the record. */
  fields: Record<string, unknown>;
}

export interface LogFilter {
  minLevel?: number;
  /** Empty or undefined: every component. */
  components?: readonly string[];
}

function levelName(level: number): LogLevelName {
  let name: LogLevelName = 'trace';
  for (const [candidate, value] of Object.entries(LOG_LEVELS) as [LogLevelName, number][]) if (level >= value) name = candidate;
  return name;
}

export function matches(record: LogRecord, filter: LogFilter): boolean {
  if (filter.minLevel !== undefined && record.level < filter.minLevel) return false;
  if (filter.components && filter.components.length > 0 && !filter.components.includes(record.component)) return false;
  return true;
}

// Fields every pino line has that the record carries elsewhere (or that say nothing an operator needs).
const ENVELOPE = new Set(['level', 'time', 'msg', 'component', 'pid', 'hostname']);

/** Reads one pino line (a JSON object; anything else becomes a plain info message). */
export function parseLogLine(line: string, sequence: number): LogRecord {
  let parsed: Record<string, unknown>;
  try {
    const value: unknown = JSON.parse(line);
    parsed = value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : { msg: String(value) };
  } catch {
    parsed = { msg: line.trimEnd(), level: LOG_LEVELS.info };
  }
  const level = typeof parsed.level === 'number' ? parsed.level : LOG_LEVELS.info;
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(parsed)) if (!ENVELOPE.has(key)) fields[key] = value;
  return {
    sequence,
    time: typeof parsed.time === 'number' ? new Date(parsed.time) : new Date(),
    level,
    levelName: levelName(level),
    component: typeof parsed.component === 'string' ? parsed.component : 'reqId' in parsed ? 'http' : 'serve',
    message: typeof parsed.msg === 'string' ? parsed.msg : '',
    fields,
  };
}

interface Kept {
  sequence: number;
  line: string;
  record?: LogRecord;
}

/**
 * Lines are kept as written and parsed only when someone reads them (a
 * subscriber, or `recent`), so a log nobody watches costs a ring slot.
 */
export class LogHub {
  readonly #ring: (Kept | undefined)[];
  #next = 0;
  readonly #events = new EventEmitter();
  #sequence = 0;

  constructor(options: { capacity?: number } = {}) {
    this.#ring = new Array<Kept | undefined>(Math.max(1, options.capacity ?? 1000));
    this.#events.setMaxListeners(0);
  }

  /** A logger destination that keeps every line here and writes it on to `next`. */
  sink(next?: LogSink): LogSink {
    return {
      write: (line: string) => {
        this.push(line);
        return next?.write(line);
      },
    };
  }

  push(line: string): void {
    const kept: Kept = { sequence: ++this.#sequence, line };
    this.#ring[this.#next] = kept;
    this.#next = (this.#next + 1) % this.#ring.length;
    if (this.#events.listenerCount('record') > 0) this.#events.emit('record', this.#record(kept));
  }

  #record(kept: Kept): LogRecord {
    kept.record ??= parseLogLine(kept.line, kept.sequence);
    return kept.record;
  }

  /** The last `count` kept records that match, oldest first. */
  recent(count: number, filter: LogFilter = {}): LogRecord[] {
    const out: LogRecord[] = [];
    const size = this.#ring.length;
    for (let i = 1; i <= size && out.length < count; i++) {
      const kept = this.#ring[(this.#next - i + size) % size];
      if (!kept) break;
      const record = this.#record(kept);
      if (matches(record, filter)) out.push(record);
    }
    return out.reverse();
  }

  /** Calls `listener` with every record written from now on; returns the unsubscribe. */
  subscribe(listener: (record: LogRecord) => void): () => void {
    this.#events.on('record', listener);
    return () => this.#events.off('record', listener);
  }

  subscribers(): number {
    return this.#events.listenerCount('record');
  }

  get capacity(): number {
    return this.#ring.length;
  }
}
