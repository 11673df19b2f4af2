/**
 * When Meta retired each insights metric, version by version, as its Graph
 * API changelog writes it, and how the sandbox's mounts apply that:
 *
 * - v18.0: audience_city, audience_country, audience_gender_age,
 *   audience_locale (account); engagement, exits, taps_forward, taps_back
 *   and the carousel_album_* names (media);
 * - v21.0: video_views (media); profile_views and website_clicks as daily
 *   values (account): from then on only with metric_type=total_value;
 * - v22.0: impressions (media and account), plays (media).
 *
 * Meta's own hosts (the `/facebook` and `/instagram` mounts) refuse a metric
 * from the version that retired it on. The spec's mount (`/graph`) serves
 * the spec, whose default version is v18.0 and whose metric tables name
 * audience_*, engagement, exits and taps_*: there the spec's own names live
 * until v22.0 and are refused from v22.0 on, as before; names the spec does
 * not use follow Meta's schedule there too.
 *
 * The version is the one that serves the call (a retired version, or none,
 * is served at the oldest usable one: insights/versions.ts).
 */

/** Which of the sandbox's mounts a call came to: the spec's abstraction, or one of Meta's two hosts. */
export type GraphMount = 'spec' | 'facebook' | 'instagram';

/** The version from which Meta refuses each retired metric (media and account names alike). */
const META_RETIRED_AT: Readonly<Record<string, number>> = {
  audience_city: 18,
  audience_country: 18,
  audience_gender_age: 18,
  audience_locale: 18,
  engagement: 18,
  exits: 18,
  taps_forward: 18,
  taps_back: 18,
  carousel_album_engagement: 18,
  carousel_album_impressions: 18,
  carousel_album_reach: 18,
  carousel_album_saved: 18,
  carousel_album_video_views: 18,
  video_views: 21,
  impressions: 22,
  plays: 22,
};

/** Account metrics Meta answers only as totals (metric_type=total_value) from this version on; daily values before. */
const META_TOTALS_ONLY_FROM: Readonly<Record<string, number>> = {
  profile_views: 21,
  website_clicks: 21,
};

/** The spec's metric names (spec 001, "Metrics"): on the spec's mount, not retired before this version. */
const SPEC_METRIC_NAMES: ReadonlySet<string> = new Set([
  'impressions',
  'reach',
  'saved',
  'shares',
  'engagement',
  'likes',
  'comments',
  'video_views',
  'video_play_actions',
  'exits',
  'taps_back',
  'taps_forward',
  'plays',
  'profile_views',
  'follower_count',
  'audience_city',
  'audience_country',
  'audience_gender_age',
]);
const SPEC_RETIREMENT_FLOOR = 22;

function onMount(version: number | undefined, metric: string, mount: GraphMount): number | undefined {
  if (version === undefined) return undefined;
  return mount === 'spec' && SPEC_METRIC_NAMES.has(metric) ? Math.max(version, SPEC_RETIREMENT_FLOOR) : version;
}

/** The version from which `metric` is refused at `mount`, or undefined while it lives. */
export function retiredFrom(metric: string, mount: GraphMount): number | undefined {
  return onMount(META_RETIRED_AT[metric], metric, mount);
}

export function isRetiredAt(metric: string, version: number, mount: GraphMount): boolean {
  const from = retiredFrom(metric, mount);
  return from !== undefined && version >= from;
}

/** Whether `metric` answers only with metric_type=total_value at this version and mount (not counting metrics that never had daily values). */
export function totalsOnlyAt(metric: string, version: number, mount: GraphMount): boolean {
  const from = onMount(META_TOTALS_ONLY_FROM[metric], metric, mount);
  return from !== undefined && version >= from;
}
