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

/** A whole number of at least `min` (`--limit`, `--top`, `--max-retries`). */
export function wholeNumber(flag: string, min = 1): (text: string) => number {
  return (text: string): number => {
    const value = Number(text);
    if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min) {
      throw new UsageError(`${flag} must be a whole number of at least ${min}; got "${text}"`);
    }
    return value;
  };
}
