/**
 * The graph sandbox's data: two business accounts, their media, stories
 * and reels, lifetime media insights, daily account insights and audience
 * distributions. Everything is a pure function of a seed string (FNV-1a of
 * the account, item and metric) and of the anchor instant the data was
 * built at, so tests rebuild the same data with `createGraphData` and
 * compare the CLI's output with it instead of with hard-coded numbers.
 *
 * This table of metric support is the emulator's own (spec 001, "Metrics",
 * plus the successors the field notes name), deliberately separate from
 * the client's catalogue in src/insights/metrics.ts: if the two disagree,
 * the tests say so.
 */

export const DAY_MS = 86_400_000;

/**
 * The sandbox's access tokens: fixed, documented values.
 *
 * - `sandbox-graph-token`: a page token, valid, linked to the first business
 *   account only (so `/me/social_business_accounts` lists exactly one).
 * - `sandbox-graph-token-user`: a user token, valid, reaching both business accounts.
 * - `sandbox-graph-token-noperm`: valid but lacking `pages_read_engagement`: error 200 on every call.
 * - `sandbox-graph-token-expired`: error 190 (subcode 463, session expired) on every call.
 * - `sandbox-graph-token-personal`: the token of a personal (non-business)
 *   account: the "business or creator account" error (code 10) on every call.
 *
 * Any other token is error 190 ("Invalid OAuth access token").
 */
export const SANDBOX_GRAPH_TOKENS = {
  page: 'sandbox-graph-token',
  user: 'sandbox-graph-token-user',
  noPermission: 'sandbox-graph-token-noperm',
  expired: 'sandbox-graph-token-expired',
  personal: 'sandbox-graph-token-personal',
} as const;

export const MAIN_ACCOUNT_ID = '17841400000000001';
/**
 * The Facebook pages the business accounts are linked to, and the user who
 * manages them (the user token's `/me`); a third page has no Instagram
 * account, as pages often do.
 */
export const SANDBOX_PAGES = { main: '100000000000002', second: '100000000000003', unlinked: '100000000000004', user: '100000000000001' } as const;
export const SECOND_ACCOUNT_ID = '17841400000000002';

/** What decides metric support: media_type for feed posts, the product type for reels and stories. */
export type SandboxMediaKind = 'IMAGE' | 'VIDEO' | 'CAROUSEL_ALBUM' | 'REELS' | 'STORY';

const FEED_METRICS = ['impressions', 'reach', 'saved', 'shares', 'engagement', 'likes', 'comments'];

/** Metrics each kind answers, spec names first, then the successors of the retired ones. */
export const SANDBOX_MEDIA_METRICS: Readonly<Record<SandboxMediaKind, readonly string[]>> = {
  IMAGE: [...FEED_METRICS, 'views', 'total_interactions'],
  CAROUSEL_ALBUM: [...FEED_METRICS, 'views', 'total_interactions'],
  VIDEO: [...FEED_METRICS, 'video_views', 'video_play_actions', 'views', 'total_interactions'],
  REELS: ['impressions', 'reach', 'plays', 'saved', 'shares', 'likes', 'comments', 'views', 'total_interactions'],
  STORY: ['impressions', 'reach', 'exits', 'taps_back', 'taps_forward', 'views', 'navigation'],
};

export const METRIC_TITLES: Readonly<Record<string, string>> = {
  impressions: 'Impressions',
  reach: 'Accounts reached',
  saved: 'Saves',
  shares: 'Shares',
  engagement: 'Engagement',
  likes: 'Likes',
  comments: 'Comments',
  video_views: 'Video views',
  video_play_actions: 'Play clicks',
  plays: 'Plays',
  exits: 'Exits',
  taps_back: 'Taps back',
  taps_forward: 'Taps forward',
  views: 'Views',
  total_interactions: 'Interactions',
  navigation: 'Navigation',
  profile_views: 'Profile views',
  follower_count: 'New followers',
  audience_city: 'Audience city',
  audience_country: 'Audience country',
  audience_gender_age: 'Audience gender and age',
  audience_locale: 'Audience locale',
  follower_demographics: 'Follower demographics',
  engaged_audience_demographics: 'Engaged audience demographics',
  reached_audience_demographics: 'Reached audience demographics',
  online_followers: 'Online followers',
  accounts_engaged: 'Accounts engaged',
  saves: 'Saves',
  replies: 'Replies',
  website_clicks: 'Website clicks',
  profile_links_taps: 'Profile link taps',
  follows_and_unfollows: 'Follows and unfollows',
};

export interface SandboxMedia {
  id: string;
  accountId: string;
  kind: SandboxMediaKind;
  /** Creation time, ms since the epoch. */
  createdMs: number;
  /** The readable fields, as the API returns them (caption absent on some items). */
  fields: Record<string, string | number | boolean>;
  /** The items of an album (CAROUSEL_ALBUM only): the `children` edge. */
  children?: SandboxChild[];
  /** Lifetime value of every metric the kind supports. */
  insights: Record<string, number>;
  /** Posted before the account became a business account: insights fail with 100/2108006. */
  preBusiness: boolean;
}

/** One item of an album: fields of its own, no insights (FIELD-NOTES). */
export interface SandboxChild {
  id: string;
  parentId: string;
  accountId: string;
  fields: Record<string, string | number | boolean>;
}

export interface SandboxAccount {
  id: string;
  name: string;
  username: string;
  followersCount: number;
  followsCount: number;
  biography: string;
  /** The legacy numeric Instagram ID (`ig_id`). */
  igId: number;
  profilePictureUrl: string;
  /** The Facebook page the account is linked to (`/me/accounts`, `/{page-id}?fields=instagram_business_account`). */
  pageId: string;
  pageName: string;
  /** Feed posts and reels, newest first: what the /media edge lists. */
  media: SandboxMedia[];
  /** Stories, newest first (the /stories edge lists those younger than 24 hours). */
  stories: SandboxMedia[];
}

export interface GraphDataOptions {
  /** Media items of the first account (default 250). */
  media?: number;
  /** The anchor: media timestamps count back from this instant (ms since the epoch). */
  now: number;
  /** How many of the first account's oldest media predate its business conversion (default 0). */
  preBusinessMedia?: number;
}

export interface GraphData {
  anchorMs: number;
  accounts: SandboxAccount[];
  account(id: string): SandboxAccount | undefined;
  /** A media item, reel or story by ID. */
  media(id: string): SandboxMedia | undefined;
  /** An album item by ID. */
  child(id: string): SandboxChild | undefined;
  /** The value of a daily account metric for the UTC day starting at `dayStartMs`. */
  daily(accountId: string, metric: string, dayStartMs: number): number;
  /** A distribution of followers (audience_*, online_followers by hour): key -> count, in no particular order. */
  audience(accountId: string, metric: string): Record<string, number>;
}

/** FNV-1a, 32 bits: a stable hash so that every value is a function of its name alone. */
export function seedHash(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** An integer in [min, max] decided by `seed`. */
function pick(seed: string, min: number, max: number): number {
  const lo = Math.ceil(min);
  const hi = Math.max(lo, Math.floor(max));
  return lo + (seedHash(seed) % (hi - lo + 1));
}

/** `2026-11-21T12:00:00+0000`: the API's timestamp format (ISO 8601 with a numeric offset). */
export function graphTimestamp(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19)}+0000`;
}

export function startOfUtcDay(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

/**
 * Captions that exercise every CSV rule: commas, double quotes, CR/LF and
 * LF line breaks, a tab, non-ASCII text; every seventh item has none.
 */
const CAPTIONS = [
  (n: number) => `Morning light over the harbour, frame ${n}`,
  (n: number) => `She said "this is the one", and it was (#${n})`,
  (n: number) => `Line one of ${n}\nline two, with a comma`,
  (n: number) => `Plain caption ${n}`,
  (n: number) => `Surf day #${n} — "big" waves, small board 🌊`,
  (n: number) => `Menu: coffee, cake, "the usual"\r\nOpen 9-5 (${n})`,
];

function kindOf(index: number): SandboxMediaKind {
  const slot = index % 10;
  if (slot <= 3) return 'IMAGE';
  if (slot <= 6) return 'VIDEO';
  if (slot <= 8) return 'CAROUSEL_ALBUM';
  return 'REELS';
}

function mediaInsights(seed: string, kind: SandboxMediaKind): Record<string, number> {
  const reach = pick(`${seed}:reach`, 150, 6000);
  const impressions = reach + pick(`${seed}:impressions`, 0, reach);
  const likes = pick(`${seed}:likes`, Math.floor(reach / 12), Math.floor(reach / 4));
  const comments = pick(`${seed}:comments`, 0, Math.floor(likes / 8));
  const saved = pick(`${seed}:saved`, 0, Math.floor(reach / 20));
  const shares = pick(`${seed}:shares`, 0, Math.floor(reach / 30));
  const all: Record<string, number> = {
    impressions,
    reach,
    likes,
    comments,
    saved,
    shares,
    engagement: likes + comments + saved + shares,
    total_interactions: likes + comments + saved + shares,
    video_views: pick(`${seed}:video_views`, reach, reach * 3),
    video_play_actions: pick(`${seed}:video_play_actions`, Math.floor(reach / 2), reach),
    plays: pick(`${seed}:plays`, reach, reach * 4),
    exits: pick(`${seed}:exits`, 0, Math.floor(reach / 10)),
    taps_back: pick(`${seed}:taps_back`, 0, Math.floor(reach / 8)),
    taps_forward: pick(`${seed}:taps_forward`, Math.floor(reach / 4), reach),
  };
  all.views = kind === 'REELS' ? all.plays! : impressions;
  all.navigation = all.exits! + all.taps_back! + all.taps_forward!;
  return Object.fromEntries(SANDBOX_MEDIA_METRICS[kind].map((metric) => [metric, all[metric]!]));
}

function buildMedia(accountId: string, username: string, index: number, kind: SandboxMediaKind, createdMs: number): SandboxMedia {
  const prefix = kind === 'STORY' ? '1795' : '1790';
  const id = `${prefix}${accountId.slice(-1)}${String(index + 1).padStart(11, '0')}`;
  const seed = `${accountId}:${kind === 'STORY' ? 'story' : 'media'}:${index}`;
  const shortcode = seedHash(seed).toString(36).padStart(7, 'x');
  const insights = mediaInsights(seed, kind);
  const fields: Record<string, string | number | boolean> = {
    id,
    media_type: kind === 'REELS' ? 'VIDEO' : kind === 'STORY' ? (index % 2 === 0 ? 'IMAGE' : 'VIDEO') : kind,
    media_product_type: kind === 'REELS' ? 'REELS' : kind === 'STORY' ? 'STORY' : 'FEED',
    timestamp: graphTimestamp(createdMs),
    permalink: `https://social.example/${kind === 'REELS' ? 'reel' : kind === 'STORY' ? 'stories' : 'p'}/${shortcode}/`,
    shortcode,
    username,
    media_url: `https://cdn.social.example/media/${id}.${kind === 'IMAGE' || kind === 'CAROUSEL_ALBUM' ? 'jpg' : 'mp4'}`,
  };
  fields.ig_id = String(2_000_000_000_000_000_000n + BigInt(seedHash(`${seed}:ig_id`)) * 1000n + BigInt(index));
  fields.is_comment_enabled = index % 11 !== 5;
  if (kind === 'VIDEO' || kind === 'REELS' || fields.media_type === 'VIDEO') {
    fields.thumbnail_url = `https://cdn.social.example/media/${id}_thumb.jpg`;
  }
  if (kind !== 'STORY') {
    fields.like_count = insights.likes ?? 0;
    fields.comments_count = insights.comments ?? 0;
    if (index % 7 !== 3) fields.caption = CAPTIONS[index % CAPTIONS.length]!(index + 1);
  }
  const item: SandboxMedia = { id, accountId, kind, createdMs, fields, insights, preBusiness: false };
  if (kind === 'CAROUSEL_ALBUM') item.children = buildChildren(item, username, 2 + (seedHash(`${seed}:children`) % 3));
  return item;
}

function buildChildren(parent: SandboxMedia, username: string, count: number): SandboxChild[] {
  return Array.from({ length: count }, (_, i) => {
    const id = `1791${parent.id.slice(4)}${i + 1}`;
    const video = i % 3 === 2;
    const shortcode = seedHash(`${parent.id}:child:${i}`).toString(36).padStart(7, 'x');
    const fields: Record<string, string | number | boolean> = {
      id,
      media_type: video ? 'VIDEO' : 'IMAGE',
      media_url: `https://cdn.social.example/media/${id}.${video ? 'mp4' : 'jpg'}`,
      permalink: `https://social.example/p/${shortcode}/`,
      shortcode,
      timestamp: parent.fields.timestamp!,
      username,
      ig_id: `${parent.fields.ig_id}${i + 1}`,
    };
    if (video) fields.thumbnail_url = `https://cdn.social.example/media/${id}_thumb.jpg`;
    return { id, parentId: parent.id, accountId: parent.accountId, fields };
  });
}

const COUNTRIES = ['KR', 'US', 'JP', 'DE', 'GB', 'FR', 'BR', 'IN', 'ID', 'VN', 'TH', 'CA', 'AU', 'ES', 'IT', 'MX'];
const CITIES = [
  'Seoul, Seoul',
  'Busan, Busan',
  'Incheon, Incheon',
  'New York, New York',
  'Los Angeles, California',
  'Tokyo, Tokyo',
  'Osaka, Osaka',
  'Berlin, Berlin',
  'London, England',
  'Paris, Île-de-France',
  'São Paulo, São Paulo',
  'Jakarta, Jakarta',
];
const AGES = ['13-17', '18-24', '25-34', '35-44', '45-54', '55-64', '65+'];
const GENDERS = ['F', 'M', 'U'];
const LOCALES = ['ko_KR', 'en_US', 'ja_JP', 'en_GB', 'de_DE', 'fr_FR', 'pt_BR', 'id_ID', 'vi_VN', 'th_TH', 'es_ES'];
const HOURS = Array.from({ length: 24 }, (_, hour) => String(hour));

function distribution(accountId: string, metric: string): Record<string, number> {
  const keys =
    metric === 'audience_country'
      ? COUNTRIES
      : metric === 'audience_city'
        ? CITIES
        : metric === 'audience_locale'
          ? LOCALES
          : metric === 'online_followers'
            ? HOURS
            : GENDERS.flatMap((gender) => AGES.map((age) => `${gender}.${age}`));
  return Object.fromEntries(keys.map((key) => [key, pick(`${accountId}:${metric}:${key}`, 1, 2400)]));
}

function dailyValue(accountId: string, metric: string, dayStartMs: number): number {
  const day = new Date(dayStartMs).toISOString().slice(0, 10);
  const reach = pick(`${accountId}:reach:${day}`, 300, 3000);
  switch (metric) {
    case 'reach':
      return reach;
    case 'impressions':
    case 'views':
      return reach + pick(`${accountId}:impressions:${day}`, 0, reach * 2);
    case 'accounts_engaged':
      // Engaged accounts are among those reached.
      return pick(`${accountId}:accounts_engaged:${day}`, 0, Math.floor(reach / 4));
    case 'follower_count':
      return pick(`${accountId}:follower_count:${day}`, 0, 40);
    case 'profile_views':
      return pick(`${accountId}:profile_views:${day}`, 5, 120);
    default:
      return pick(`${accountId}:${metric}:${day}`, 0, 500);
  }
}

/** Builds the sandbox's data: deterministic for a given anchor and options. */
export function createGraphData(options: GraphDataOptions): GraphData {
  const anchorMs = Math.floor(options.now / 60_000) * 60_000;
  const mediaCount = options.media ?? 250;
  if (!Number.isInteger(mediaCount) || mediaCount < 0) throw new RangeError('media must be a whole number');
  const preBusiness = options.preBusinessMedia ?? 0;

  const specs = [
    { id: MAIN_ACCOUNT_ID, name: 'Sandbox Studio', username: 'sandbox.studio', media: mediaCount, pageId: SANDBOX_PAGES.main, pageName: 'Sandbox Studio Page' },
    { id: SECOND_ACCOUNT_ID, name: 'Sandbox Shop', username: 'sandbox.shop', media: 12, pageId: SANDBOX_PAGES.second, pageName: 'Sandbox Shop Page' },
  ];
  const accounts: SandboxAccount[] = specs.map((spec) => {
    // Newest first, one post every 17 hours back from the anchor.
    const media = Array.from({ length: spec.media }, (_, i) => buildMedia(spec.id, spec.username, i, kindOf(i), anchorMs - (i + 1) * 17 * 3_600_000));
    if (spec.id === MAIN_ACCOUNT_ID) {
      for (const item of media.slice(Math.max(0, media.length - preBusiness))) item.preBusiness = true;
    }
    // Stories 1 to 20 hours old: all alive at the anchor, gone a day later.
    const stories = [1, 3, 6, 10, 20].map((hours, i) => buildMedia(spec.id, spec.username, i, 'STORY', anchorMs - hours * 3_600_000));
    return {
      id: spec.id,
      name: spec.name,
      username: spec.username,
      followersCount: pick(`${spec.id}:followers`, 5000, 90_000),
      followsCount: pick(`${spec.id}:follows`, 50, 900),
      biography: `${spec.name}: a sandbox account of miniapp. Photos, reels and stories, all made up.`,
      igId: 5_000_000_000 + pick(`${spec.id}:ig_id`, 0, 999_999_999),
      profilePictureUrl: `https://cdn.social.example/profile/${spec.username}.jpg`,
      pageId: spec.pageId,
      pageName: spec.pageName,
      media,
      stories,
    };
  });

  const byId = new Map<string, SandboxMedia>();
  for (const account of accounts) for (const item of [...account.media, ...account.stories]) byId.set(item.id, item);
  const accountById = new Map(accounts.map((account) => [account.id, account]));
  const children = new Map<string, SandboxChild>();
  for (const item of byId.values()) for (const child of item.children ?? []) children.set(child.id, child);

  return {
    anchorMs,
    accounts,
    account: (id) => accountById.get(id),
    media: (id) => byId.get(id),
    child: (id) => children.get(id),
    daily: dailyValue,
    audience: distribution,
  };
}
