/**
 * A media item's lifetime insights as the sandbox answers them, per kind,
 * field-expanded or on its edge; a retired metric refused from its version
 * on (metric-schedule.ts) with the text Meta answers. Account insights are
 * account-insights.ts.
 */
import { METRIC_TITLES, SANDBOX_MEDIA_METRICS, type SandboxMedia, type SandboxMediaKind } from './data.js';
import type { FieldRequest } from './fields.js';
import { isRetiredAt, retiredFrom } from './metric-schedule.js';
import { oauth, type Caller } from './request.js';

export function metricList(text: string | undefined): string[] {
  const metrics = (text ?? '')
    .split(',')
    .map((m) => m.trim())
    .filter(Boolean);
  if (metrics.length === 0) throw oauth(100, '(#100) The parameter metric is required');
  return metrics;
}

/**
 * Retired metrics of a media request, refused as Meta refuses them: the
 * names retired at v22.0 with "no longer supported" (feed photos and albums)
 * or "does not support" (videos, reels, stories), the older ones as names
 * the API no longer lists.
 */
function rejectRetired(metrics: readonly string[], caller: Caller, kind: SandboxMediaKind): void {
  metrics.forEach((metric, index) => {
    if (!isRetiredAt(metric, caller.version, caller.mount)) return;
    const from = retiredFrom(metric, caller.mount)!;
    if (metric === 'impressions' || metric === 'plays') {
      throw oauth(
        100,
        kind === 'IMAGE' || kind === 'CAROUSEL_ALBUM'
          ? `(#100) Starting from version v${from}.0 and above, the ${metric} metric is no longer supported for the queried media`
          : `(#100) The Media Insights API does not support the ${metric} metric for this media product type`,
      );
    }
    throw oauth(100, `(#100) metric[${index}] must be one of the following values: ${usable(SANDBOX_MEDIA_METRICS[kind], caller).join(', ')}`);
  });
}

function usable(list: readonly string[], caller: Caller): string[] {
  return list.filter((metric) => !isRetiredAt(metric, caller.version, caller.mount));
}

const ALL_MEDIA_METRICS = new Set(Object.values(SANDBOX_MEDIA_METRICS).flat());

/** The lifetime insights of one media item, or the error the API gives for it. */
export function mediaInsights(item: SandboxMedia, metrics: readonly string[], caller: Caller): unknown[] {
  rejectRetired(metrics, caller, item.kind);
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
