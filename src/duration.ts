/**
 * Durations as people type them: `90s`, `15m`, `2h`, `15d`, `1h30m`, `500ms`.
 */
import { UsageError } from './errors.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

export function parseDuration(text: string, what = 'duration'): number {
  const trimmed = text.trim();
  const parts = [...trimmed.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/g)];
  if (!trimmed || parts.map((p) => p[0]).join('') !== trimmed) {
    throw new UsageError(`invalid ${what} "${text}": use a number with a unit, such as 500ms, 90s, 15m, 2h, 15d or 1h30m`);
  }
  return parts.reduce((total, [, amount, unit]) => total + Number(amount) * UNITS[unit!]!, 0);
}

/** `3725000` -> `1h 2m 5s`; for showing time left. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  let rest = Math.floor(ms / 1000);
  const out: string[] = [];
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3_600],
    ['m', 60],
    ['s', 1],
  ] as const) {
    if (rest >= size) {
      out.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return out.slice(0, 2).join(' ');
}

/**
 * `at` as a person reads it next to `now`, for a table on a terminal: `12s ago`, `in 4m 30s`, `due now`, or the
 * date alone when it is more than a day away. Tables that are piped or --json keep the exact ISO time.
 */
export function relativeTime(at: string | Date, now: Date): string {
  const ms = new Date(at).getTime() - now.getTime();
  if (Number.isNaN(ms)) return String(at);
  if (Math.abs(ms) >= 86_400_000) return new Date(at).toISOString().slice(0, 10);
  if (ms > 0) return `in ${formatDuration(Math.ceil(ms / 1000) * 1000)}`;
  if (ms > -1000) return 'just now';
  return `${formatDuration(Math.floor(-ms / 1000) * 1000)} ago`;
}
