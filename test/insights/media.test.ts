/**
 * exportMedia against a real sandbox: the call budget, per-type metric
 * support, the per-item fallback for a page that fails, retired metrics,
 * limits and dates. Values are compared with the sandbox's own data.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { GraphClient } from '../../src/insights/client.js';
import { DEFAULT_MEDIA_FIELDS, exportMedia, readObjectInsights, unsupportedWarning, type MediaExportOptions } from '../../src/insights/media.js';
import { MetricRejectedError } from '../../src/insights/errors.js';
import { SandboxClock } from '../../src/sandbox/clock.js';
import { graphRoutes } from '../../src/sandbox/graph/routes.js';
import { MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS, createGraphData } from '../../src/sandbox/graph/data.js';
import { NOW, startGraphSandbox } from './graph-sandbox.js';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (closers.length > 0) await closers.pop()!();
});

function client(url: string, version = 'v18.0'): GraphClient {
  const created = new GraphClient({ baseUrl: url, version, token: SANDBOX_GRAPH_TOKENS.page, sleep: async () => {} });
  closers.push(() => created.close());
  return created;
}

async function started(media: number) {
  const sb = await startGraphSandbox({ media });
  closers.push(sb.close);
  return sb;
}

const base = (overrides: Partial<MediaExportOptions> = {}): MediaExportOptions => ({
  account: MAIN_ACCOUNT_ID,
  fields: [...DEFAULT_MEDIA_FIELDS],
  metrics: ['reach', 'saved', 'shares'],
  ...overrides,
});

describe('exportMedia', () => {
  it('exports 250 media with three metrics in 3 calls, values equal to the sandbox data', async () => {
    const sb = await started(250);
    const graph = client(sb.url);
    const result = await exportMedia(graph, base());
    expect(result.calls).toBe(3);
    expect(await sb.graphCalls()).toBe(3);
    const media = sb.data.account(MAIN_ACCOUNT_ID)!.media;
    expect(result.rows).toHaveLength(250);
    result.rows.forEach((row, i) => {
      const item = media[i]!;
      expect(row.id).toBe(item.id);
      expect(row.fields).toEqual(Object.fromEntries(DEFAULT_MEDIA_FIELDS.filter((f) => item.fields[f] !== undefined).map((f) => [f, item.fields[f]])));
      expect(row.metrics).toEqual({ reach: item.insights.reach, saved: item.insights.saved, shares: item.insights.shares });
    });
    expect(result.unsupported.size).toBe(0);
  });

  it('reads metrics only some types answer per item, for those items only, and reports the others', async () => {
    const sb = await started(40);
    const result = await exportMedia(client(sb.url), base({ metrics: ['reach', 'video_views', 'plays'] }));
    const media = sb.data.account(MAIN_ACCOUNT_ID)!.media;
    const videos = media.filter((m) => m.kind === 'VIDEO').length;
    const reels = media.filter((m) => m.kind === 'REELS').length;
    // One page, plus one call per video (video_views) and per reel (plays).
    expect(result.calls).toBe(1 + videos + reels);
    for (const row of result.rows) {
      const item = sb.data.media(row.id)!;
      expect(row.metrics.reach).toBe(item.insights.reach);
      expect(row.metrics.video_views).toBe(item.kind === 'VIDEO' ? item.insights.video_views : null);
      expect(row.metrics.plays).toBe(item.kind === 'REELS' ? item.insights.plays : null);
    }
    expect(unsupportedWarning(result.unsupported)).toBe(
      'empty cells where the media type does not answer the metric: IMAGE (16 items) lacks video_views, plays; ' +
        'VIDEO (12 items) lacks plays; CAROUSEL_ALBUM (8 items) lacks video_views, plays; REELS (4 items) lacks video_views',
    );
  });

  it('falls back to one call per item only for the page that fails', async () => {
    // 150 media, the 3 oldest posted before the business conversion: the second page fails.
    const app = Fastify();
    const stats = { graphCalls: 0 };
    await app.register(graphRoutes, { prefix: '/graph', stats, clock: new SandboxClock(() => NOW), media: 150, preBusinessMedia: 3 });
    await app.listen({ host: '127.0.0.1', port: 0 });
    closers.push(() => app.close());
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/graph`;

    const result = await exportMedia(client(url), base({ metrics: ['reach'] }));
    // Page 1 (100, expanded), page 2 failed, page 2 again bare, then its 50 items one by one.
    expect(stats.graphCalls).toBe(1 + 1 + 1 + 50);
    expect(result.rows).toHaveLength(150);
    const data = createGraphData({ now: NOW, media: 150, preBusinessMedia: 3 });
    for (const row of result.rows) {
      const item = data.media(row.id)!;
      expect(row.metrics.reach).toBe(item.preBusiness ? null : item.insights.reach);
    }
    expect(result.failed.map((f) => f.id)).toEqual(
      data
        .account(MAIN_ACCOUNT_ID)!
        .media.slice(-3)
        .map((m) => m.id),
    );
    expect(result.failed[0]!.reason).toBe('Invalid parameter');
  });

  it('drops a metric the API rejects as retired, warns with its successor, and goes on', async () => {
    const sb = await started(120);
    const warnings: string[] = [];
    const result = await exportMedia(client(sb.url, 'v22.0'), base({ metrics: ['impressions', 'reach'], onWarn: (m) => warnings.push(m) }));
    // The first page once with impressions (rejected), then both pages without.
    expect(result.calls).toBe(3);
    expect(result.dropped).toEqual(['impressions']);
    expect(warnings).toEqual(['the graph API rejected impressions: retired; ask for the successor instead (views for impressions); its column stays empty']);
    expect(result.rows.every((row) => row.metrics.impressions === null && row.metrics.reach === sb.data.media(row.id)!.insights.reach)).toBe(true);
  });

  it('fails at once on a metric name no media answers', async () => {
    const sb = await started(120);
    const graph = client(sb.url);
    await expect(exportMedia(graph, base({ metrics: ['reach', 'reachh'] }))).rejects.toBeInstanceOf(MetricRejectedError);
    expect(graph.calls).toBe(1);
  });

  it('stops at --limit and honours since/until', async () => {
    const sb = await started(250);
    const limited = await exportMedia(client(sb.url), base({ limit: 7 }));
    expect(limited.rows).toHaveLength(7);
    expect(limited.calls).toBe(1);
    const over = await exportMedia(client(sb.url), base({ limit: 150 }));
    expect(over.rows).toHaveLength(150);
    expect(over.calls).toBe(2);

    const media = sb.data.account(MAIN_ACCOUNT_ID)!.media;
    const since = media[59]!.createdMs;
    const until = media[10]!.createdMs;
    const windowed = await exportMedia(client(sb.url), base({ since, until }));
    expect(windowed.rows.map((r) => r.id)).toEqual(media.slice(10, 60).map((m) => m.id));
  });

  it('reads post, story and reel insights, and keeps rows for dropped retired names', async () => {
    const sb = await started(20);
    const story = sb.data.account(MAIN_ACCOUNT_ID)!.stories[0]!;
    const warnings: string[] = [];
    const result = await readObjectInsights(client(sb.url, 'v22.0'), story.id, ['impressions', 'reach', 'exits'], (m) => warnings.push(m));
    expect(result.metrics).toEqual([
      { name: 'impressions', value: null, title: undefined },
      { name: 'reach', value: story.insights.reach, title: 'Accounts reached' },
      { name: 'exits', value: null, title: undefined },
    ]);
    // Meta names one refused metric an answer: two answers, two warnings.
    expect(warnings).toEqual([
      'the graph API rejected impressions: retired; ask for the successor instead (views for impressions)',
      'the graph API rejected exits: retired; ask for the successor instead (navigation for exits)',
    ]);
    await expect(readObjectInsights(client(sb.url, 'v22.0'), story.id, ['exits'])).rejects.toBeInstanceOf(MetricRejectedError);
  });
});
