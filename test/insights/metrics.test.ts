import { describe, expect, it } from 'vitest';
import {
  ACCOUNT_METRICS,
  FEED_KINDS,
  METRICS_BY_KIND,
  POST_METRICS,
  REEL_METRICS,
  RETIRED_METRICS,
  STORY_METRICS,
  mediaKindOf,
  parseMetricList,
  planMetrics,
  retiredWarning,
  successorHint,
  supports,
} from '../../src/insights/metrics.js';
import { SANDBOX_MEDIA_METRICS } from '../../src/sandbox/graph/data.js';
import { ACCOUNT_METRIC_TABLE, liveAccountMetrics } from '../../src/sandbox/graph/account-insights.js';
import { CURRENT_ACCOUNT_METRICS, TOTAL_VALUE_METRICS, isKnownAccountMetric } from '../../src/insights/metrics.js';
import { CURRENT_GRAPH_VERSION, versionNumber } from '../../src/insights/versions.js';

describe('metric catalogue', () => {
  it('holds the spec metric tables', () => {
    expect(POST_METRICS).toEqual(['impressions', 'reach', 'saved', 'shares', 'engagement', 'likes', 'comments', 'video_views', 'video_play_actions']);
    expect(STORY_METRICS).toEqual(['impressions', 'reach', 'exits', 'taps_back', 'taps_forward']);
    expect(REEL_METRICS).toEqual(['impressions', 'reach', 'plays', 'saved', 'shares', 'likes', 'comments']);
    expect(ACCOUNT_METRICS).toContain('audience_gender_age');
  });

  it('agrees with what the sandbox answers for every kind', () => {
    for (const [kind, metrics] of Object.entries(METRICS_BY_KIND)) {
      expect(new Set(metrics), kind).toEqual(new Set(SANDBOX_MEDIA_METRICS[kind as keyof typeof SANDBOX_MEDIA_METRICS]));
    }
  });

  it("knows the account metrics the sandbox serves at the current version on Meta's hosts, and the sandbox every one it knows", () => {
    const current = { version: Math.floor(versionNumber(CURRENT_GRAPH_VERSION)!), mount: 'facebook' as const };
    expect(new Set(liveAccountMetrics(current))).toEqual(new Set(CURRENT_ACCOUNT_METRICS));
    // The spec's account metrics, on the spec's mount before v22.0.
    for (const metric of ACCOUNT_METRICS) expect(liveAccountMetrics({ version: 21, mount: 'spec' })).toContain(metric);
    for (const metric of Object.keys(ACCOUNT_METRIC_TABLE).filter((m) => m !== 'audience_locale')) expect(isKnownAccountMetric(metric), metric).toBe(true);
    // What comes only as totals, on both sides.
    const totalsOnly = Object.entries(ACCOUNT_METRIC_TABLE)
      .filter(([, spec]) => spec.series.length === 0 && !spec.lifetime)
      .map(([metric]) => metric);
    expect(new Set(totalsOnly)).toEqual(new Set(TOTAL_VALUE_METRICS));
  });

  it('tells kinds apart by product type first', () => {
    expect(mediaKindOf({ media_type: 'VIDEO', media_product_type: 'REELS' })).toBe('REELS');
    expect(mediaKindOf({ media_type: 'IMAGE', media_product_type: 'STORY' })).toBe('STORY');
    expect(mediaKindOf({ media_type: 'CAROUSEL_ALBUM', media_product_type: 'FEED' })).toBe('CAROUSEL_ALBUM');
    expect(mediaKindOf({ media_type: 'VIDEO' })).toBe('VIDEO');
    expect(mediaKindOf({})).toBeUndefined();
  });

  it('splits metrics into expandable, per-item and unanswerable ones for a media list', () => {
    expect(planMetrics(['reach', 'saved', 'shares'])).toEqual({ common: ['reach', 'saved', 'shares'], partial: [], none: [] });
    expect(planMetrics(['reach', 'video_views', 'plays', 'exits', 'brand_new'])).toEqual({
      common: ['reach', 'brand_new'],
      partial: ['video_views', 'plays'],
      none: ['exits'],
    });
    expect(supports('IMAGE', 'video_views')).toBe(false);
    expect(supports('VIDEO', 'video_views')).toBe(true);
    expect(supports('REELS', 'video_views')).toBe(false);
    expect(supports(undefined, 'reach')).toBe(true);
    expect(supports(undefined, 'plays')).toBe(false);
    expect(FEED_KINDS).not.toContain('STORY');
  });

  it('names the successors of retired metrics', () => {
    expect(RETIRED_METRICS.impressions).toEqual(['views']);
    expect(successorHint(['reach', 'engagement'])).toBe('engagement -> total_interactions');
    expect(successorHint(['reach'])).toBeUndefined();
    expect(retiredWarning(['exits', 'taps_back', 'impressions'])).toBe(
      'the graph API rejected exits, taps_back, impressions: retired; ask for the successors instead (navigation for exits, taps_back; views for impressions)',
    );
  });

  it('reads a metric list', () => {
    expect(parseMetricList(' reach, saved,,reach ,shares')).toEqual(['reach', 'saved', 'shares']);
  });
});
