/**
 * Exporting an account's media with their insights in as few calls as the
 * API allows (a developer app has 200 an hour):
 *
 * 1. Each page of `/{account}/media` carries the insights of its items by
 *    field expansion, `fields=...,insights.metric(a,b)`: one call per 100
 *    media instead of one per media. Only metrics that every kind on the
 *    list answers go into the expansion, since one item that cannot answer
 *    fails the whole page.
 * 2. Metrics only some kinds answer (video_views for videos, plays for
 *    reels) are read per item, and only for the items whose kind answers
 *    them; the others get empty cells and one warning.
 * 3. A page whose expansion fails all the same (an item posted before the
 *    business conversion, a catalogue the API disagrees with) is read again
 *    without insights, and only its items are read one by one. An item that
 *    still fails keeps empty cells and is reported.
 * 4. A metric the API rejects as retired is dropped with a warning naming
 *    its successor, and the export goes on with the others.
 */
import type { GraphClient, ListPage, Query } from './client.js';
import { GraphApiError, MetricRejectedError } from './errors.js';
import { FEED_KINDS, mediaKindOf, planMetrics, retiredWarning, supports, type MediaKind } from './metrics.js';
import { insightTitles, parseGraphTime, parseMediaInsights } from './shapes.js';

export const DEFAULT_MEDIA_FIELDS = ['id', 'media_type', 'timestamp', 'caption', 'like_count', 'comments_count', 'permalink'] as const;
/** The API's largest page. */
const MAX_PAGE_SIZE = 100;

export interface MediaExportOptions {
  account: string;
  /** Fields for the output, `id` first. */
  fields: readonly string[];
  metrics: readonly string[];
  /** At most this many media; undefined for all of them. */
  limit?: number | undefined;
  /** Page size (default: the limit, at most 100). */
  pageSize?: number | undefined;
  /** Only media created in [since, until] (ms). */
  since?: number | undefined;
  until?: number | undefined;
  /** After each page: the rows so far and the pages read. */
  onProgress?: (rows: number, pages: number) => void;
  onWarn?: (message: string) => void;
}

export interface MediaRow {
  id: string;
  kind: MediaKind | undefined;
  /** The requested fields as the API returned them (absent ones are missing). */
  fields: Record<string, unknown>;
  /** Every requested metric: a number, or null for an empty cell. */
  metrics: Record<string, number | null>;
}

export interface MediaExport {
  rows: MediaRow[];
  fields: string[];
  metrics: string[];
  /** Media type -> the requested metrics it does not answer (their cells are empty). */
  unsupported: Map<string, { metrics: string[]; items: number }>;
  /** Items whose insights failed even alone. */
  failed: { id: string; reason: string }[];
  /** Metrics the API rejected as retired and the export went on without. */
  dropped: string[];
  /** HTTP requests this export made. */
  calls: number;
}

interface RawMedia {
  id?: unknown;
  timestamp?: unknown;
  media_type?: unknown;
  media_product_type?: unknown;
  insights?: unknown;
  [field: string]: unknown;
}

/** `IMAGE`, `VIDEO`, ... or `REELS`: the label a warning uses for an item's kind. */
function kindLabel(kind: MediaKind | undefined): string {
  return kind ?? 'unknown type';
}

/** The page size of an export of at most `limit` media (undefined: all of them). */
export function mediaPageSize(limit: number | undefined): number {
  return Math.min(limit ?? MAX_PAGE_SIZE, MAX_PAGE_SIZE);
}

/**
 * How many media the account has (`media_count`, one call), or undefined
 * when the API does not say: only what a progress line needs, so any
 * failure is left for the export itself to meet and report.
 */
export async function countMedia(client: GraphClient, account: string): Promise<number | undefined> {
  try {
    const answer = await client.get(account, { fields: 'media_count' });
    const count = (answer as { media_count?: unknown } | undefined)?.media_count;
    return typeof count === 'number' && Number.isSafeInteger(count) && count >= 0 ? count : undefined;
  } catch {
    return undefined;
  }
}

export async function exportMedia(client: GraphClient, options: MediaExportOptions): Promise<MediaExport> {
  const warn = options.onWarn ?? (() => {});
  const startCalls = client.calls;
  const limit = options.limit ?? Infinity;
  const pageSize = options.pageSize ?? mediaPageSize(options.limit);
  const plan = planMetrics(options.metrics, FEED_KINDS);
  /** Metrics still asked for: the retired ones the API rejects leave this set. */
  const active = new Set(options.metrics);
  const dropped: string[] = [];
  const failed: { id: string; reason: string }[] = [];
  const requestFields = [...new Set(['id', ...options.fields, 'media_type', 'media_product_type'])];

  const expansion = () => plan.common.filter((m) => active.has(m));
  const fieldsParam = (withInsights: boolean) => {
    const metrics = withInsights ? expansion() : [];
    return [...requestFields, ...(metrics.length > 0 ? [`insights.metric(${metrics.join(',')})`] : [])].join(',');
  };
  const drop = (error: MetricRejectedError) => {
    const fresh = error.rejected.filter((metric) => active.delete(metric));
    if (fresh.length === 0) return;
    dropped.push(...fresh);
    warn(retiredWarning(fresh, `; ${fresh.length === 1 ? 'its column stays' : 'their columns stay'} empty`));
  };

  /** Reads `metrics` of one item with `/{id}/insights`; failures of this item alone leave its cells empty. */
  const readItem = async (row: MediaRow, metrics: string[]): Promise<void> => {
    let wanted = metrics.filter((m) => active.has(m));
    while (wanted.length > 0) {
      try {
        const values = parseMediaInsights(await client.get(`${row.id}/insights`, { metric: wanted.join(',') }));
        for (const metric of wanted) row.metrics[metric] = values.get(metric) ?? null;
        return;
      } catch (error) {
        if (error instanceof MetricRejectedError && error.onlyRetired) {
          drop(error);
          wanted = wanted.filter((m) => active.has(m));
          continue;
        }
        if (error instanceof MetricRejectedError && /must be one of/.test(error.graph.message)) throw error;
        if (error instanceof GraphApiError || error instanceof MetricRejectedError) {
          failed.push({ id: row.id, reason: error.graph.message });
          return;
        }
        throw error;
      }
    }
  };

  const rows: MediaRow[] = [];
  const query: Query = {
    fields: fieldsParam(true),
    limit: pageSize,
    since: options.since === undefined ? undefined : Math.floor(options.since / 1000),
    until: options.until === undefined ? undefined : Math.floor(options.until / 1000),
  };
  let url: URL | undefined = client.url(`${options.account}/media`, query);
  let pages = 0;
  while (url && rows.length < limit) {
    let page: ListPage<RawMedia>;
    let expanded = expansion().length > 0;
    for (;;) {
      try {
        page = await client.fetch<ListPage<RawMedia>>(url);
        break;
      } catch (error) {
        if (!expanded) throw error;
        if (error instanceof MetricRejectedError && error.onlyRetired) {
          // Ask the same page again without the retired names.
          drop(error);
          url.searchParams.set('fields', fieldsParam(true));
          expanded = expansion().length > 0;
          continue;
        }
        if (error instanceof MetricRejectedError && /must be one of/.test(error.graph.message)) throw error;
        if (!(error instanceof MetricRejectedError) && !(error instanceof GraphApiError && error.graph.code === 100)) throw error;
        // Some item of this page cannot answer: read the page bare, then its items one by one.
        url.searchParams.set('fields', fieldsParam(false));
        expanded = false;
      }
    }

    const items = (Array.isArray(page.data) ? page.data : []).filter((item) => typeof item.id === 'string');
    let reachedSince = false;
    for (const item of items) {
      const created = typeof item.timestamp === 'string' ? parseGraphTime(item.timestamp) : NaN;
      // The API filters by since/until; this holds even if it did not.
      if (options.since !== undefined && created < options.since) {
        reachedSince = true;
        continue;
      }
      if (options.until !== undefined && created > options.until) continue;
      if (rows.length >= limit) break;
      const fields: Record<string, unknown> = {};
      for (const field of options.fields) if (item[field] !== undefined) fields[field] = item[field];
      const row: MediaRow = {
        id: item.id as string,
        kind: mediaKindOf(item),
        fields,
        metrics: Object.fromEntries(options.metrics.map((m) => [m, null])),
      };
      if (expanded) {
        const values = parseMediaInsights(item.insights);
        for (const metric of expansion()) row.metrics[metric] = values.get(metric) ?? null;
      }
      rows.push(row);
      // Per item: everything this kind answers when the page failed, otherwise only the partial metrics.
      const perItem = (expanded ? plan.partial : [...plan.common, ...plan.partial]).filter((m) => supports(row.kind, m));
      if (perItem.length > 0) await readItem(row, perItem);
    }
    options.onProgress?.(rows.length, ++pages);
    // Newest first: once past `since`, later pages are older still.
    url = !reachedSince && page.paging?.next ? client.followUrl(page.paging.next) : undefined;
  }

  // Which types lack which of the metrics still asked for.
  const unsupported = new Map<string, { metrics: string[]; items: number }>();
  for (const row of rows) {
    const lacking = options.metrics.filter((m) => active.has(m) && !supports(row.kind, m));
    if (lacking.length === 0) continue;
    const label = kindLabel(row.kind);
    const entry = unsupported.get(label) ?? { metrics: lacking, items: 0 };
    entry.items++;
    unsupported.set(label, entry);
  }

  return {
    rows,
    fields: [...options.fields],
    metrics: [...options.metrics],
    unsupported,
    failed,
    dropped,
    calls: client.calls - startCalls,
  };
}

/** One warning line for the empty cells of unsupported metrics, or undefined when there are none. */
export function unsupportedWarning(unsupported: MediaExport['unsupported']): string | undefined {
  if (unsupported.size === 0) return undefined;
  const parts = [...unsupported].map(([kind, { metrics, items }]) => `${kind} (${items} item${items === 1 ? '' : 's'}) lacks ${metrics.join(', ')}`);
  return `empty cells where the media type does not answer the metric: ${parts.join('; ')}`;
}

/** The fields of one media item: `/{id}?fields=...`. */
export async function readMediaItem(client: GraphClient, id: string, fields: readonly string[]): Promise<Record<string, unknown>> {
  return client.get<Record<string, unknown>>(id, { fields: [...new Set(['id', ...fields])].join(',') });
}

/** The kind of one media item, for choosing default metrics: one call. */
export async function readMediaKind(client: GraphClient, id: string): Promise<MediaKind | undefined> {
  return mediaKindOf(await client.get<Record<string, unknown>>(id, { fields: 'id,media_type,media_product_type' }));
}

export interface ObjectInsights {
  id: string;
  metrics: { name: string; value: number | null; title: string | undefined }[];
  /** Metrics the API rejected as retired: their values are null. */
  dropped: string[];
}

/**
 * `/{id}/insights?metric=...` for a post, story or reel. Retired names the
 * API rejects are dropped with a warning naming their successors, and the
 * others are asked again; when nothing is left, the rejection is the error.
 */
export async function readObjectInsights(
  client: GraphClient,
  id: string,
  metrics: readonly string[],
  onWarn: (message: string) => void = () => {},
): Promise<ObjectInsights> {
  let wanted = [...metrics];
  const dropped: string[] = [];
  for (;;) {
    try {
      const body = await client.get<unknown>(`${id}/insights`, { metric: wanted.join(',') });
      const values = parseMediaInsights(body);
      const titles = insightTitles(body);
      // Dropped names keep their row, empty: the answer has the shape that was asked for.
      return { id, metrics: metrics.map((name) => ({ name, value: values.get(name) ?? null, title: titles.get(name) })), dropped };
    } catch (error) {
      if (!(error instanceof MetricRejectedError) || !error.onlyRetired) throw error;
      const remaining = wanted.filter((m) => !error.rejected.includes(m));
      if (remaining.length === 0 || remaining.length === wanted.length) throw error;
      dropped.push(...error.rejected);
      onWarn(retiredWarning(error.rejected));
      wanted = remaining;
    }
  }
}
