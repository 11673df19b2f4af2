/** Parsers for flag values that several commands share, with the flag named in the error. */
import { UsageError } from '../errors.js';

export function parsePort(text: string, flag = '--port'): number {
  const port = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!(port >= 0 && port <= 65535)) throw new UsageError(`${flag} must be a number from 0 to 65535; got "${text}"`);
  return port;
}

/** A userKey: a non-negative integer (0 is the console's test send). */
export function parseUserKey(text: string, flag = '--user-key'): number {
  const value = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(value)) throw new UsageError(`${flag} must be a non-negative integer; got "${text}"`);
  return value;
}

/** A whole number of at least `min` (`--limit`, `--top`, `--max-retries`), as a commander option parser. */
export function wholeNumber(flag: string, min = 1): (text: string) => number {
  return (text: string): number => parseWholeNumber(text, flag, min);
}

/** A positive whole number naming something (a user id), normalised ("007" is "7"); a string, as int64 travels. */
export function parseId(text: string, what = 'ID'): string {
  const trimmed = text.trim();
  if (!/^\d+$/.test(trimmed) || !Number.isSafeInteger(Number(trimmed)) || Number(trimmed) < 1) {
    throw new UsageError(`${what} must be a positive whole number; got "${text}"`);
  }
  return String(Number(trimmed));
}

export function parseWholeNumber(text: string, flag: string, min: number): number {
  const value = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(value) || value < min) throw new UsageError(`${flag} must be a whole number of at least ${min}; got "${text}"`);
  return value;
}

/** A whole number within bounds, for a flag (exit 2 otherwise). */
export function parseInteger(text: string, flag: string, min: number, max: number): number {
  const value = /^[-+]?\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new UsageError(`${flag} must be a whole number from ${min} to ${max}; got "${text}"`);
  return value;
}

export function parseBoolean(text: string, flag: string): boolean {
  const lower = text.trim().toLowerCase();
  if (lower === 'true') return true;
  if (lower === 'false') return false;
  throw new UsageError(`${flag} must be true or false; got "${text}"`);
}

/** A comma-separated list, entries trimmed, empty ones dropped ("" is the empty list). */
export function parseList(text: string): string[] {
  return text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
}
