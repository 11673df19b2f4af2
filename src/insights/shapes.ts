/**
 * Reading insight responses. Two shapes answer the same `insights` edge and
 * a published client stored every media insight as 0 by reading one with
 * the other's parser (FIELD-NOTES), so each has its own reader:
 *
 * - media (lifetime): `{ name, period: 'lifetime', values: [ { value } ] }`,
 *   or `total_value: { value }` from newer API versions;
 * - account: `values: [ { value, end_time } ]` one per day (period=day),
 *   `values: [ { value: { KEY: n } } ]` for audience_* distributions,
 *   `total_value: { value }` for a window's total (metric_type=total_value)
 *   and `total_value: { breakdowns: [ { results } ] }` for demographics.
 */

export const DAY_MS = 86_400_000;

interface InsightItem {
  name?: unknown;
  period?: unknown;
  values?: unknown;
  total_value?: unknown;
  title?: unknown;
}

function itemsOf(body: unknown): InsightItem[] {
  const data = (body as { data?: unknown } | null | undefined)?.data;
  return Array.isArray(data) ? data.filter((item): item is InsightItem => typeof item === 'object' && item !== null) : [];
}

const isNumber = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

/**
 * Lifetime media insights, `{ data: [...] }` from `/{media}/insights` or
 * the `insights` field of an expanded media item: metric -> value. A metric
 * missing from the answer (some answer an empty data set instead of 0) is
 * missing here too, never 0.
 */
export function parseMediaInsights(body: unknown): Map<string, number> {
  const values = new Map<string, number>();
  for (const item of itemsOf(body)) {
    if (typeof item.name !== 'string') continue;
    const total = (item.total_value as { value?: unknown } | undefined)?.value;
    const first = Array.isArray(item.values) ? (item.values[0] as { value?: unknown } | undefined)?.value : undefined;
    const value = isNumber(first) ? first : isNumber(total) ? total : undefined;
    if (value !== undefined) values.set(item.name, value);
  }
  return values;
}

/** Titles of the metrics in a media insights answer ("Accounts reached"). */
export function insightTitles(body: unknown): Map<string, string> {
  const titles = new Map<string, string>();
  for (const item of itemsOf(body)) if (typeof item.name === 'string' && typeof item.title === 'string') titles.set(item.name, item.title);
  return titles;
}

/** `2026-11-21T08:00:00+0000` -> ms; the API's offset has no colon, which Date.parse does not promise to read. */
export function parseGraphTime(text: string): number {
  return Date.parse(text.replace(/([+-]\d\d)(\d\d)$/, '$1:$2'));
}

/** YYYY-MM-DD of a UTC instant. */
export function utcDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/**
 * The day a daily value is about. `end_time` marks the end of the day
 * (midnight UTC in the sandbox, 07:00 or 08:00 UTC for the real API's
 * Pacific days), so the day is the one that started 24 hours earlier.
 */
function dayOfEndTime(endTime: string): string | undefined {
  const ms = parseGraphTime(endTime);
  return Number.isFinite(ms) ? utcDate(ms - DAY_MS) : undefined;
}

export interface DistributionEntry {
  key: string;
  value: number;
}

export interface AccountInsightsPage {
  /** metric -> date (YYYY-MM-DD) -> value. */
  daily: Map<string, Map<string, number>>;
  /** metric -> total over the request's window (metric_type=total_value). */
  totals: Map<string, number>;
  /** metric -> entries, largest first. */
  distributions: Map<string, DistributionEntry[]>;
}

function sortEntries(entries: DistributionEntry[]): DistributionEntry[] {
  return entries.sort((a, b) => b.value - a.value || a.key.localeCompare(b.key));
}

/** Reads one account insights answer, whatever mix of shapes it holds. */
export function parseAccountInsights(body: unknown): AccountInsightsPage {
  const page: AccountInsightsPage = { daily: new Map(), totals: new Map(), distributions: new Map() };
  for (const item of itemsOf(body)) {
    if (typeof item.name !== 'string') continue;
    const name = item.name;
    if (Array.isArray(item.values)) {
      for (const entry of item.values as { value?: unknown; end_time?: unknown }[]) {
        const value = entry?.value;
        if (isNumber(value)) {
          const day = typeof entry.end_time === 'string' ? dayOfEndTime(entry.end_time) : undefined;
          if (day === undefined) page.totals.set(name, value);
          else {
            const days = page.daily.get(name) ?? new Map<string, number>();
            days.set(day, value);
            page.daily.set(name, days);
          }
        } else if (typeof value === 'object' && value !== null) {
          // audience_*: the latest distribution wins.
          const entries = Object.entries(value as Record<string, unknown>)
            .filter((pair): pair is [string, number] => isNumber(pair[1]))
            .map(([key, count]) => ({ key, value: count }));
          page.distributions.set(name, sortEntries(entries));
        }
      }
    }
    const total = item.total_value as { value?: unknown; breakdowns?: unknown } | undefined;
    if (typeof total === 'object' && total !== null) {
      if (Array.isArray(total.breakdowns) && total.breakdowns.length > 0) {
        const entries: DistributionEntry[] = [];
        for (const breakdown of total.breakdowns as { results?: unknown }[]) {
          for (const result of Array.isArray(breakdown?.results) ? (breakdown.results as { dimension_values?: unknown; value?: unknown }[]) : []) {
            if (!isNumber(result?.value) || !Array.isArray(result.dimension_values)) continue;
            entries.push({ key: result.dimension_values.map(String).join('.'), value: result.value });
          }
        }
        page.distributions.set(name, sortEntries(entries));
      } else if (isNumber(total.value)) {
        page.totals.set(name, total.value);
      }
    }
  }
  return page;
}
