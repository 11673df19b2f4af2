/**
 * serve's log for a person: one line per record,
 *
 *   15:42:17.123 INFO  http     GET /api/v2/blog/posts 200 3.2ms
 *   15:42:18.004 WARN  webhooks webhook attempt failed; will retry deliveryId=7 statusCode=500
 *
 * Requests are one line each (Fastify's "incoming request" is held back and
 * its method and URL join the "request completed" line). Used by `serve`
 * on a terminal and by `miniapp monitor logs`; JSON stays JSON elsewhere.
 */
import type { ChalkInstance } from 'chalk';
import type { LogRecord } from '../../monitoring/log-hub.js';
import { parseLogLine } from '../../monitoring/log-hub.js';
import type { OutStream } from './streams.js';
import { printable } from './printable.js';

type Level = LogRecord['levelName'];

function fieldText(value: unknown): string {
  // JSON escapes the C0 controls but not DEL and C1; printable takes those (a field may come from a request).
  if (typeof value === 'string') return printable(/[\s"=\u0000-\u001f]/.test(value) || value === '' ? JSON.stringify(value) : value);
  return printable(JSON.stringify(value) ?? String(value));
}

export interface FormatOptions {
  color: ChalkInstance;
  /** Full ISO time (monitor, which may show yesterday's lines) or the time of day (serve's live log). */
  fullTime?: boolean;
}

/** Holds the request line of each request until its completion, to print one line per request. */
export class LogFormatter {
  readonly #pending = new Map<string, { method: string; url: string }>();
  readonly #paint: Record<Level, (text: string) => string>;

  constructor(private readonly options: FormatOptions) {
    const c = options.color;
    this.#paint = { trace: c.dim, debug: c.dim, info: c.green, warn: c.yellow, error: c.red, fatal: c.red.bold };
  }

  /** The line for a record, or undefined when it is held back (a request that has not completed yet). */
  format(record: LogRecord): string | undefined {
    const c = this.options.color;
    let message = printable(record.message);
    const fields = { ...record.fields };
    const reqId = typeof fields.reqId === 'string' ? fields.reqId : undefined;
    const req = fields.req as { method?: string; url?: string } | undefined;
    const res = fields.res as { statusCode?: number } | undefined;
    if (reqId && message === 'incoming request' && req?.method) {
      this.#pending.set(reqId, { method: req.method, url: req.url ?? '' });
      // A bound for requests that never complete (a crash mid-request): old entries go first.
      if (this.#pending.size > 10_000) this.#pending.delete(this.#pending.keys().next().value!);
      return undefined;
    }
    if (reqId && message === 'request completed' && res?.statusCode !== undefined) {
      const request = this.#pending.get(reqId);
      this.#pending.delete(reqId);
      const ms = typeof fields.responseTime === 'number' ? `${fields.responseTime.toFixed(1)}ms` : '';
      const status = res.statusCode >= 500 ? c.red(String(res.statusCode)) : res.statusCode >= 400 ? c.yellow(String(res.statusCode)) : String(res.statusCode);
      message = `${request ? `${request.method} ${printable(request.url)} ` : ''}${status} ${c.dim(ms)}`.trimEnd();
      delete fields.res;
      delete fields.responseTime;
      delete fields.reqId;
    }
    const time = this.options.fullTime ? record.time.toISOString() : record.time.toISOString().slice(11, 23);
    const extra = Object.entries(fields)
      .map(([key, value]) => `${c.dim(`${key}=`)}${fieldText(value)}`)
      .join(' ');
    return `${c.dim(time)} ${this.#paint[record.levelName](record.levelName.toUpperCase().padEnd(5))} ${c.cyan(record.component.padEnd(8))} ${message}${extra ? ` ${extra}` : ''}`;
  }
}

/** A logger destination that writes serve's JSON lines as formatted lines. */
export function prettyLogSink(stream: OutStream, color: ChalkInstance): { write(line: string): boolean } {
  const formatter = new LogFormatter({ color });
  let sequence = 0;
  return {
    write(line: string) {
      const text = formatter.format(parseLogLine(line, ++sequence));
      if (text !== undefined) stream.write(`${text}\n`);
      return true;
    },
  };
}

/**
 * Holds log lines back until `open()` (serve's banner comes first, then the
 * log), then passes them on as they come.
 */
export function gatedSink(next: { write(line: string): unknown }): { write(line: string): boolean; open(): void } {
  let held: string[] | undefined = [];
  return {
    write(line: string) {
      if (held) held.push(line);
      else next.write(line);
      return true;
    },
    open() {
      const lines = held ?? [];
      held = undefined;
      for (const line of lines) next.write(line);
    },
  };
}
