/**
 * Insights as the sandbox answers them: a media item's lifetime metrics
 * (per kind, field-expanded or on its edge) and an account's, by day,
 * as totals, or as the audience's distribution.
 */
import type { FastifyRequest } from 'fastify';
import {
  DAY_MS,
  METRIC_TITLES,
  RETIRED_FROM_VERSION,
  SANDBOX_AUDIENCE_METRICS,
  SANDBOX_DAILY_METRICS,
  SANDBOX_MEDIA_METRICS,
  SANDBOX_RETIRED_METRICS,
  graphTimestamp,
  startOfUtcDay,
  type GraphData,
  type SandboxAccount,
  type SandboxMedia,
} from './data.js';
import type { FieldRequest } from './fields.js';
import { instant, linkTo, oauth, param, type Caller, type Query } from './request.js';

const DEMOGRAPHIC_BREAKDOWNS = new Set(['country', 'city', 'age', 'gender', 'age,gender']);
const MAX_RANGE_S = 30 * 86_400;

export function metricList(text: string | undefined): string[] {
  const metrics = (text ?? '').split(',').map((m) => m.trim()).filter(Boolean);
  if (metrics.length === 0) throw oauth(100, '(#100) The parameter metric is required');
  return metrics;
}

function rejectRetired(metrics: readonly string[], caller: Caller): void {
  if (caller.version < RETIRED_FROM_VERSION) return;
  const retired = metrics.filter((m) => SANDBOX_RETIRED_METRICS.has(m));
  if (retired.length > 0) {
    throw oauth(100, `(#100) Starting from version v${RETIRED_FROM_VERSION}.0, these metrics are no longer supported: ${retired.join(', ')}`);
  }
}

function usable(list: readonly string[], caller: Caller): string[] {
  return caller.version < RETIRED_FROM_VERSION ? [...list] : list.filter((m) => !SANDBOX_RETIRED_METRICS.has(m));
}

const ALL_MEDIA_METRICS = new Set(Object.values(SANDBOX_MEDIA_METRICS).flat());

/** The lifetime insights of one media item, or the error the API gives for it. */
export function mediaInsights(item: SandboxMedia, metrics: readonly string[], caller: Caller): unknown[] {
  rejectRetired(metrics, caller);
  const supported = SANDBOX_MEDIA_METRICS[item.kind];
  metrics.forEach((metric, index) => {
    if (!ALL_MEDIA_METRICS.has(metric)) {
      throw oauth(100, `(#100) metric[${index}] must be one of the following values: ${usable(supported, caller).join(', ')}`);
    }
    if (!supported.includes(metric)) throw oauth(100, `(#100) The metric ${metric} is not supported for this media type`);
  });
  if (item.preBusiness) {
    throw oauth(100, 'Invalid parameter', {
      error_subcode: 2108006,
      error_user_title: 'Media posted before business account conversion',
      error_user_msg: "The media was posted before the most recent time that the user's account was converted to a business account.",
    });
  }
  return metrics.map((name) => ({
    name,
    period: 'lifetime',
    values: [{ value: item.insights[name] }],
    title: METRIC_TITLES[name] ?? name,
    description: `${METRIC_TITLES[name] ?? name} of this media`,
    id: `${item.id}/insights/${name}/lifetime`,
  }));
}

export function insightsFieldMetrics(field: FieldRequest): string[] {
  const metrics = field.modifiers.metric;
  if (!metrics || field.children !== undefined) {
    // `insights{reach}` and a bare `insights` both fail: the metric must be named with .metric(...).
    throw oauth(100, '(#100) The parameter metric is required');
  }
  return metrics.length > 0 ? metrics : metricList('');
}

export function accountInsights(request: FastifyRequest, account: SandboxAccount, data: GraphData, caller: Caller, now: number): unknown {
  const query = request.query as Query;
  const metrics = metricList(param(query, 'metric'));
  rejectRetired(metrics, caller);
  const daily = new Set<string>(SANDBOX_DAILY_METRICS);
  const audience = new Set<string>(SANDBOX_AUDIENCE_METRICS);
  const valid = [...SANDBOX_DAILY_METRICS, ...SANDBOX_AUDIENCE_METRICS, 'follower_demographics'];
  metrics.forEach((metric, index) => {
    if (!valid.includes(metric)) {
      throw oauth(100, `(#100) metric[${index}] must be one of the following values: ${usable(valid, caller).join(', ')}`);
    }
  });
  const period = param(query, 'period');
  if (period === undefined) throw oauth(100, '(#100) The parameter period is required');
  if (period !== 'day' && period !== 'lifetime') throw oauth(100, '(#100) Param period must be one of {day, lifetime}');
  const wrongPeriod = metrics.filter((m) => (period === 'day' ? !daily.has(m) : daily.has(m)));
  if (wrongPeriod.length > 0) {
    throw oauth(100, `(#100) The following metrics (${wrongPeriod.join(', ')}) should be specified with parameter period=${period === 'day' ? 'lifetime' : 'day'}`);
  }
  const totals = param(query, 'metric_type') === 'total_value';
  const title = (name: string) => ({ title: METRIC_TITLES[name] ?? name, description: `${METRIC_TITLES[name] ?? name} of this account` });

  if (period === 'lifetime') {
    const endTime = graphTimestamp(startOfUtcDay(now));
    return {
      data: metrics.map((name) => {
        if (audience.has(name)) {
          return { name, period, values: [{ value: data.audience(account.id, name), end_time: endTime }], ...title(name), id: `${account.id}/insights/${name}/lifetime` };
        }
        // follower_demographics: the totals shape, broken down.
        const breakdown = param(query, 'breakdown');
        if (!totals) throw oauth(100, '(#100) follower_demographics requires metric_type=total_value');
        if (breakdown === undefined || !DEMOGRAPHIC_BREAKDOWNS.has(breakdown)) {
          throw oauth(100, `(#100) The parameter breakdown must be one of ${[...DEMOGRAPHIC_BREAKDOWNS].join(' | ')}`);
        }
        return { name, period, total_value: { breakdowns: [demographics(data, account.id, breakdown)] }, ...title(name), id: `${account.id}/insights/${name}/lifetime` };
      }),
    };
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
  return {
    data: metrics.map((name) => {
      const base = { name, period, ...title(name), id: `${account.id}/insights/${name}/day` };
      if (totals) {
        const sum = days.reduce((total, day) => total + data.daily(account.id, name, day), 0);
        // Reach counts unique accounts: a window's total is less than the sum of its days.
        return { ...base, total_value: { value: name === 'reach' ? Math.round(sum * 0.6) : sum } };
      }
      return { ...base, values: days.map((day) => ({ value: data.daily(account.id, name, day), end_time: graphTimestamp(day + DAY_MS) })) };
    }),
    paging: { previous: shifted(-span), next: shifted(span) },
  };
}

function demographics(data: GraphData, accountId: string, breakdown: string): unknown {
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
    results: [...cells.values()].map(({ dims, value }) => ({ dimension_values: dims, value })),
  };
}
