/**
 * The pieces of the charts that are plain arithmetic: axis numbers, axis
 * dates, and the resampling of days onto a terminal's columns.
 */
import { describe, expect, it } from 'vitest';
import { compactNumber, shortDate } from '../../src/cli/charts/numbers.js';
import { resample } from '../../src/cli/charts/line-chart.js';

describe('compactNumber', () => {
  it.each([
    [0, '0'],
    [7, '7'],
    [950, '950'],
    [999, '999'],
    [1000, '1k'],
    [1234, '1.2k'],
    [9_960, '10k'],
    [12_345, '12k'],
    [999_950, '1M'],
    [3_400_000, '3.4M'],
    [2_500_000_000, '2.5B'],
    [-1500, '-1.5k'],
    [81.66, '81.7'],
    [5.333, '5.33'],
    [Number.NaN, ''],
  ])('%d reads %s', (value, text) => {
    expect(compactNumber(value)).toBe(text);
  });
});

describe('shortDate', () => {
  it('gives month and day', () => {
    expect(shortDate('2026-11-21')).toBe('Nov 21');
    expect(shortDate('2026-01-05')).toBe('Jan 5');
  });
});

describe('resample', () => {
  it('puts every day on a column, first and last at the ends, peaks kept', () => {
    const days = [1, 5, 2, 9, 3];
    const columns = resample(days, 17);
    expect(columns).toHaveLength(17);
    expect([columns[0], columns[4], columns[8], columns[12], columns[16]]).toEqual(days);
    expect(Math.max(...columns)).toBe(9);
    expect(columns[2]).toBe(3);
  });

  it('takes the largest day of each column when there are more days than columns', () => {
    const days = Array.from({ length: 90 }, (_, i) => (i === 44 ? 1000 : i % 7));
    const columns = resample(days, 30);
    expect(columns).toHaveLength(30);
    expect(Math.max(...columns)).toBe(1000);
  });
});
