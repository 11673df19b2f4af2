/**
 * Dates as people type them for --since and --until: `2026-08-23`, a full
 * ISO 8601 instant, unix seconds, `today`, `yesterday`, or a time ago such
 * as `90d`, `2w` or `36h`. Days are UTC days.
 */
import { parseDuration } from '../duration.js';
import { UsageError } from '../errors.js';
import { DAY_MS } from './shapes.js';

export function startOfUtcDay(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

export interface ParsedDate {
  /** The instant given, or the start of the day given. */
  ms: number;
  /** Whether the text named a whole day (a date, today, yesterday, or a number of days ago). */
  wholeDay: boolean;
}

export function parseDateArg(text: string, now: number, flag: string): ParsedDate {
  const trimmed = text.trim();
  if (trimmed === 'today') return { ms: startOfUtcDay(now), wholeDay: true };
  if (trimmed === 'yesterday') return { ms: startOfUtcDay(now) - DAY_MS, wholeDay: true };
  if (/^\d{4}-\d{2}-\d{2}$/.test(trimmed)) {
    const ms = Date.parse(`${trimmed}T00:00:00Z`);
    if (Number.isFinite(ms) && new Date(ms).toISOString().startsWith(trimmed)) return { ms, wholeDay: true };
  } else if (/^\d{9,11}$/.test(trimmed)) {
    return { ms: Number(trimmed) * 1000, wholeDay: false };
  } else if (/^\d{4}-\d{2}-\d{2}T/.test(trimmed)) {
    const ms = Date.parse(trimmed.replace(/([+-]\d\d)(\d\d)$/, '$1:$2'));
    if (Number.isFinite(ms)) return { ms, wholeDay: false };
  } else if (/^\d+(\.\d+)?(ms|s|m|h|d|w)/.test(trimmed)) {
    const ago = parseDuration(trimmed, `${flag} time ago`);
    // "90d" means 90 whole days back from today.
    return ago % DAY_MS === 0 ? { ms: startOfUtcDay(now) - ago, wholeDay: true } : { ms: now - ago, wholeDay: false };
  }
  throw new UsageError(`${flag}: cannot read "${text}" as a date`, {
    hint: 'use a date (2026-08-23), an ISO 8601 time, unix seconds, today, yesterday, or a time ago such as 90d or 12h',
  });
}

/** --since as an instant: the start of the day for a date. */
export function sinceOf(text: string, now: number, flag = '--since'): number {
  return parseDateArg(text, now, flag).ms;
}

/** --until as an exclusive bound: a date includes that whole day. */
export function untilOf(text: string, now: number, flag = '--until'): number {
  const parsed = parseDateArg(text, now, flag);
  return parsed.wholeDay ? parsed.ms + DAY_MS : parsed.ms;
}
