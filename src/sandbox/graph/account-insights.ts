/**
 * An account's insights as the sandbox answers them, after Meta's IG User
 * insights reference: the metrics it serves today beside the spec's, each
 * with the periods and metric types Meta documents for it, refused version
 * by version once retired (metric-schedule.ts).
 *
 * - Daily values (`values: [{ value, end_time }]`, one per UTC day, end_time
 *   at the end of the day): period day; reach and impressions also week
 *   and days_28 (each day's value covers the 7 or 28 days ending with it).
 * - Totals over since..until (`total_value: { value }`), with
 *   `metric_type=total_value` and period day: every daily metric, and the
 *   ones Meta serves only so (views, accounts_engaged, total_interactions,
 *   likes, ...; profile_views and website_clicks from v21.0 on). A
 *   breakdown splits the total (`total_value.breakdowns`).
 * - Distributions with period lifetime: audience_* and online_followers as
 *   `values: [{ value: { key: n } }]`; *_demographics as totals broken down
 *   by country, city, age, gender or age,gender.
 */
import type { FastifyRequest } from 'fastify';
import { DAY_MS, METRIC_TITLES, graphTimestamp, seedHash, startOfUtcDay, type GraphData, type SandboxAccount } from './data.js';
import { isRetiredAt, retiredFrom, totalsOnlyAt } from './metric-schedule.js';
import { metricList } from './insights.js';
import { instant, linkTo, oauth, param, type Caller, type Query } from './request.js';

type Period = 'day' | 'week' | 'days_28' | 'lifetime';
const PERIODS: readonly Period[] = ['day', 'week', 'days_28', 'lifetime'];
const METRIC_TYPES = ['default', 'time_series', 'total_value'];

interface AccountMetric {
  /** Periods with daily values (time series); empty: totals or a distribution only. */
  series: readonly Period[];
  /** Answers totals with metric_type=total_value (period day). */
  totals: boolean;
  /** What its totals can be broken down by. */
  breakdowns?: readonly string[];
  /** A lifetime distribution: a key -> count value, or totals broken down by demographics. */
  lifetime?: 'distribution' | 'demographics';
}

const DAILY: readonly Period[] = ['day'];
const ROLLING: readonly Period[] = ['day', 'week', 'days_28'];
const BY_PRODUCT = ['media_product_type'];

/** The account metrics the sandbox knows, retired ones included (refused by version: metric-schedule.ts). */
export const ACCOUNT_METRIC_TABLE: Readonly<Record<string, AccountMetric>> = {
  reach: { series: ROLLING, totals: true, breakdowns: ['media_product_type', 'follow_type'] },
  impressions: { series: ROLLING, totals: true },
  follower_count: { series: DAILY, totals: true },
  profile_views: { series: DAILY, totals: true },
  website_clicks: { series: DAILY, totals: true },
  views: { series: [], totals: true, breakdowns: ['follower_type', 'media_product_type'] },
  accounts_engaged: { series: [], totals: true },
  total_interactions: { series: [], totals: true, breakdowns: BY_PRODUCT },
  likes: { series: [], totals: true, breakdowns: BY_PRODUCT },
  comments: { series: [], totals: true, breakdowns: BY_PRODUCT },
  shares: { series: [], totals: true, breakdowns: BY_PRODUCT },
  saves: { series: [], totals: true, breakdowns: BY_PRODUCT },
  replies: { series: [], totals: true },
  follows_and_unfollows: { series: [], totals: true, breakdowns: ['follow_type'] },
  profile_links_taps: { series: [], totals: true, breakdowns: ['contact_button_type'] },
  audience_city: { series: [], totals: false, lifetime: 'distribution' },
  audience_country: { series: [], totals: false, lifetime: 'distribution' },
  audience_gender_age: { series: [], totals: false, lifetime: 'distribution' },
  audience_locale: { series: [], totals: false, lifetime: 'distribution' },
  online_followers: { series: [], totals: false, lifetime: 'distribution' },
  follower_demographics: { series: [], totals: true, lifetime: 'demographics' },
  engaged_audience_demographics: { series: [], totals: true, lifetime: 'demographics' },
  reached_audience_demographics: { series: [], totals: true, lifetime: 'demographics' },
};

/** The dimension values of each breakdown of a total. */
const BREAKDOWN_VALUES: Readonly<Record<string, readonly string[]>> = {
  media_product_type: ['FEED', 'REELS', 'STORY'],
  follow_type: ['FOLLOWER', 'NON_FOLLOWER'],
  follower_type: ['FOLLOWER', 'NON_FOLLOWER'],
  contact_button_type: ['BOOK_NOW', 'CALL', 'DIRECTION', 'EMAIL', 'INSTANT_EXPERIENCE', 'TEXT', 'UNDEFINED'],
};
const DEMOGRAPHIC_BREAKDOWNS = ['country', 'city', 'age', 'gender', 'age,gender'];
const TIMEFRAMES = ['last_14_days', 'last_30_days', 'last_90_days', 'prev_month', 'this_month', 'this_week'];
const MAX_RANGE_S = 30 * 86_400;

/** The metrics a call at this version and mount may name. */
export function liveAccountMetrics(caller: Pick<Caller, 'version' | 'mount'>): string[] {
  return Object.keys(ACCOUNT_METRIC_TABLE).filter((metric) => !isRetiredAt(metric, caller.version, caller.mount));
}

/** "(#100) The following metrics (a, b) should be specified with parameter X": Meta's words for a parameter a metric needs. */
function shouldBe(metrics: readonly string[], parameter: string) {
  return oauth(100, `(#100) The following metrics (${metrics.join(',')}) should be specified with parameter ${parameter}`);
}

function checkNames(metrics: readonly string[], caller: Caller): void {
  const live = liveAccountMetrics(caller);
  metrics.forEach((metric, index) => {
    if (live.includes(metric)) return;
    if (metric === 'impressions' && isRetiredAt(metric, caller.version, caller.mount)) {
      throw oauth(100, `(#100) Starting from version v${retiredFrom(metric, caller.mount)}.0 and above, the impressions metric is no longer supported`);
    }
    throw oauth(100, `(#100) metric[${index}] must be one of the following values: ${live.join(', ')}`);
  });
}

/** Splits `total` over the values of a dimension, by weights that are a function of their names: the parts add up to it. */
function split(total: number, seed: string, keys: readonly string[]): { dimension_values: string[]; value: number }[] {
  const weights = keys.map((key) => 1 + (seedHash(`${seed}:${key}`) % 100));
  const sum = weights.reduce((a, b) => a + b, 0);
  const parts = weights.map((weight) => Math.floor((total * weight) / sum));
  parts[0]! += total - parts.reduce((a, b) => a + b, 0);
  return keys.map((key, i) => ({ dimension_values: [key], value: parts[i]! }));
}

export function accountInsights(request: FastifyRequest, account: SandboxAccount, data: GraphData, caller: Caller, now: number): unknown {
  const query = request.query as Query;
  const metrics = metricList(param(query, 'metric'));
  checkNames(metrics, caller);
  const period = param(query, 'period');
  if (period === undefined) throw oauth(100, '(#100) The parameter period is required');
  if (!(PERIODS as readonly string[]).includes(period)) throw oauth(100, `(#100) Param period must be one of {${PERIODS.join(', ')}}`);
  const metricType = param(query, 'metric_type');
  if (metricType !== undefined && !METRIC_TYPES.includes(metricType)) throw oauth(100, `(#100) Param metric_type must be one of {${METRIC_TYPES.join(', ')}}`);
  const totals = metricType === 'total_value';
  const breakdown = param(query, 'breakdown');
  const spec = (metric: string) => ACCOUNT_METRIC_TABLE[metric]!;
  const title = (name: string) => ({ title: METRIC_TITLES[name] ?? name, description: `${METRIC_TITLES[name] ?? name} of this account` });

  if (period === 'lifetime') {
    const notLifetime = metrics.filter((m) => !spec(m).lifetime);
    if (notLifetime.length > 0) throw shouldBe(notLifetime, 'period=day');
    const endTime = graphTimestamp(startOfUtcDay(now));
    return {
      data: metrics.map((name) => {
        const id = `${account.id}/insights/${name}/lifetime`;
        if (spec(name).lifetime === 'distribution')
          return { name, period, values: [{ value: data.audience(account.id, name), end_time: endTime }], ...title(name), id };
        if (!totals) throw shouldBe([name], 'metric_type=total_value');
        if (breakdown === undefined || !DEMOGRAPHIC_BREAKDOWNS.includes(breakdown)) {
          throw oauth(100, `(#100) The parameter breakdown must be one of ${DEMOGRAPHIC_BREAKDOWNS.join(' | ')}`);
        }
        const timeframe = param(query, 'timeframe');
        if (timeframe !== undefined && !TIMEFRAMES.includes(timeframe)) throw oauth(100, `(#100) Param timeframe must be one of {${TIMEFRAMES.join(', ')}}`);
        return { name, period, total_value: { breakdowns: [demographics(data, account.id, breakdown, name)] }, ...title(name), id };
      }),
    };
  }

  const lifetimeOnly = metrics.filter((m) => spec(m).lifetime);
  if (lifetimeOnly.length > 0) throw shouldBe(lifetimeOnly, 'period=lifetime');
  if (totals) {
    if (period !== 'day') throw shouldBe(metrics, 'period=day');
  } else {
    const totalsOnly = metrics.filter((m) => spec(m).series.length === 0 || totalsOnlyAt(m, caller.version, caller.mount));
    if (totalsOnly.length > 0) throw shouldBe(totalsOnly, 'metric_type=total_value');
    const dailyOnly = metrics.filter((m) => !spec(m).series.includes(period as Period));
    if (dailyOnly.length > 0) throw shouldBe(dailyOnly, 'period=day');
  }
  if (breakdown !== undefined) {
    if (!totals) throw shouldBe(metrics, 'metric_type=total_value');
    const without = metrics.filter((m) => !spec(m).breakdowns?.includes(breakdown));
    if (without.length > 0) throw oauth(100, `(#100) The following metrics (${without.join(',')}) do not support the breakdown ${breakdown}`);
  }

  const until = instant(query, 'until') ?? now;
  const since = instant(query, 'since') ?? until - 2 * DAY_MS;
  if (since >= until) throw oauth(100, '(#100) The parameter since must be before until');
  if ((until - since) / 1000 > MAX_RANGE_S) {
    throw oauth(100, `(#100) There cannot be more than 30 days (${MAX_RANGE_S} s) between since and until`);
  }
  const days: number[] = [];
  for (let day = startOfUtcDay(since); day < until; day += DAY_MS) days.push(day);
  const span = until - since;
  const shifted = (by: number) => linkTo(request, { since: String(Math.floor((since + by) / 1000)), until: String(Math.floor((until + by) / 1000)) });
  // Reach counts unique accounts: a longer window's count is less than the sum of its days.
  const over = (name: string, from: number, count: number) => {
    let sum = 0;
    for (let i = 0; i < count; i++) sum += data.daily(account.id, name, from + i * DAY_MS);
    return name === 'reach' && count > 1 ? Math.round(sum * 0.6) : sum;
  };
  const window = period === 'week' ? 7 : period === 'days_28' ? 28 : 1;
  return {
    data: metrics.map((name) => {
      const base = { name, period, ...title(name), id: `${account.id}/insights/${name}/${period}` };
      if (totals) {
        const value = over(name, days[0]!, days.length);
        return {
          ...base,
          total_value:
            breakdown === undefined
              ? { value }
              : { value, breakdowns: [{ dimension_keys: [breakdown], results: split(value, `${account.id}:${name}:${since}`, BREAKDOWN_VALUES[breakdown]!) }] },
        };
      }
      return { ...base, values: days.map((day) => ({ value: over(name, day - (window - 1) * DAY_MS, window), end_time: graphTimestamp(day + DAY_MS) })) };
    }),
    paging: { previous: shifted(-span), next: shifted(span) },
  };
}

/** follower_demographics and its kin: the audience distributions by the breakdown's dimensions (engaged and reached audiences a share of the followers). */
function demographics(data: GraphData, accountId: string, breakdown: string, metric: string): unknown {
  const share = metric === 'engaged_audience_demographics' ? 0.3 : metric === 'reached_audience_demographics' ? 0.6 : 1;
  const cells = new Map<string, { dims: string[]; value: number }>();
  const add = (dims: string[], value: number) => {
    const key = dims.join('\u0000');
    const cell = cells.get(key);
    if (cell) cell.value += value;
    else cells.set(key, { dims, value });
  };
  if (breakdown === 'country') for (const [key, value] of Object.entries(data.audience(accountId, 'audience_country'))) add([key], value);
  else if (breakdown === 'city') for (const [key, value] of Object.entries(data.audience(accountId, 'audience_city'))) add([key], value);
  else {
    for (const [key, value] of Object.entries(data.audience(accountId, 'audience_gender_age'))) {
      const [gender, age] = key.split('.') as [string, string];
      add(breakdown === 'age' ? [age] : breakdown === 'gender' ? [gender] : [age, gender], value);
    }
  }
  return {
    dimension_keys: breakdown.split(','),
    results: [...cells.values()].map(({ dims, value }) => ({ dimension_values: dims, value: Math.round(value * share) })),
  };
}
