/**
 * Media insights (a values array per metric, lifetime) and account
 * insights (a value per day, distributions, window totals) are read by
 * separate parsers: reading one shape with the other's parser is how a
 * published client stored every media insight as 0.
 */
import { describe, expect, it } from 'vitest';
import { dayOfEndTime, parseAccountInsights, parseGraphTime, parseMediaInsights } from '../../src/insights/shapes.js';

describe('media insights shape (lifetime values arrays)', () => {
  it('reads the first value of each metric', () => {
    const body = {
      data: [
        { name: 'reach', period: 'lifetime', values: [{ value: 1234 }], title: 'Accounts reached', id: '1/insights/reach/lifetime' },
        { name: 'saved', period: 'lifetime', values: [{ value: 0 }], title: 'Saves', id: '1/insights/saved/lifetime' },
      ],
    };
    expect(parseMediaInsights(body)).toEqual(new Map([['reach', 1234], ['saved', 0]]));
  });

  it('reads total_value from newer versions, and leaves missing metrics missing (never 0)', () => {
    const body = { data: [{ name: 'views', period: 'lifetime', total_value: { value: 88 } }, { name: 'shares', values: [] }] };
    const values = parseMediaInsights(body);
    expect(values.get('views')).toBe(88);
    expect(values.has('shares')).toBe(false);
    expect(parseMediaInsights({ data: [] }).size).toBe(0);
    expect(parseMediaInsights(undefined).size).toBe(0);
  });

  it('is not the account parser: media values have no end_time and give no days', () => {
    const body = { data: [{ name: 'reach', period: 'lifetime', values: [{ value: 1234 }] }] };
    expect(parseAccountInsights(body).daily.size).toBe(0);
    expect(parseAccountInsights(body).totals.get('reach')).toBe(1234);
  });
});

describe('account insights shapes', () => {
  it('reads one value per day, dated by the day that ends at end_time', () => {
    const body = {
      data: [
        {
          name: 'reach',
          period: 'day',
          values: [
            { value: 10, end_time: '2026-11-02T00:00:00+0000' },
            { value: 20, end_time: '2026-11-03T00:00:00+0000' },
          ],
        },
        // The real API's Pacific days end at 07:00 or 08:00 UTC.
        { name: 'follower_count', period: 'day', values: [{ value: 3, end_time: '2026-11-02T08:00:00+0000' }] },
      ],
    };
    const page = parseAccountInsights(body);
    expect(page.daily.get('reach')).toEqual(new Map([['2026-11-01', 10], ['2026-11-02', 20]]));
    expect(page.daily.get('follower_count')).toEqual(new Map([['2026-11-01', 3]]));
    expect(page.totals.size).toBe(0);
  });

  it('reads window totals (metric_type=total_value) apart from daily values', () => {
    const page = parseAccountInsights({ data: [{ name: 'reach', period: 'day', total_value: { value: 5000 } }] });
    expect(page.totals.get('reach')).toBe(5000);
    expect(page.daily.size).toBe(0);
  });

  it('reads audience_* distributions and demographics breakdowns, largest first', () => {
    const page = parseAccountInsights({
      data: [
        { name: 'audience_country', period: 'lifetime', values: [{ value: { KR: 5, US: 9, JP: 5 }, end_time: '2026-11-21T00:00:00+0000' }] },
        {
          name: 'follower_demographics',
          period: 'lifetime',
          total_value: {
            breakdowns: [
              {
                dimension_keys: ['age', 'gender'],
                results: [
                  { dimension_values: ['18-24', 'F'], value: 3 },
                  { dimension_values: ['25-34', 'M'], value: 7 },
                ],
              },
            ],
          },
        },
      ],
    });
    expect(page.distributions.get('audience_country')).toEqual([
      { key: 'US', value: 9 },
      { key: 'JP', value: 5 },
      { key: 'KR', value: 5 },
    ]);
    expect(page.distributions.get('follower_demographics')).toEqual([
      { key: '25-34.M', value: 7 },
      { key: '18-24.F', value: 3 },
    ]);
    expect(page.daily.size).toBe(0);
  });

  it('reads the API timestamp format', () => {
    expect(parseGraphTime('2026-11-21T08:00:00+0000')).toBe(Date.parse('2026-11-21T08:00:00Z'));
    expect(parseGraphTime('2026-11-21T08:00:00-0700')).toBe(Date.parse('2026-11-21T15:00:00Z'));
    expect(dayOfEndTime('2026-11-21T00:00:00+0000')).toBe('2026-11-20');
    expect(dayOfEndTime('garbage')).toBeUndefined();
  });
});
