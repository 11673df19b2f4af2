/**
 * Account insights: daily metrics over any range, walked in windows of at
 * most 30 days (the API's limit between since and until), one call per
 * window for all the daily metrics together; audience distributions in one
 * more call. `paging.next` of an account insights answer moves the time
 * window forward without end, so it is never followed here.
 *
 * Most metrics Meta serves today (views, accounts_engaged,
 * total_interactions, ...) come only as a window's total
 * (`metric_type=total_value`): those are asked for in a second call per
 * window, as is a metric the API answers "should be specified with
 * parameter metric_type=total_value" for (profile_views from v21.0), which
 * moves there for the windows that follow.
 *
 * Daily reach values are unique accounts per day: they are reported per
 * day and never summed (FIELD-NOTES).
 */
import type { GraphClient } from './client.js';
import { MetricRejectedError } from './errors.js';
import { isAudienceMetric, isDemographicMetric, isTotalValueMetric, retiredWarning } from './metrics.js';
import { DAY_MS, parseAccountInsights, utcDate, type AccountInsightsPage, type DistributionEntry } from './shapes.js';

/** The API accepts at most this much between since and until. */
const MAX_WINDOW_DAYS = 30;

export interface AccountInsightsOptions {
  account: string;
  metrics: readonly string[];
  /** Period of the daily metrics (default day). */
  period?: string;
  /** First day (ms at a UTC midnight, or any instant: its day counts). */
  since: number;
  /** Exclusive end (ms). */
  until: number;
  /** Breakdown of follower_demographics (default country). */
  breakdown?: string;
  onWarn?: (message: string) => void;
  onProgress?: (done: number, windows: number) => void;
}

interface DayRow {
  date: string;
  values: Record<string, number | null>;
}

interface WindowTotal {
  metric: string;
  since: string;
  until: string;
  value: number;
}

export interface AccountInsights {
  account: string;
  period: string;
  since: string;
  /** Last day included. */
  until: string;
  /** The metrics read as daily values (retired ones the API rejected included, as empty columns). */
  dailyMetrics: string[];
  /** The metrics read as window totals (metric_type=total_value). */
  totalMetrics: string[];
  /** One row per day of the range, oldest first; null where the API gave no value. */
  days: DayRow[];
  /** Window totals, for metrics the API answered with `total_value`. */
  totals: WindowTotal[];
  distributions: { metric: string; entries: DistributionEntry[] }[];
  /** Retired metrics the API rejected and the report goes on without. */
  dropped: string[];
  windows: number;
  calls: number;
}

/** [since, until) cut into windows of at most 30 days. */
export function windowsOf(since: number, until: number, days = MAX_WINDOW_DAYS): { since: number; until: number }[] {
  const windows: { since: number; until: number }[] = [];
  for (let start = since; start < until; start += days * DAY_MS) windows.push({ since: start, until: Math.min(until, start + days * DAY_MS) });
  return windows;
}

export async function readAccountInsights(client: GraphClient, options: AccountInsightsOptions): Promise<AccountInsights> {
  const warn = options.onWarn ?? (() => {});
  const startCalls = client.calls;
  const period = options.period ?? 'day';
  const dropped: string[] = [];
  const asDaily = options.metrics.filter((m) => !isAudienceMetric(m) && !isTotalValueMetric(m));
  let daily = [...asDaily];
  let totalled = options.metrics.filter((m) => !isAudienceMetric(m) && isTotalValueMetric(m));
  let audience = options.metrics.filter((m) => isAudienceMetric(m));

  /**
   * Asks again without retired names the API rejected, warning once per
   * name, and without the names it wants as totals (`toTotals`, which moves
   * them); when nothing at all would be left to report, the rejection is the error.
   */
  const withRejectionsHandled = async <T>(
    metrics: () => string[],
    ask: (metrics: string[]) => Promise<T>,
    remove: (names: readonly string[]) => void,
    othersEmpty: () => boolean,
    toTotals?: (names: readonly string[]) => void,
  ): Promise<T | undefined> => {
    for (;;) {
      const wanted = metrics();
      if (wanted.length === 0) return undefined;
      try {
        return await ask(wanted);
      } catch (error) {
        if (!(error instanceof MetricRejectedError)) throw error;
        if (toTotals && /metric_type=total_value/.test(error.graph.message) && error.rejected.every((m) => wanted.includes(m))) {
          toTotals(error.rejected);
          continue;
        }
        if (!error.onlyRetired) throw error;
        const remaining = wanted.filter((m) => !error.rejected.includes(m));
        if (remaining.length === wanted.length || (remaining.length === 0 && othersEmpty())) throw error;
        dropped.push(...error.rejected);
        warn(retiredWarning(error.rejected));
        remove(error.rejected);
      }
    }
  };

  const dates: string[] = [];
  for (let day = Math.floor(options.since / DAY_MS) * DAY_MS; day < options.until; day += DAY_MS) dates.push(utcDate(day));
  const byDate = new Map<string, Record<string, number | null>>(dates.map((date) => [date, {}]));
  const totals: WindowTotal[] = [];
  const windows = daily.length + totalled.length > 0 ? windowsOf(options.since, options.until) : [];
  const range = (window: { since: number; until: number }) => ({ since: Math.floor(window.since / 1000), until: Math.floor(window.until / 1000) });
  const keepTotals = (window: { since: number; until: number }, page: AccountInsightsPage) => {
    for (const [metric, value] of page.totals) totals.push({ metric, since: utcDate(window.since), until: utcDate(window.until - 1), value });
  };
  let done = 0;
  for (const window of windows) {
    const page = await withRejectionsHandled(
      () => daily,
      async (metrics) => parseAccountInsights(await client.get(`${options.account}/insights`, { metric: metrics.join(','), period, ...range(window) })),
      (names) => {
        daily = daily.filter((m) => !names.includes(m));
      },
      () => audience.length === 0 && totalled.length === 0,
      (names) => {
        daily = daily.filter((m) => !names.includes(m));
        totalled = [...totalled, ...names.filter((m) => !totalled.includes(m))];
      },
    );
    if (page) {
      for (const [metric, values] of page.daily) {
        for (const [date, value] of values) {
          const row = byDate.get(date);
          if (row) row[metric] = value;
        }
      }
      keepTotals(window, page);
    }
    const totalsPage = await withRejectionsHandled(
      () => totalled,
      async (metrics) =>
        parseAccountInsights(
          await client.get(`${options.account}/insights`, { metric: metrics.join(','), period: 'day', metric_type: 'total_value', ...range(window) }),
        ),
      (names) => {
        totalled = totalled.filter((m) => !names.includes(m));
      },
      () => audience.length === 0 && daily.length === 0,
    );
    if (totalsPage) keepTotals(window, totalsPage);
    options.onProgress?.(++done, windows.length);
  }

  const distributions: { metric: string; entries: DistributionEntry[] }[] = [];
  const classic = () => audience.filter((m) => !isDemographicMetric(m));
  const removeAudience = (names: readonly string[]) => {
    audience = audience.filter((m) => !names.includes(m));
  };
  const lifetime = await withRejectionsHandled(
    classic,
    async (metrics) => parseAccountInsights(await client.get(`${options.account}/insights`, { metric: metrics.join(','), period: 'lifetime' })),
    removeAudience,
    () => daily.length === 0 && totalled.length === 0,
  );
  for (const metric of audience.filter(isDemographicMetric)) {
    const demographics = parseAccountInsights(
      await client.get(`${options.account}/insights`, {
        metric,
        period: 'lifetime',
        metric_type: 'total_value',
        breakdown: options.breakdown ?? 'country',
      }),
    );
    for (const [name, entries] of demographics.distributions) distributions.push({ metric: name, entries });
  }
  if (lifetime) {
    for (const metric of classic()) {
      const entries = lifetime.distributions.get(metric);
      if (entries) distributions.push({ metric, entries });
    }
  }
  distributions.sort((a, b) => audience.indexOf(a.metric) - audience.indexOf(b.metric));

  const dailyMetrics = asDaily.filter((m) => !totalled.includes(m));
  return {
    account: options.account,
    period,
    since: dates[0] ?? utcDate(options.since),
    until: dates.at(-1) ?? utcDate(options.until - 1),
    dailyMetrics,
    totalMetrics: totalled,
    days: dates.map((date) => ({ date, values: Object.fromEntries(dailyMetrics.map((m) => [m, byDate.get(date)?.[m] ?? null])) })),
    totals,
    distributions,
    dropped,
    windows: windows.length,
    calls: client.calls - startCalls,
  };
}
