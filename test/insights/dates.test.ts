import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.js';
import { parseDateArg, sinceOf, untilOf } from '../../src/insights/dates.js';

const NOW = Date.parse('2026-11-21T12:34:56Z');
const TODAY = Date.parse('2026-11-21T00:00:00Z');
const DAY = 86_400_000;

describe('--since and --until', () => {
  it('reads dates, instants, unix seconds, today/yesterday and days ago as UTC', () => {
    expect(parseDateArg('2026-08-23', NOW, '--since')).toEqual({ ms: Date.parse('2026-08-23T00:00:00Z'), wholeDay: true });
    expect(parseDateArg('2026-08-23T10:00:00+0900', NOW, '--since')).toEqual({ ms: Date.parse('2026-08-23T01:00:00Z'), wholeDay: false });
    expect(parseDateArg('1700000000', NOW, '--since')).toEqual({ ms: 1_700_000_000_000, wholeDay: false });
    expect(parseDateArg('yesterday', NOW, '--since').ms).toBe(TODAY - DAY);
    expect(parseDateArg('90d', NOW, '--since')).toEqual({ ms: TODAY - 90 * DAY, wholeDay: true });
    expect(parseDateArg('12h', NOW, '--since')).toEqual({ ms: NOW - 12 * 3_600_000, wholeDay: false });
  });

  it('makes --until include the whole day it names', () => {
    expect(untilOf('2026-11-20', NOW)).toBe(TODAY);
    expect(untilOf('yesterday', NOW)).toBe(TODAY);
    expect(sinceOf('today', NOW)).toBe(TODAY);
  });

  it('refuses what it cannot read, naming the flag', () => {
    expect(() => parseDateArg('2026-02-30', NOW, '--since')).toThrow(UsageError);
    expect(() => parseDateArg('last week', NOW, '--until')).toThrow('--until: cannot read "last week" as a date');
  });
});
