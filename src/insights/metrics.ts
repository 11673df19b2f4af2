/**
 * The metric catalogue: spec 001's metric tables (post, story, reel,
 * account), which metrics each kind of media answers, and the names the
 * real API retired with their successors (FIELD-NOTES, "Deprecations").
 *
 * The spec's names are the contract: they are sent as asked, retired or
 * not. The catalogue decides what goes into one field-expanded request and
 * what would only make the API fail the whole page, and it explains a
 * rejection. Names it does not know are sent too: the API is the authority.
 *
 * Pure data and functions, no imports: the command file reads it for help
 * text without loading anything else.
 */

/** What decides metric support: media_type for feed posts, the product type for reels and stories. */
export type MediaKind = 'IMAGE' | 'VIDEO' | 'CAROUSEL_ALBUM' | 'REELS' | 'STORY';

/** Spec, "Metrics": Media (post). */
export const POST_METRICS = ['impressions', 'reach', 'saved', 'shares', 'engagement', 'likes', 'comments', 'video_views', 'video_play_actions'] as const;
/** Spec: Story. */
export const STORY_METRICS = ['impressions', 'reach', 'exits', 'taps_back', 'taps_forward'] as const;
/** Spec: Reel. */
export const REEL_METRICS = ['impressions', 'reach', 'plays', 'saved', 'shares', 'likes', 'comments'] as const;
/** Spec: Account. */
export const ACCOUNT_METRICS = ['profile_views', 'follower_count', 'reach', 'impressions', 'audience_city', 'audience_country', 'audience_gender_age'] as const;

/** Demographics: totals broken down by country, city, age or gender (period=lifetime, metric_type=total_value, a breakdown). */
export const DEMOGRAPHIC_METRICS = ['follower_demographics', 'engaged_audience_demographics', 'reached_audience_demographics'] as const;

/** Account metrics that are distributions (period=lifetime), not daily values: of followers, and online followers by hour. */
export const AUDIENCE_METRICS = ['audience_city', 'audience_country', 'audience_gender_age', 'online_followers', ...DEMOGRAPHIC_METRICS] as const;

/**
 * Account metrics Meta serves today only as a range's total
 * (`metric_type=total_value`, FIELD-NOTES "Account metrics today"); the
 * daily ones it serves beside them are reach, follower_count, profile_views
 * and website_clicks (the last two as totals too, and only so from v21.0).
 */
export const TOTAL_VALUE_METRICS = [
  'views',
  'accounts_engaged',
  'total_interactions',
  'likes',
  'comments',
  'shares',
  'saves',
  'replies',
  'follows_and_unfollows',
  'profile_links_taps',
] as const;

/** The account metrics Meta serves today, beyond the spec's (its audience_* and impressions are retired). */
export const CURRENT_ACCOUNT_METRICS = [
  'reach',
  'follower_count',
  'profile_views',
  'website_clicks',
  ...TOTAL_VALUE_METRICS,
  'online_followers',
  ...DEMOGRAPHIC_METRICS,
] as const;

/** `insights account` without --metrics: the spec's daily account metrics. */
export const DEFAULT_ACCOUNT_METRICS = ['reach', 'impressions', 'follower_count', 'profile_views'] as const;
/** `insights media` without --metrics: cheap (every feed kind answers them) and not retired. */
export const DEFAULT_MEDIA_METRICS = ['reach', 'saved', 'shares'] as const;

/** Successor names the real API answers today; known, so that they group like the spec's. */
const SUCCESSORS_BY_KIND: Readonly<Record<MediaKind, readonly string[]>> = {
  IMAGE: ['views', 'total_interactions'],
  CAROUSEL_ALBUM: ['views', 'total_interactions'],
  VIDEO: ['views', 'total_interactions'],
  REELS: ['views', 'total_interactions'],
  STORY: ['views', 'navigation'],
};

const FEED_COMMON = ['impressions', 'reach', 'saved', 'shares', 'engagement', 'likes', 'comments'];

/**
 * Which metrics each kind answers. Video posts add video_views and
 * video_play_actions; reels answer the spec's reel list; stories theirs.
 */
export const METRICS_BY_KIND: Readonly<Record<MediaKind, readonly string[]>> = {
  IMAGE: [...FEED_COMMON, ...SUCCESSORS_BY_KIND.IMAGE],
  CAROUSEL_ALBUM: [...FEED_COMMON, ...SUCCESSORS_BY_KIND.CAROUSEL_ALBUM],
  VIDEO: [...POST_METRICS, ...SUCCESSORS_BY_KIND.VIDEO],
  REELS: [...REEL_METRICS, ...SUCCESSORS_BY_KIND.REELS],
  STORY: [...STORY_METRICS, ...SUCCESSORS_BY_KIND.STORY],
};

/** Kinds the /media edge lists: feed posts and reels (stories have their own edge). */
export const FEED_KINDS: readonly MediaKind[] = ['IMAGE', 'VIDEO', 'CAROUSEL_ALBUM', 'REELS'];

/** Retired names and what replaced them. */
export const RETIRED_METRICS: Readonly<Record<string, readonly string[]>> = {
  impressions: ['views'],
  plays: ['views'],
  video_views: ['views'],
  engagement: ['total_interactions'],
  exits: ['navigation'],
  taps_forward: ['navigation'],
  taps_back: ['navigation'],
  audience_city: ['follower_demographics (breakdown city)'],
  audience_country: ['follower_demographics (breakdown country)'],
  audience_gender_age: ['follower_demographics (breakdown age,gender)'],
};

const KNOWN_MEDIA_METRICS = new Set(Object.values(METRICS_BY_KIND).flat());

/** The names worth offering (completion): every metric the catalogue knows, media and account, but the retired ones. */
export function currentMetricNames(): string[] {
  const all = [...KNOWN_MEDIA_METRICS, ...ACCOUNT_METRICS, ...CURRENT_ACCOUNT_METRICS];
  return [...new Set(all)].filter((metric) => !Object.hasOwn(RETIRED_METRICS, metric)).sort();
}
const KNOWN_ACCOUNT_METRICS = new Set<string>([...ACCOUNT_METRICS, ...CURRENT_ACCOUNT_METRICS]);

/** The kind of a media item from its fields: the product type wins for reels and stories. */
export function mediaKindOf(item: { media_type?: unknown; media_product_type?: unknown }): MediaKind | undefined {
  if (item.media_product_type === 'REELS') return 'REELS';
  if (item.media_product_type === 'STORY') return 'STORY';
  const type = item.media_type;
  return type === 'IMAGE' || type === 'VIDEO' || type === 'CAROUSEL_ALBUM' ? type : undefined;
}

export function isKnownMediaMetric(metric: string): boolean {
  return KNOWN_MEDIA_METRICS.has(metric);
}

export function isKnownAccountMetric(metric: string): boolean {
  return KNOWN_ACCOUNT_METRICS.has(metric);
}

export function isAudienceMetric(metric: string): boolean {
  return (AUDIENCE_METRICS as readonly string[]).includes(metric);
}

export function isDemographicMetric(metric: string): boolean {
  return (DEMOGRAPHIC_METRICS as readonly string[]).includes(metric);
}

/** Whether an account metric is served only as a range's total (metric_type=total_value). */
export function isTotalValueMetric(metric: string): boolean {
  return (TOTAL_VALUE_METRICS as readonly string[]).includes(metric);
}

/**
 * Whether `kind` answers `metric`. Unknown metrics are assumed supported
 * (the API decides); an unknown kind supports only what every kind does.
 */
export function supports(kind: MediaKind | undefined, metric: string): boolean {
  if (!KNOWN_MEDIA_METRICS.has(metric)) return true;
  if (kind === undefined) return FEED_KINDS.every((k) => METRICS_BY_KIND[k].includes(metric));
  return METRICS_BY_KIND[kind].includes(metric);
}

export interface MetricPlan {
  /** Answered by every kind the list can hold: safe to expand on a whole page. */
  common: string[];
  /** Answered by some kinds only: read per item, for the items whose kind answers them. */
  partial: string[];
  /** Answered by none of those kinds: empty cells, no calls. */
  none: string[];
}

/** Splits the requested metrics by how they can be read for a list of these kinds. */
export function planMetrics(metrics: readonly string[], kinds: readonly MediaKind[] = FEED_KINDS): MetricPlan {
  const plan: MetricPlan = { common: [], partial: [], none: [] };
  for (const metric of metrics) {
    const count = kinds.filter((kind) => supports(kind, metric)).length;
    if (count === kinds.length) plan.common.push(metric);
    else if (count === 0) plan.none.push(metric);
    else plan.partial.push(metric);
  }
  return plan;
}

/** "impressions (now views)" style hint for retired names among `metrics`, or undefined. */
export function successorHint(metrics: readonly string[]): string | undefined {
  const retired = metrics.filter((metric) => RETIRED_METRICS[metric]);
  if (retired.length === 0) return undefined;
  return retired.map((metric) => `${metric} -> ${RETIRED_METRICS[metric]!.join(', ')}`).join('; ');
}

/** The spec's default metric list for `insights post|story|reel`. */
export function defaultMetricsFor(kind: 'post' | 'story' | 'reel'): readonly string[] {
  return kind === 'post' ? POST_METRICS : kind === 'story' ? STORY_METRICS : REEL_METRICS;
}

/** Splits `a,b, c` into names, dropping empties and repeats. */
export function parseMetricList(text: string): string[] {
  return [
    ...new Set(
      text
        .split(',')
        .map((m) => m.trim())
        .filter(Boolean),
    ),
  ];
}

/** One warning for retired names the API rejected: which ones, and what to ask for instead. */
export function retiredWarning(metrics: readonly string[], suffix = ''): string {
  const bySuccessor = new Map<string, string[]>();
  for (const metric of metrics) {
    const successor = RETIRED_METRICS[metric]?.join(', ') ?? 'unknown';
    bySuccessor.set(successor, [...(bySuccessor.get(successor) ?? []), metric]);
  }
  const successors = [...bySuccessor].map(([successor, names]) => `${successor} for ${names.join(', ')}`).join('; ');
  return `the graph API rejected ${metrics.join(', ')}: retired; ask for the successor${bySuccessor.size > 1 ? 's' : ''} instead (${successors})${suffix}`;
}
